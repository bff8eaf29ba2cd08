"""Minimal profile documents for the compare and gains tests: runs of region times, built by hand."""


def profile(runs, warnings=(), ops=None, scenarios=None):
    """A minimal document: ``runs`` is a list of {region_id: cpu µs}, each run's residual 10 µs."""
    doc = {
        "runs": [
            {
                "run_index": index,
                "timing": {"cpu_time_us": sum(regions.values()) + 10.0},
                "regions": [{"region_id": rid, "calls": 1, "cpu_time_us": us} for rid, us in regions.items()],
                "residual": {"cpu_time_us": 10.0},
            }
            for index, regions in enumerate(runs)
        ],
        "warnings": [{"code": code, "message": code.lower(), "source": "core"} for code in warnings],
        "profiler": {"key_averages": {"cpu_time_total": ops or []}},
    }
    if scenarios:
        doc["scenarios"] = scenarios
    return doc


def with_method(doc, region_id, method):
    """``doc`` with ``regions`` metadata marking ``region_id`` as the entry method ``method``, as captures write it."""
    return {**doc, "regions": [*doc.get("regions", []), {"id": region_id, "name": region_id, "method": method}]}
