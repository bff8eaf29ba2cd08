"""The AOT wrapper ``Module``, its states and graph specs, and wrapping by dotted path."""

from aitune.torch.module.graph_spec import GraphSpec, Sample
from aitune.torch.module.paths import unwrap, wrap
from aitune.torch.module.state import ModuleState
from aitune.torch.module.wrapper import Module, StrategyList, StrategyMap

__all__ = ["GraphSpec", "Module", "ModuleState", "Sample", "StrategyList", "StrategyMap", "unwrap", "wrap"]
