"""The project's one exception family: every error a user can hit is one of these, with one sentence."""


class AituneError(Exception):
    """Base of every error aitune raises on purpose; its message is one sentence for the user."""


class ProfileError(AituneError):
    """A profile document or Chrome trace is unreadable, invalid or of an unknown version."""


class CaptureError(AituneError, ValueError):
    """A capture could not run: bad arguments, a failing workload, an unwritable output."""


class BundleError(AituneError):
    """A bug-report bundle cannot be written as asked (too big, unwritable)."""


class UserCodeError(CaptureError):
    """The user's own code (a script, a module, an inference function) raised.

    ``details`` holds its traceback, trimmed to the user's frames, for the command line to show.
    """

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details
