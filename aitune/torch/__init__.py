"""aitune's torch API, named after NVIDIA AITune's: ``profile``, ``PerformanceProfile``, the module registry."""

from aitune.torch.performance.profile import PerformanceProfile, Scenario, analyze_trace, profile
from aitune.torch.registry import MODULE_REGISTRY, ManagedModule, ModuleRegistry

__all__ = [
    "MODULE_REGISTRY",
    "ManagedModule",
    "ModuleRegistry",
    "PerformanceProfile",
    "Scenario",
    "analyze_trace",
    "profile",
]
