"""The project's one exception family: every error a user can hit is one of these, with one sentence."""

import errno


class AituneError(Exception):
    """Base of every error aitune raises on purpose; its message is one sentence for the user."""


class ProfileError(AituneError):
    """A profile document or Chrome trace is unreadable, invalid or of an unknown version."""


class CaptureError(AituneError, ValueError):
    """A capture could not run: bad arguments, a failing workload, an unwritable output."""


class TuningError(AituneError, ValueError):
    """A wrapper or tuning call cannot proceed: a wrong state, no recorded samples, a bad path or option."""


def is_out_of_disk(error: BaseException) -> bool:
    """True when ``error`` or anything in its cause/context chain is ``OSError(ENOSPC)``.

    Out-of-disk is never an expected tuning outcome: callers that turn failures into fallbacks re-raise it.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
