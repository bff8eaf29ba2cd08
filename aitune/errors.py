"""The project's one exception family: every error a user can hit is one of these, with one sentence."""


class AituneError(Exception):
    """Base of every error aitune raises on purpose; its message is one sentence for the user."""


class ProfileError(AituneError):
    """A profile document or Chrome trace is unreadable, invalid or of an unknown version."""


class CaptureError(AituneError, ValueError):
    """A capture could not run: bad arguments, a failing workload, an unwritable output."""


class TuningError(AituneError, ValueError):
    """A wrapper or tuning call cannot proceed: a wrong state, no recorded samples, a bad path or option."""
