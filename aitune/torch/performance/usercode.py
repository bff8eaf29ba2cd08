"""The user's own code as the command line runs it: files and modules loaded, argv swapped, tracebacks trimmed.

Everything changed in the process (``sys.argv``, ``sys.path``, ``sys.modules``) is put back on exit.
"""

from __future__ import annotations

import importlib
import importlib.util
import runpy
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import aitune
from aitune.errors import CaptureError, UserCodeError

_INTERNAL_FILES = (str(Path(aitune.__file__).parent), str(Path(runpy.__file__)), "<frozen ")


def is_file_source(source: str) -> bool:
    """``app.py`` or ``dir/app`` name a file; ``pkg.module`` names an importable module."""
    return source.endswith(".py") or "/" in source or "\\" in source


@contextmanager
def importable_from(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` for the block, as ``python app.py`` puts the script's folder."""
    entry = str(folder.resolve())
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        if entry in sys.path:
            sys.path.remove(entry)


@contextmanager
def script_argv(path: Path, args: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` as ``python path args...`` would set it, restored on exit."""
    saved = sys.argv
    sys.argv = [str(path), *args]
    try:
        yield
    finally:
        sys.argv = saved


def load_module(source: str) -> ModuleType:
    """Import ``source`` (a ``.py`` file or a dotted module) without running its ``__main__`` block.

    A file is imported under its stem, like ``import app`` would; call within `importable_from`.
    """
    if not is_file_source(source):
        return _import_dotted(source)
    path = Path(source)
    if not path.is_file():
        raise CaptureError(f"{source}: no such file; check the path.")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"{source}: cannot be imported as a Python module; pass a .py file.")
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get(path.stem)
    sys.modules[path.stem] = module  # classes defined in the file must find their module (pickle, dataclasses)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        _restore_module(path.stem, saved)
        raise user_code_error(f"{source} raised {type(error).__name__} while loading", error) from error
    return module


def user_code_error(what: str, error: BaseException) -> UserCodeError:
    """The error for the command line: ``what: message``, with the user's traceback as details."""
    return UserCodeError(f"{what}: {error}", details=user_traceback(error))


def user_traceback(error: BaseException) -> str:
    """``error``'s traceback without the leading frames of aitune, runpy and the import machinery."""
    report = traceback.TracebackException.from_exception(error)
    frames = list(report.stack)
    first_user = next(
        (index for index, frame in enumerate(frames) if not frame.filename.startswith(_INTERNAL_FILES)), 0
    )
    report.stack = traceback.StackSummary.from_list(frames[first_user:])
    return "".join(report.format())


def _import_dotted(source: str) -> ModuleType:
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as error:
        if error.name is not None and (source == error.name or source.startswith(error.name + ".")):
            raise CaptureError(
                f"no module named {source!r}; run from the folder that holds it, or pass a path ending in .py."
            ) from None
        raise user_code_error(f"{source} raised {type(error).__name__} while loading", error) from error
    except Exception as error:
        raise user_code_error(f"{source} raised {type(error).__name__} while loading", error) from error


def _restore_module(name: str, saved: ModuleType | None) -> None:
    if saved is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = saved
