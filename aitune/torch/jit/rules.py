"""Which modules JIT tuning intercepts and which of those it may tune (pure functions of the config)."""

from __future__ import annotations

from torch import nn

from aitune.torch.jit.config import JitConfig
from aitune.torch.performance.regions import is_transparent_container, qualified_type

_NEVER_CALLED = (nn.ParameterList, nn.ParameterDict)


def is_interceptable(module: nn.Module, config: JitConfig) -> bool:
    """Whether global interception patches a newly built module: never containers, nor excluded packages/classes."""
    if is_transparent_container(module) or isinstance(module, _NEVER_CALLED):
        return False
    kind = type(module)
    if qualified_type(module).startswith(config.exclude_packages):
        return False
    return not any(kind is excluded or kind.__name__ == excluded for excluded in config.exclude_classes)


def parameter_count(module: nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())


def skip_reason(module: nn.Module, fq_name: str, depth: int, config: JitConfig) -> str | None:
    """Why a placed module may not tune (it still runs, and its children stay candidates), or None."""
    if fq_name in config.skip or type(module).__name__ in config.skip:
        return "in the skip list"
    if config.max_depth is not None and depth > config.max_depth:
        return f"depth {depth} is beyond max_depth {config.max_depth}"
    count = parameter_count(module)
    if count < config.min_parameters:
        return f"{count} parameters, fewer than min_parameters {config.min_parameters}"
    return None
