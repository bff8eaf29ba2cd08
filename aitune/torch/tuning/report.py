"""The tuning report: per module and graph, every candidate with its build time, latency, errors and verdict.

Keys are stable: every key is always present, with null where a figure does not apply (a skipped
candidate has no build time). ``schema_version`` changes when a key's meaning does; keys added since
(``speedup_interval``, ``verdict``, ``thread_budget``, ``held_memory``, ``process_memory``, ``precision`` on
modules and candidates, ``precision_choices``) are additive. `aitune.torch.tuning.report_model` is the report's
one written definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

import aitune
from aitune.markers import AOT_REGION_KIND, region_id
from aitune.torch.backends.threads import torch_threads
from aitune.torch.graphs.graph_spec import GraphSpec
from aitune.torch.tuning.outcome import EAGER, CandidateResult, GraphResult, RegionOutcome
from aitune.torch.tuning.report_model import REPORT_SCHEMA_VERSION
from aitune.torch.tuning.trial import Candidate, Trial


def candidate_entry(candidate: Candidate) -> CandidateResult:
    """One candidate's result, its figures rounded as the report writes them."""
    latency, agreement, decision = candidate.latency, candidate.agreement, candidate.decision
    interval = decision.interval if decision is not None else None
    return CandidateResult(
        backend=candidate.backend.name,
        config=candidate.backend.config(),
        precision=candidate.backend.precision,
        status=candidate.status,
        reason=candidate.reason,
        build_time_s=_rounded(candidate.build_s, 3),
        build_details=candidate.build_details,
        held_memory=candidate.held.to_dict() if candidate.held is not None else None,
        latency_median_us=_rounded(latency.median_us if latency else None, 1),
        latency_cv=_rounded(latency.cv if latency else None, 4),
        eager_latency_median_us=_rounded(candidate.eager.median_us if candidate.eager else None, 1),
        speedup_vs_eager=_rounded(candidate.speedup, 3),
        speedup_interval=interval.to_dict() if interval is not None else None,
        verdict=decision.verdict if decision is not None else None,
        max_abs_error=_finite(agreement.max_abs_error) if agreement else None,
        cosine_similarity=_finite(agreement.cosine_similarity) if agreement else None,
    )


def graph_entry(spec: GraphSpec, trial: Trial, winner: Candidate | None, strategy: dict[str, Any]) -> GraphResult:
    """One graph: its spec, the eager baseline, every candidate in the order tried, and the winner."""
    eager = trial.measured_eager
    return GraphResult(
        graph_id=spec.graph_id,
        spec=spec.to_dict(),
        samples=len(trial.context.samples),
        strategy=strategy,
        eager_latency_median_us=_rounded(eager.median_us if eager else None, 1),
        eager_latency_cv=_rounded(eager.cv if eager else None, 4),
        candidates=tuple(candidate_entry(c) for c in trial.candidates),
        winner=winner.backend.name if winner is not None else EAGER,
    )


def module_entry(
    name: str, module_type: str, device: str, graphs: Sequence[GraphResult], kind: str = AOT_REGION_KIND
) -> RegionOutcome:
    return RegionOutcome(name, region_id(kind, name), module_type, device, tuple(graphs))


def tuning_report(
    outcomes: Sequence[RegionOutcome], environment: dict[str, Any], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The whole report for one tuning call, its one writer; ``thread_budget`` is torch's threads, which eager,
    every candidate and both captures ran with (ONNX Runtime's sessions and Inductor's code are built with them).
    ``extra`` (the loop's verification, precision, task gate and memory) follows the modules."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "aitune_version": aitune.__version__,
        "environment": environment,
        "thread_budget": torch_threads().to_dict(),
        "modules": [outcome.to_dict() for outcome in outcomes],
        **(extra or {}),
    }


def save_tuning_report(report: dict[str, Any], path: str | Path) -> Path:
    """Write the report as indented JSON; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    return target


def _rounded(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def _finite(value: float) -> float | None:
    """JSON has no Infinity: an unmeasurable error (a shape mismatch) is written as null."""
    return value if value == value and abs(value) != float("inf") else None


def weight_memory(tuned: Sequence[Any]) -> dict[str, Any]:
    """What the tuned regions' weights take, per region and in all: the original module's bytes and the tuned
    copy's (a reduced precision's ``build_details.weight_bytes``); a region tuned in fp32 keeps its bytes.

    The original stays resident beside the copy (it is what verification and a fall back run), so the
    saving is what a deployment that loads the tuned weights only would save.
    """
    regions = []
    for region in tuned:
        weights = region.report.weight_bytes if region.report is not None else None
        if weights is not None:
            regions.append(
                {"path": region.path, "original_bytes": weights["original"], "tuned_bytes": weights["tuned"]}
            )
    return {
        "regions": regions,
        "original_bytes": sum(region["original_bytes"] for region in regions),
        "tuned_bytes": sum(region["tuned_bytes"] for region in regions),
    }
