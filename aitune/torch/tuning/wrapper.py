"""The AOT wrapper ``aitune.torch.Module``: a transparent proxy that records, tunes and runs a module.

The wrapper installs one dispatching ``forward`` on the user's module instance, so ``nn.Module.__call__``
still runs the user's hooks exactly once and only the body of ``forward`` changes with the state:
the original forward (passthrough), the original forward after recording the call (recording; the
first call of a new wrapper, in init, starts recording, as AITune's wrapper does), or the tuned
backend of the call's graph (tuned). ``close()`` restores the module as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import wrapt
from torch import nn

from aitune.errors import TuningError
from aitune.markers import AOT_REGION_KIND
from aitune.torch.devices import module_device
from aitune.torch.graphs.graph_spec import GraphSpec
from aitune.torch.registry import MODULE_REGISTRY, ManagedModule, ModuleRegistry
from aitune.torch.tuning.outcome import RegionOutcome
from aitune.torch.tuning.recording import Recording, run_tuned
from aitune.torch.tuning.state import ModuleState, check_leave_tuned
from aitune.torch.tuning.strategies import TuneStrategy, default_strategy
from aitune.torch.tuning.tuner import GraphRunner, TuneTarget, restore_graphs, tune_graphs

StrategyList = Sequence[TuneStrategy]
StrategyMap = Mapping[str, TuneStrategy]  # graph id → strategy
WRAPPER_FORMAT = "aitune.aot_module/1"


class Module(wrapt.ObjectProxy):
    """AITune-compatible AOT wrapper; use it wherever the wrapped ``nn.Module`` was used.

    Example::

        block = aitune.torch.Module(model.block, name="block")
        model(x)                      # the first call starts recording; every call that reaches block is recorded
        report = block.tune()         # picks a backend per recorded graph, behind a correctness gate
    """

    def __init__(
        self,
        module: nn.Module,
        name: str | None = None,
        strategy: TuneStrategy | None = None,
        strategies: StrategyList | StrategyMap | None = None,
        dynamic_shapes: Any = None,
        *,
        registry: ModuleRegistry | None = None,
    ) -> None:
        if not isinstance(module, nn.Module):
            raise TuningError(f"aitune.torch.Module wraps an nn.Module, not {type(module).__name__}; pass a module.")
        if isinstance(module, Module) or isinstance(getattr(module.forward, "__self__", None), Module):
            raise TuningError("this module is already wrapped by aitune.torch.Module; use the existing wrapper.")
        super().__init__(module)
        self._self_registry = registry if registry is not None else MODULE_REGISTRY
        self._self_name = _free_name(name, type(module).__name__, self._self_registry)
        self._self_state = ModuleState.INIT
        self._self_strategy = strategy
        self._self_strategies = strategies
        self._self_dynamic_shapes = dynamic_shapes
        self._self_recording = Recording()
        self._self_runners: dict[str, GraphRunner] = {}
        self._self_outcome: RegionOutcome | None = None
        self._self_had_forward = "forward" in vars(module)
        self._self_forward = module.forward  # the original: an instance override or the bound class method
        self._self_dispatch = self._dispatch
        module.forward = self._self_dispatch
        self._self_region = self._self_registry.register(AOT_REGION_KIND, self._self_name, self._describe)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self) -> str:
        state, module = self._self_state.value, self.__wrapped__
        return f"aitune.torch.Module(name={self._self_name!r}, state={state}, module={module!r})"

    @property
    def name(self) -> str:
        """The wrapper's name; its profile region is ``aot_module:<name>``."""
        return self._self_name

    @property
    def state(self) -> ModuleState:
        return self._self_state

    @property
    def module(self) -> nn.Module:
        """The user's module."""
        return self.__wrapped__

    @property
    def device(self) -> torch.device:
        return module_device(self.__wrapped__)

    @property
    def graph_specs(self) -> list[GraphSpec]:
        """One spec per distinct input structure recorded, in recording order."""
        return list(self._self_recording.graphs.values())

    @property
    def tuning_report(self) -> dict[str, Any] | None:
        """The report of the last ``tune()`` (the module's entry), or None before tuning."""
        return self._self_outcome.to_dict() if self._self_outcome is not None else None

    @property
    def outcome(self) -> RegionOutcome | None:
        """What the last ``tune()`` gave (its report entry as a record), or None before tuning."""
        return self._self_outcome

    def enable_recording(self, force: bool = False) -> None:
        """Record every call from now on; from ``tuned`` only with ``force=True`` (drops the tuned backends)."""
        self._leave(ModuleState.RECORDING, force)

    def enable_passthrough(self, force: bool = False) -> None:
        """Behave exactly like the original module; from ``tuned`` only with ``force=True``."""
        self._leave(ModuleState.PASSTHROUGH, force)

    def tune(
        self, device: torch.device | str | None = None, strategy: TuneStrategy | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Tune every recorded graph and switch to ``tuned``; returns this module's tuning report entry.

        ``dry_run`` builds, checks and measures the candidates, returns the report, frees them and keeps
        the current state. Failures never break the module: a graph without an accepted candidate runs eager.
        """
        if self._self_state is ModuleState.TUNED:
            raise TuningError(f"module '{self.name}' is already tuned; call enable_recording(force=True) to re-tune.")
        if not self._self_recording.samples:
            how = "call enable_recording(), then " if self._self_state is ModuleState.PASSTHROUGH else ""
            raise TuningError(
                f"module '{self.name}' has no recorded calls; {how}run it on representative inputs before tune()."
            )
        target = self._target(torch.device(device) if device is not None else self.device)
        strategies = self._strategies_for(strategy)
        runners, outcome = tune_graphs(target, strategies, keep=not dry_run)
        self._self_outcome = outcome
        if not dry_run:
            self._self_runners = runners
            self._self_recording.drop_samples()
            self._self_state = ModuleState.TUNED
        return outcome.to_dict()

    def close(self) -> nn.Module:
        """Unregister, free the tuned backends and restore the module's own ``forward``; returns the module."""
        module = self.__wrapped__
        self._restore_forward()
        self._free_runners()
        self._self_registry.unregister(self._self_region)
        self._self_state = ModuleState.PASSTHROUGH
        return module

    @contextmanager
    def original_forward(self) -> Iterator[None]:
        """Inside the block the module runs its own forward, exactly as if unwrapped; nothing is recorded or freed.

        The loop's end-to-end verification times whole runs with and without the tuned backends this way.
        """
        if not self._restore_forward():
            yield
            return
        try:
            yield
        finally:
            self.__wrapped__.forward = self._self_dispatch

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description of the wrapper (name, state, graph specs, each graph's winning backend)."""
        return saved_form(self._self_name, self._self_state.value, self.graph_specs, self._self_runners)

    @staticmethod
    def is_state_dict_valid(data: Any) -> bool:
        """True when ``data`` came from ``Module.to_dict``."""
        return isinstance(data, Mapping) and data.get("type") == WRAPPER_FORMAT

    @staticmethod
    def from_dict(
        module: nn.Module, data: Mapping[str, Any], device: torch.device | str | None = None, **kwargs: Any
    ) -> Module:
        """Wrap ``module`` again as ``to_dict`` described it; a tuned wrapper rebuilds its winners without recording.

        Each rebuilt backend passes the correctness gate on a synthetic input of the graph's max shapes (on its
        first real calls where the inputs hold objects, such as a cache), or that graph runs eager.
        """
        specs = check_restorable(data, data.get("name", "?") if isinstance(data, Mapping) else "?")
        state = ModuleState(data["state"])
        wrapper = Module(module, name=data["name"], **kwargs)
        wrapper._self_recording.graphs = {spec.graph_id: spec for spec in specs}
        if state is ModuleState.TUNED:
            target = wrapper._target(torch.device(device) if device is not None else wrapper.device)
            wrapper._self_runners = restore_graphs(target, data["tuned_backends"])
        wrapper._self_state = state
        return wrapper

    def _dispatch(self, *args: Any, **kwargs: Any) -> Any:
        state = self._self_state
        if state is ModuleState.TUNED:
            return run_tuned(self._self_runners, self._self_forward, self._self_name, args, kwargs)
        if state is ModuleState.INIT:  # AITune's rule: wrap, call, tune() — no enable_recording() needed
            self._self_state = state = ModuleState.RECORDING
        if state is ModuleState.RECORDING:
            self._self_recording.record(args, kwargs)
        return self._self_forward(*args, **kwargs)

    def _restore_forward(self) -> bool:
        """Put the module's own forward back if the dispatch is installed; True when it was."""
        module = self.__wrapped__
        if vars(module).get("forward") is not self._self_dispatch:
            return False
        if self._self_had_forward:
            module.forward = self._self_forward
        else:
            del module.forward
        return True

    def _leave(self, target: ModuleState, force: bool) -> None:
        if self._self_state is ModuleState.TUNED:
            check_leave_tuned(self.name, target, force)
            self._free_runners()
            self._self_recording.clear()
        self._self_state = target

    def _free_runners(self) -> None:
        for runner in self._self_runners.values():
            runner.close()
        self._self_runners = {}

    def _target(self, device: torch.device) -> TuneTarget:
        return TuneTarget(
            name=self._self_name,
            module=self.__wrapped__,
            forward=self._self_forward,
            graphs=self.graph_specs,
            samples=self._self_recording.samples,
            device=device,
            dynamic_shapes=self._self_dynamic_shapes,
        )

    def _strategies_for(self, strategy: TuneStrategy | None) -> dict[str, TuneStrategy]:
        """Module-level ``strategies`` (per graph) win over ``strategy``, which wins over the default."""
        chosen = self._self_strategies
        fallback = strategy or self._self_strategy or default_strategy()
        ids = list(self._self_recording.graphs)
        if chosen is None:
            return dict.fromkeys(ids, fallback)
        if isinstance(chosen, Mapping):
            return {gid: chosen.get(gid, fallback) for gid in ids}
        if len(chosen) < len(ids):
            raise TuningError(
                f"module '{self.name}' recorded {len(ids)} graphs but strategies lists {len(chosen)};"
                " give one strategy per graph or a dict by graph id."
            )
        return dict(zip(ids, chosen, strict=False))  # extra strategies are unused

    def _describe(self) -> ManagedModule:
        return ManagedModule(AOT_REGION_KIND, self._self_name, self, self.__wrapped__, self._self_state.value)


def saved_form(name: str, state: str, specs: Sequence[GraphSpec], runners: Mapping[str, GraphRunner]) -> dict[str, Any]:
    """The ``Module.to_dict`` form of a module's graphs and their backends, also for a JIT-tuned one."""
    return {
        "type": WRAPPER_FORMAT,
        "name": name,
        "state": state,
        "graphs": [spec.to_dict() for spec in specs],
        "tuned_backends": {gid: runner.backend_dict for gid, runner in runners.items()},
    }


def check_restorable(data: Any, path: str) -> list[GraphSpec]:
    """The graphs of a saved wrapper, checked before anything changes; `TuningError` (one sentence) when the
    data is not a saved wrapper, a graph is malformed, or a tuned graph is not among its graphs.

    A tuned graph whose inputs hold objects (a cache, whose state the saved form does not hold) is rebuilt on
    its first real calls (`aitune.torch.tuning.tuner.restore_graphs`).
    """
    if not Module.is_state_dict_valid(data):
        raise TuningError(
            f"the saved wrapper of '{path}' was not written by aitune.torch.Module.to_dict(); pass that dict."
        )
    graphs, backends = data.get("graphs"), data.get("tuned_backends")
    if not isinstance(graphs, list) or not isinstance(backends, Mapping) or data.get("state") not in _STATES:
        raise TuningError(
            f"the saved wrapper of '{path}' lacks a list of graphs, a map of tuned backends or a known state;"
            " tune again to write a new plan."
        )
    specs = [GraphSpec.from_dict(graph, f"graph {index} of '{path}'") for index, graph in enumerate(graphs)]
    by_id = {spec.graph_id: spec for spec in specs}
    tuned = [
        gid
        for gid, backend in backends.items()
        if not (isinstance(backend, Mapping) and backend.get("name") == "eager")
    ]
    unknown = [gid for gid in tuned if gid not in by_id]
    if unknown:
        raise TuningError(
            f"the saved wrapper of '{path}' tunes graph {str(unknown[0])[:20]!r}, which it does not hold;"
            " tune again to write a new plan."
        )
    return specs


_STATES = {state.value for state in ModuleState}


def sanitize_name(name: str) -> str:
    """A region-safe name: letters, digits, ``_``, ``.`` and ``-`` kept, runs of anything else become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("_") or "module"


def _free_name(name: str | None, type_name: str, registry: ModuleRegistry) -> str:
    """An explicit name must be free; a default one (the class name) gets a suffix: block, block_1, ..."""
    taken = {entry.name for entry in registry if entry.kind == AOT_REGION_KIND}
    if name is not None:
        if name in taken:
            raise TuningError(f"an aitune.torch.Module named '{name}' already exists; pass another name or close it.")
        return name
    base = sanitize_name(type_name)
    candidate, index = base, 1
    while candidate in taken:  # two wrappers of one class get block, block_1, ...
        candidate, index = f"{base}_{index}", index + 1
    return candidate
