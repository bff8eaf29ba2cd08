"""A private place for Inductor's generated code, set only while aitune builds.

torch's default is ``torchinductor_<user>`` in the system's temporary folder: a predictable shared path
that torch uses even when another user made it first (mode 0777), so that user could plant the code
this process then loads.
aitune builds into ``$XDG_CACHE_HOME/aitune/inductor`` (else ``~/.cache/aitune/inductor``), created
mode 0700 and checked before each use as every cache folder is (`aitune.report.cache.unsafe_because`):
one that is a link, owned by someone else or writable by group or others is not used, and a fresh
private temporary folder stands in for it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from aitune.report.cache import make_private, unsafe_because

ENV = "TORCHINDUCTOR_CACHE_DIR"
_stand_ins: dict[str, str] = {}  # one private temporary folder per refused path, removed at exit


def cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """Where aitune keeps Inductor's code: under ``$XDG_CACHE_HOME`` when set to an absolute path, else ``~/.cache``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "aitune" / "inductor"


def private_cache_dir(home: Path | None = None) -> tuple[Path, str | None]:
    """The folder to build in, and why the usual one was not used (None when it was).

    Missing folders on the way are created mode 0700; an existing folder is never re-permissioned or
    followed through a link, only checked.
    """
    path = home or cache_home()
    if not path.exists() and not path.is_symlink():
        try:
            make_private(path)
        except OSError as error:
            return _stand_in(path), f"{path} could not be created ({error.strerror})"
    reason = unsafe_because(path)
    if reason is None:
        return path, None
    return _stand_in(path), f"{path} is not used: {reason}"


@contextmanager
def inductor_cache(path: Path) -> Iterator[None]:
    """Point Inductor at ``path`` for the block; the variable is restored exactly after (removed if it was unset).

    torch's own ``cache_dir()`` writes the variable when it is unset, so restoring also undoes that.
    """
    from torch._inductor.utils import clear_caches  # cached paths derived from the folder are recomputed

    before = os.environ.get(ENV)
    os.environ[ENV] = str(path)
    clear_caches()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before
        clear_caches()


def _stand_in(path: Path) -> Path:
    key = str(path)
    if key not in _stand_ins or unsafe_because(Path(_stand_ins[key])) is not None:
        folder = tempfile.mkdtemp(prefix="aitune-inductor-")  # 0700, a fresh unpredictable name
        atexit.register(shutil.rmtree, folder, True)
        _stand_ins[key] = folder
    return Path(_stand_ins[key])
