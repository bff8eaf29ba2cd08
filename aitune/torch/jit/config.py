"""How JIT tuning behaves: when modules tune, which ones it leaves alone, and dry runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aitune.errors import TuningError
from aitune.report.cache import cache_root
from aitune.torch.tuning.strategies import TuneStrategy

JIT_MODES = ("eager", "deferred")

DEFAULT_EXCLUDED_PACKAGES = ("aitune.", "torch.fx.", "torch._", "torch.export.", "torch.jit.", "torch.ao.")
"""Modules built by tuning itself (exporters, compilers) and aitune's own are never intercepted."""


def default_cache_dir() -> Path:
    """``$AITUNE_CACHE_DIR/jit``, else ``~/.cache/aitune/jit``: where each module's error log goes."""
    return cache_root() / "jit"


@dataclass(frozen=True)
class JitConfig:
    """JIT tuning settings.

    ``mode="eager"`` tunes a module after ``tune_after`` recorded calls (1: on its first call);
    ``mode="deferred"`` records until ``aitune.torch.jit.arm()``, then tunes on the next forward.
    ``exclude_packages`` (module-name prefixes) and ``exclude_classes`` (classes or class names) keep
    modules from being intercepted at all; ``skip`` (fully qualified names or class names),
    ``max_depth`` (0: only the topmost modules) and ``min_parameters`` keep intercepted modules
    from tuning while their children stay candidates. ``dry_run`` builds, checks and measures but keeps
    nothing, failing on purpose with ``dry_run_failure_probability`` to exercise the fallbacks.
    """

    mode: str = "eager"
    tune_after: int = 3
    strategy: TuneStrategy | None = None  # None: aitune's default (min-latency over the default backends)
    device: str | None = None  # None: the module's own device
    exclude_packages: tuple[str, ...] = DEFAULT_EXCLUDED_PACKAGES
    exclude_classes: tuple[type | str, ...] = ()
    skip: tuple[str, ...] = ()
    max_depth: int | None = None
    min_parameters: int = 0
    dry_run: bool = False
    dry_run_failure_probability: float = 0.0
    seed: int | None = None  # seeds the dry-run failure draws
    cache_dir: Path = field(default_factory=default_cache_dir)

    def __post_init__(self) -> None:
        if self.mode not in JIT_MODES:
            raise TuningError(f"JIT mode must be one of {', '.join(JIT_MODES)} (got {self.mode!r}).")
        if self.tune_after < 1:
            raise TuningError(f"tune_after must be at least 1 (got {self.tune_after}); 1 tunes on the first call.")
        if not 0.0 <= self.dry_run_failure_probability <= 1.0:
            raise TuningError(
                f"dry_run_failure_probability must be in [0, 1] (got {self.dry_run_failure_probability})."
            )
        if self.max_depth is not None and self.max_depth < 0:
            raise TuningError(f"max_depth must be 0 or more (got {self.max_depth}); None means no limit.")
