"""Tune a wrapped module's graphs: one trial per graph, the winners kept as runners, the rest freed.

Invariant: whatever happens, the module is left working: a graph without a winner runs the original
forward, and a module tuned for another device goes back to its own device unless a winner needs it there.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from aitune.markers import AOT_REGION_KIND
from aitune.torch.backends import Backend, BuildContext, Built, EagerBackend, backend_from_dict
from aitune.torch.devices import module_device
from aitune.torch.graphs.graph_spec import GraphSpec, Sample, SnapshotError
from aitune.torch.performance.regions import qualified_type
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.measure import MeasureConfig
from aitune.torch.tuning.outcome import GraphResult, RegionOutcome
from aitune.torch.tuning.report import graph_entry, module_entry
from aitune.torch.tuning.strategies import TuneStrategy
from aitune.torch.tuning.trial import Trial

logger = logging.getLogger(__name__)


@dataclass
class TuneTarget:
    """What the tuner needs from a wrapper."""

    name: str
    module: torch.nn.Module
    forward: Callable[..., Any]
    graphs: list[GraphSpec]
    samples: Mapping[str, list[Sample]]
    device: torch.device
    dynamic_shapes: Any = None
    kind: str = AOT_REGION_KIND  # the region kind the report names the module by


class GraphRunner:
    """The backend chosen for one graph; eager (no build) runs the wrapper's original forward. A runner restored
    from a plan for a graph whose inputs hold objects (a cache) is `deferred`: it records its first real calls,
    then builds and gates its backend on them."""

    def __init__(self, backend: Backend, built: Built | None, deferred: DeferredBuild | None = None) -> None:
        self._backend = backend
        self._built = built
        self._deferred = deferred
        self._said_sizes_outside = False

    @classmethod
    def eager(cls) -> GraphRunner:
        return cls(EagerBackend(), None)

    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def backend_dict(self) -> dict[str, Any]:
        return self._backend.to_dict()

    @property
    def is_eager(self) -> bool:
        return self._built is None and self._deferred is None

    @property
    def is_deferred(self) -> bool:
        """True while the runner still records real calls for its build."""
        return self._deferred is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():  # tuned backends serve inference; their outputs carry no autograd graph
            return self._built.run(*args, **kwargs)

    def record_then_build(self, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One real call while deferred: snapshot it, run ``forward`` on it (its output is the call's), and once
        enough calls are kept build the backend under the gate; a call that cannot be snapshotted, or a build
        the gate refuses, leaves the graph eager for good."""
        deferred = self._deferred
        if deferred is None:  # not deferred (any more): nothing to record
            return forward(*args, **kwargs)
        try:
            deferred.samples.append(Sample.capture(args, kwargs))
        except SnapshotError as error:
            self._give_up(deferred, str(error))
            return forward(*args, **kwargs)
        output = forward(*args, **kwargs)
        if len(deferred.samples) >= deferred.calls:
            self._deferred = None
            self._built = deferred.build(deferred.samples)
            if self._built is None:
                self._backend = EagerBackend()
        return output

    def note_sizes_outside(self, region: str, why: str) -> None:
        """Say once that calls of sizes the build does not take run eager, and how to tune for them."""
        if not self._said_sizes_outside:
            self._said_sizes_outside = True
            logger.warning(
                "aitune: the %s build of '%s' takes the sizes it was tuned on only (%s); calls of other sizes run "
                "eager: tune on calls of every size it will see, so the export keeps those dimensions dynamic",
                self.backend,
                region,
                why,
            )

    def fall_back(self) -> None:
        """Switch this graph to eager for good (its backend failed at run time)."""
        self.close()
        self._backend = EagerBackend()

    def close(self) -> None:
        self._deferred = None
        if self._built is not None:
            self._built.release()
            self._built = None

    def _give_up(self, deferred: DeferredBuild, reason: str) -> None:
        logger.warning("aitune: %s for '%s' runs eager: %s", self._backend.name, deferred.region, reason)
        self._deferred = None
        self._backend = EagerBackend()


DEFERRED_CALLS = 2
"""Real calls a deferred build keeps when the plan saw the graph's shapes vary (one otherwise): two sizes show the
backend which dimensions are dynamic, as the recorded samples did while tuning."""


@dataclass
class DeferredBuild:
    """What a deferred runner needs: how many real calls to keep, the calls kept so far, and its gated build."""

    region: str
    calls: int
    build: Callable[[list[Sample]], Built | None]
    samples: list[Sample] = field(default_factory=list)


