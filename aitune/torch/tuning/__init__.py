"""Tuning: strategies choose among backends, measured and checked against the original module."""
