"""What tuning one region gave, as records: per graph every candidate tried and the winner.

The tuner makes them (`aitune.torch.tuning.report` builds them from its trials), the loop and the plan
read their fields, and `RegionOutcome.to_dict` is their one JSON form: a module entry of the tuning
report. A plan's replayed region (`RegionOutcome.replayed`) is the same record with nothing tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

EAGER = "eager"


@dataclass(frozen=True)
class CandidateResult:
    """One candidate's line; ``speedup_vs_eager`` is eager median ÷ candidate median, timed in turns;
    ``speedup_interval`` the median per-round speedup with its interval, on which ``verdict`` was decided."""

    backend: str
    config: dict[str, Any]
    precision: str  # the level the backend computes at: fp32, bf16 or int8
    status: str
    reason: str | None
    build_time_s: float | None
    build_details: dict[str, Any] | None
    held_memory: dict[str, Any] | None
    latency_median_us: float | None
    latency_cv: float | None
    eager_latency_median_us: float | None
    speedup_vs_eager: float | None
    speedup_interval: dict[str, Any] | None
    verdict: str | None
    max_abs_error: float | None
    cosine_similarity: float | None

    @property
    def won(self) -> bool:
        return self.status == "winner"

    @property
    def speedup(self) -> float | None:
        """The figure the strategy compared candidates by: the median paired speedup when decided, else
        ``speedup_vs_eager``; None when not timed."""
        if self.speedup_interval is not None:
            return self.speedup_interval["speedup"]
        return self.speedup_vs_eager

    def to_dict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True)
class GraphResult:
    """One graph: its spec (`GraphSpec.to_dict`), the eager baseline, every candidate in the order tried, and
    the winner's backend name (``eager`` when none won)."""

    graph_id: str
    spec: dict[str, Any]
    samples: int
    strategy: dict[str, Any]
    eager_latency_median_us: float | None
    eager_latency_cv: float | None
    candidates: tuple[CandidateResult, ...]
    winner: str

    @property
    def won(self) -> bool:
        """Whether a candidate won: only its status tells an `EagerBackend` win from no win."""
        return any(candidate.won for candidate in self.candidates)

    @property
    def winning(self) -> CandidateResult | None:
        """The winner's line, when a backend (not eager) won."""
        if self.winner == EAGER:
            return None
        return next((candidate for candidate in self.candidates if candidate.backend == self.winner), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph_id": self.graph_id,
            "spec": self.spec,
            "samples": self.samples,
            "strategy": self.strategy,
            "eager": {"latency_median_us": self.eager_latency_median_us, "latency_cv": self.eager_latency_cv},
            "candidates": [candidate.to_dict() for candidate in self.candidates],
            "winner": self.winner,
        }


@dataclass(frozen=True)
class RegionOutcome:
    """What tuning one region gave: its graphs, and (JIT) the error that stopped it and its state."""

    name: str
    region_id: str
    module_type: str
    device: str
    graphs: tuple[GraphResult, ...]
    error: str | None = None  # JIT: the exception that stopped its tuning, as ``Type: message``
    error_log: str | None = None  # JIT: where its traceback was written, when it could be
    state: str | None = None  # JIT: the patched module's state when the outcome was read

    @classmethod
    def replayed(cls, name: str, region_id: str, backends: Mapping[str, Mapping[str, Any]]) -> RegionOutcome:
        """A plan's region: each graph's saved backend (by graph id), nothing tried or timed."""
        graphs = tuple(
            GraphResult(graph_id, {}, 0, {}, None, None, (), str(backend["name"]))
            for graph_id, backend in backends.items()
        )
        return cls(name, region_id, "", "", graphs)

    @property
    def leading(self) -> GraphResult | None:
        """The most sampled graph that did not stay eager: the one the region's winner and figures are read from."""
        won = [graph for graph in self.graphs if graph.winner != EAGER]
        return max(won, key=lambda graph: graph.samples) if won else None

    @property
    def winner(self) -> str:
        """The winner of the most sampled graph that did not stay eager, or ``eager``."""
        return self.leading.winner if self.leading is not None else EAGER

    @property
    def precision(self) -> str | None:
        """The level the region's winner computes at; fp32 when every graph stayed eager; None for a plan's
        replayed region (no candidate line says it)."""
        if self.leading is None:
            return "fp32"
        winning = self.leading.winning
        return winning.precision if winning is not None else None

    @property
    def lost_because(self) -> str | None:
        """Why no candidate won: each candidate's reason, joined (None when one won)."""
        if any(graph.winner != EAGER for graph in self.graphs):
            return None
        reasons = [
            f"{candidate.backend}: {candidate.reason}"
            for graph in self.graphs
            for candidate in graph.candidates
            if candidate.reason
        ]
        return "; ".join(dict.fromkeys(reasons)) or "no candidate backend passed the gate"

    @property
    def speedup_vs_eager(self) -> float | None:
        """The winning candidate's speedup over eager of the most sampled graph a backend won."""
        winning = self.leading.winning if self.leading is not None else None
        return winning.speedup_vs_eager if winning is not None else None

    @property
    def held_memory(self) -> dict[str, int | None] | None:
        """What the winning backends hold beside the module: the sum of each graph's winner's ``held_memory``
        (host and device bytes); None without a measure."""
        measured = [
            candidate.held_memory
            for graph in self.graphs
            for candidate in graph.candidates
            if candidate.won and candidate.backend != EAGER and candidate.held_memory
        ]
        if not measured:
            return None
        return {
            key: sum(held[key] for held in measured) if all(held.get(key) is not None for held in measured) else None
            for key in ("host_bytes", "device_bytes")
        }

    @property
    def weight_bytes(self) -> dict[str, int] | None:
        """The first winner's ``build_details.weight_bytes`` (original and tuned), when its backend copies weights."""
        return next(
            (
                candidate.build_details["weight_bytes"]
                for graph in self.graphs
                for candidate in graph.candidates
                if candidate.won and "weight_bytes" in (candidate.build_details or {})
            ),
            None,
        )

    def with_state(self, state: str) -> RegionOutcome:
        return replace(self, state=state)

    def to_dict(self) -> dict[str, Any]:
        """The tuning report's entry for this module; ``error`` and ``state`` only where they apply."""
        entry: dict[str, Any] = {
            "name": self.name,
            "region_id": self.region_id,
            "module_type": self.module_type,
            "device": self.device,
            "precision": self.precision,
            "graphs": [graph.to_dict() for graph in self.graphs],
        }
        if self.error is not None:
            entry.update(error=self.error, error_log=self.error_log)
        if self.state is not None:
            entry["state"] = self.state
        return entry