def tune_graphs(
    target: TuneTarget, strategies: Mapping[str, TuneStrategy], keep: bool = True
) -> tuple[dict[str, GraphRunner], RegionOutcome]:
    """Run one trial per recorded graph; returns the runners by graph id and the module's outcome.

    With ``keep=False`` (a dry run) every candidate is freed and the module stays where it was.
    """
    home = module_device(target.module)
    target.module.to(target.device)
    runners: dict[str, GraphRunner] = {}
    graphs: list[GraphResult] = []
    try:
        for spec in target.graphs:
            strategy = strategies[spec.graph_id]
            samples = [sample.to(target.device) for sample in target.samples.get(spec.graph_id, [])]
            context = _context(target, samples)
            trial = Trial(
                context, strategy.tolerance, strategy.measure, region=target.name, precision=strategy.precision
            )
            winner = strategy.select(trial) if _tunable(spec, trial, strategy) else None
            graphs.append(graph_entry(spec, trial, winner, strategy.describe()))
            for candidate in trial.candidates:
                if candidate is not winner:
                    candidate.release()
            runners[spec.graph_id] = GraphRunner(winner.backend, winner.built) if winner else GraphRunner.eager()
    except BaseException:
        _abandon(runners, target.module, home)
        raise
    if not keep:
        _abandon(runners, target.module, home)
    elif all(runner.is_eager for runner in runners.values()):
        target.module.to(home)
    entry = module_entry(target.name, qualified_type(target.module), str(target.device), graphs, target.kind)
    return runners, entry


def _tunable(spec: GraphSpec, trial: Trial, strategy: TuneStrategy) -> bool:
    """False (every backend skipped with the reason) for a graph whose calls could not be snapshotted:
    comparing candidates on inputs that are not independent copies could accept a wrong one."""
    reason = spec.unsnapshottable or (None if trial.context.samples else "no call of this graph was kept")
    if reason is None:
        return True
    for backend in strategy.backends:
        trial.skip(backend, f"not tried, the graph stays eager: {reason}")
    return False


def restore_graphs(target: TuneTarget, saved: Mapping[str, dict[str, Any]]) -> dict[str, GraphRunner]:
    """Rebuild saved winners without recording: each must pass the gate on its graph's synthetic examples, or, for
    a graph whose inputs hold objects, on its first real calls (a deferred runner)."""
    target.module.to(target.device)
    runners: dict[str, GraphRunner] = {}
    for spec in target.graphs:
        runners[spec.graph_id] = _restore_graph(target, spec, saved.get(spec.graph_id))
    return runners


def _restore_graph(target: TuneTarget, spec: GraphSpec, saved: dict[str, Any] | None) -> GraphRunner:
    if saved is None or saved.get("name") == EagerBackend.name:
        return GraphRunner.eager()
    backend = backend_from_dict(saved)
    build = functools.partial(_gated_build, target, backend)
    examples = spec.examples()
    if examples is None:
        # Its inputs hold objects (a cache) whose state a plan does not hold: the backend is built on the first
        # real calls instead, under the same gate, as it was while tuning.
        calls = min(DEFERRED_CALLS if any(spec.dynamic_dims()) else 1, max(spec.sample_count, 1))
        return GraphRunner(backend, None, DeferredBuild(target.name, calls, build))
    built = build([example.to(target.device) for example in examples])
    return GraphRunner(backend, built) if built is not None else GraphRunner.eager()


def _gated_build(target: TuneTarget, backend: Backend, samples: list[Sample]) -> Built | None:
    """``backend`` built on ``samples`` if it passes the gate there; None (with a warning) otherwise."""
    # A plan's reduced-precision backend was judged on the task when the plan was made (and `tune --plan`
    # judges it again); here it passes the structural gate its level has.
    trial = Trial(_context(target, samples), Tolerance(), MeasureConfig(), timed=False, precision=backend.precision)
    candidate = trial.evaluate(backend)
    if not candidate.passed:
        logger.warning(
            "aitune: restoring %s for '%s' failed (%s); it runs eager", backend.name, target.name, candidate.reason
        )
        return None
    return candidate.built


def _context(target: TuneTarget, samples: list[Sample]) -> BuildContext:
    """The reference outputs, each computed on a fresh copy of its sample; a sample whose forward changed its
    input tensors in place becomes stateful, so every later run gets a copy too."""
    with torch.no_grad():
        observed = [sample.observe_first(target.forward) for sample in samples]
    return BuildContext(
        target.module,
        target.forward,
        [sample for sample, _, _ in observed],
        [output for _, output, _ in observed],
        target.device,
        target.dynamic_shapes,
        reference_states=[state for _, _, state in observed],
    )


def _abandon(runners: dict[str, GraphRunner], module: torch.nn.Module, home: torch.device) -> None:
    for runner in runners.values():
        runner.close()
    runners.clear()
    module.to(home)
