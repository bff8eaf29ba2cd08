"""aitune's torch API, named after NVIDIA AITune's: profile, Module, wrap, tune, strategies and backends,
and the closed loop beyond it: optimize (capture, suggest, tune, capture, compare) and apply_plan."""

from aitune.report.trace_writes import wait_for_traces
from aitune.torch.backends import (
    AutocastBackend,
    Backend,
    EagerBackend,
    InductorBackend,
    OnnxRuntimeBackend,
    TensorRTBackend,
)
from aitune.torch.graphs.graph_spec import GraphSpec
from aitune.torch.jit import JitConfig, JITRegistration, register_for_jit_tuning
from aitune.torch.loop import LoopConfig, LoopResult, optimize
from aitune.torch.performance.profile import PerformanceProfile, Scenario, analyze_trace, profile
from aitune.torch.registry import MODULE_REGISTRY, ManagedModule, ModuleRegistry
from aitune.torch.tuning.api import tune
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.measure import MeasureConfig
from aitune.torch.tuning.paths import unwrap, wrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.report import save_tuning_report
from aitune.torch.tuning.state import ModuleState
from aitune.torch.tuning.strategies import FirstWinsStrategy, MinLatencyStrategy, OneBackendStrategy, TuneStrategy
from aitune.torch.tuning.wrapper import Module

__all__ = [
    "MODULE_REGISTRY",
    "AutocastBackend",
    "Backend",
    "EagerBackend",
    "FirstWinsStrategy",
    "GraphSpec",
    "InductorBackend",
    "JITRegistration",
    "JitConfig",
    "LoopConfig",
    "LoopResult",
    "ManagedModule",
    "MeasureConfig",
    "MinLatencyStrategy",
    "Module",
    "ModuleRegistry",
    "ModuleState",
    "OneBackendStrategy",
    "OnnxRuntimeBackend",
    "PerformanceProfile",
    "Scenario",
    "TensorRTBackend",
    "Tolerance",
    "TuneStrategy",
    "analyze_trace",
    "apply_plan",
    "optimize",
    "profile",
    "register_for_jit_tuning",
    "save_tuning_report",
    "tune",
    "unwrap",
    "wait_for_traces",
    "wrap",
]
