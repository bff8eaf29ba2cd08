"""The project's one exception family: every error a user can hit is one of these, with one sentence."""

import errno


class AituneError(Exception):
    """Base of every error aitune raises on purpose; its message is one sentence for the user."""


class ProfileError(AituneError):
    """A profile document or Chrome trace is unreadable, invalid or of an unknown version."""


class CaptureError(AituneError, ValueError):
    """A capture could not run: bad arguments, a failing workload, an unwritable output."""


class BundleError(AituneError):
    """A bug-report bundle cannot be written as asked (too big, unwritable)."""


class OutputError(AituneError):
    """A file or folder cannot be written: a full disk, a folder where a file should go, no permission."""


class UserCodeError(CaptureError):
    """The user's own code (a script, a module, an inference function) raised.

    ``details`` holds its traceback, trimmed to the user's frames, for the command line to show.
    """

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


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


class HistoryError(AituneError):
    """The history store cannot be opened or used as asked: a corrupt or foreign database, an unreachable server."""
