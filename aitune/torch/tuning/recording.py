"""What a wrapper records and how it runs its tuned graphs; shared by the AOT wrapper and JIT-patched modules."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from aitune.torch.backends import SizesOutsideBuild
from aitune.torch.graphs.graph_spec import GraphSpec, Sample, SnapshotError, graph_key
from aitune.torch.tuning.tuner import GraphRunner

logger = logging.getLogger(__name__)

MAX_SAMPLES_PER_GRAPH = 8
"""Samples kept per graph; each is a deep copy of the call's inputs, cache objects included."""


class Recording:
    """One graph spec per distinct input structure, and up to ``MAX_SAMPLES_PER_GRAPH`` samples of each."""

    def __init__(self) -> None:
        self.graphs: dict[str, GraphSpec] = {}
        self.samples: dict[str, list[Sample]] = {}

    def record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Add one call: widen its graph's shape range and keep a snapshot of its arguments while there is room.

        A call that cannot be snapshotted marks its graph ``unsnapshottable`` (it stays eager, with the
        reason in the tuning report) and frees that graph's samples.
        """
        graph_id, structure = graph_key(args, kwargs)
        spec = self.graphs.get(graph_id)
        if spec is None:
            spec = self.graphs[graph_id] = GraphSpec.first(graph_id, structure, args, kwargs)
        else:
            spec.add(args, kwargs)
        samples = self.samples.setdefault(graph_id, [])
        if spec.unsnapshottable is not None or len(samples) >= MAX_SAMPLES_PER_GRAPH:
            return
        try:
            samples.append(Sample.capture(args, kwargs))
        except SnapshotError as error:
            spec.unsnapshottable = str(error)
            samples.clear()

    def drop_samples(self) -> None:
        """Free the samples (they served tuning; keeping them would pin their memory); the specs stay."""
        self.samples = {}

    def clear(self) -> None:
        self.graphs, self.samples = {}, {}


def run_tuned(
    runners: Mapping[str, GraphRunner], forward: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict
) -> Any:
    """Run the call's tuned graph, or ``forward`` for an unknown or eager graph.

    A backend failing at run time never breaks the user's model: the call runs ``forward`` and the
    graph runs eager from then on (a user error raises from ``forward`` and leaves the backend in place).
    A call of sizes the build was not made for (an export that fixed them) runs ``forward``, and the build
    stays for the sizes it takes.
    """
    runner = runners.get(graph_key(args, kwargs)[0])
    if runner is None or runner.is_eager:
        return forward(*args, **kwargs)
    if runner.is_deferred:
        return runner.record_then_build(forward, args, kwargs)
    try:
        return runner(*args, **kwargs)
    except SizesOutsideBuild as outside:
        runner.note_sizes_outside(name, str(outside))
        return forward(*args, **kwargs)
    except Exception as error:
        result = forward(*args, **kwargs)
        logger.warning("aitune: %s backend of '%s' failed (%s); running eager from now on", runner.backend, name, error)
        runner.fall_back()
        return result
