"""suggestions.json's and tuning.json's typed models: the shipped JSON Schemas are the ones the models generate,
what suggest and tuning write (and every committed tune folder holds) converts into them key for key, and a
document wrong deep inside is refused naming the JSON path."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import msgspec
import orjson
import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.cli.loop import precision_lines
from aitune.compare.quality import TaskJudgment
from aitune.compare.ranks import rank_figures
from aitune.compare.verification import CONTRIBUTION, PairedSpeedup, RegionCheck, Verification
from aitune.errors import ProfileError
from aitune.report.problems import first_problem
from aitune.suggest import LedgerCorrection, suggest
from aitune.suggest import report_schema as suggestions_schema
from aitune.suggest.forecast import read_forecasts
from aitune.suggest.report_model import SuggestionsReport
from aitune.torch.backends.held_memory import HeldMemory, process_memory
from aitune.torch.graphs.graph_spec import GraphSpec
from aitune.torch.loop.outputs import report_of
from aitune.torch.loop.record import Tuning
from aitune.torch.tuning import report_schema as tuning_schema
from aitune.torch.tuning.decision import FASTER, SpeedupInterval
from aitune.torch.tuning.outcome import CandidateResult, GraphResult, RegionOutcome
from aitune.torch.tuning.plan_write import TunedRegion
from aitune.torch.tuning.precision_choice import PrecisionChoice
from aitune.torch.tuning.report_model import TuningReport

SAMPLES = Path(__file__).parents[1] / "sample_traces"
COMMITTED_SUGGESTIONS = sorted(SAMPLES.rglob("suggestions.json"))
COMMITTED_TUNING = sorted(SAMPLES.rglob("tuning.json"))
BEFORE = SAMPLES / "tuned-pipeline" / "before" / "profile.json"
FAST_MEASURE = ait.MeasureConfig(warmup=1, min_repeats=3, max_repeats=6, max_seconds=0.2)


def through_json(document: dict) -> dict:
    return json.loads(json.dumps(document))


# --- the shipped schemas ---


@pytest.mark.parametrize("module", [suggestions_schema, tuning_schema], ids=["suggestions", "tuning"])
def test_the_shipped_schema_is_the_one_the_model_generates(module):
    """Fails when a Struct changed and the file did not: run ``python -m`` on the module named in the id."""
    assert module.SHIPPED.file.read_text(encoding="utf-8") == module.SHIPPED.text()


def test_the_schemas_require_what_their_writers_always_write():
    suggestions, tuning = suggestions_schema.suggestions_schema(), tuning_schema.tuning_schema()

    assert suggestions["required"] == [
        "schema_version", "kind", "domain", "scenario", "run_time_us", "targets", "advice", "recommended",
        "recommended_predicted_speedup", "recommended_upper_bound_speedup", "gain_calibration",
    ]  # fmt: skip
    assert tuning["required"] == ["schema_version", "created_at", "aitune_version", "environment", "modules"]
    status = tuning["$defs"]["CandidateResult"]["properties"]["status"]
    assert status["enum"] == ["accepted", "rejected", "skipped", "winner"]


# --- suggestions.json ---


def test_there_are_committed_suggestions_and_tuning_reports():
    assert COMMITTED_SUGGESTIONS and COMMITTED_TUNING, "no tune folder under sample_traces"


@pytest.mark.parametrize("path", COMMITTED_SUGGESTIONS, ids=lambda path: path.parent.name)
def test_every_committed_suggestions_file_converts_and_its_forecasts_read(path):
    raw = orjson.loads(path.read_bytes())

    typed = msgspec.convert(raw, SuggestionsReport)

    assert list(read_forecasts(raw, path.name)) == [target.path for target in typed.targets]


def written_suggestions() -> dict:
    """suggest's JSON of the committed pipeline's before profile with every part the writer writes: the int8
    outlook and a ledger's correction, through JSON."""
    found = suggest(orjson.loads(BEFORE.read_bytes()), precision="int8")
    return through_json(dataclasses.replace(found, correction=LedgerCorrection(1.25, 4)).to_dict())


def test_every_key_suggest_writes_at_every_depth_is_one_the_model_names():
    written = written_suggestions()

    typed = msgspec.convert(written, SuggestionsReport)

    # the model drops the keys it does not name: what it gives back is what was written
    assert msgspec.to_builtins(typed) == written
    assert typed.precision and typed.ledger_correction


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda doc: doc["targets"][1]["reasons"][0].update(blocking="yes"),
            "targets[1].reasons[0].blocking: 'yes' is not of type 'boolean'",
        ),
        (
            lambda doc: doc["targets"][0].update(predicted_speedup=float("nan")),
            "targets[0].predicted_speedup: nan is not a finite number",
        ),
        (
            lambda doc: doc["advice"][0].update(time_per_run_us=1e300),
            "advice[0].time_per_run_us: 1e+300 is larger than any figure a profile holds (4.6e+18)",
        ),
        (
            lambda doc: doc["targets"][2].update(share=1.5),
            "targets[2].share: 1.5 is greater than the maximum of 1",
        ),
        (lambda doc: doc.update(domain="gpu"), "domain: 'gpu' is not one of 'cpu', 'device'"),
        (
            lambda doc: doc["precision"][0].update(precision="fp8"),
            "precision[0].precision: 'fp8' is not one of 'bf16', 'int8'",
        ),
        (lambda doc: doc["targets"][0]["reasons"][0].update(code="fast"), "targets[0].reasons[0].code: 'fast': "),
        (lambda doc: doc["targets"][3].pop("region_id"), "targets[3]: 'region_id' is a required property"),
    ],
    ids=["wrong-type", "nan", "too-large", "above-one", "domain", "precision", "code", "missing"],
)
def test_a_suggestions_file_wrong_deep_inside_is_refused_naming_the_file_and_the_path(change, problem):
    written = written_suggestions()
    change(written)

    with pytest.raises(ProfileError) as error:
        read_forecasts(written, "run/suggestions.json")

    sentence = str(error.value)
    assert sentence.startswith(f"run/suggestions.json: {problem}")
    assert sentence.endswith("; write it again with `aitune-profile suggest --json` or `tune`.")


@pytest.mark.parametrize("raw", [["vae"], {"targets": {"vae": 1.2}}, {"advice": []}])
def test_a_file_without_a_targets_list_is_no_suggestions_file(raw):
    with pytest.raises(ProfileError, match=r"^run/s\.json: has no targets list, so it is not what `aitune-profile"):
        read_forecasts(raw, "run/s.json")


# --- tuning.json ---


@pytest.mark.parametrize("path", COMMITTED_TUNING, ids=lambda path: path.parent.name)
def test_every_committed_tuning_report_converts(path):
    typed = msgspec.convert(orjson.loads(path.read_bytes()), TuningReport)

    assert typed.modules and typed.modules[0].graphs[0].candidates


def test_a_tuning_report_that_tune_writes_converts_key_for_key(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval())
    wrappers = ait.wrap(model, "0")
    strategy = ait.MinLatencyStrategy(
        [ait.EagerBackend(), ait.TensorRTBackend()], time_budget_s=60.0, measure=FAST_MEASURE
    )  # TensorRT is skipped off a CUDA device
    try:
        ait.tune(model, [torch.randn(2, 8)], strategy=strategy, report_file=tmp_path / "tuning.json")
    finally:
        ait.unwrap(model, list(wrappers))
    written = orjson.loads((tmp_path / "tuning.json").read_bytes())

    typed = msgspec.convert(written, TuningReport)

    assert msgspec.to_builtins(typed) == written
    assert typed.modules[0].graphs[0].strategy.budget is not None


def loop_report() -> dict:
    """tuning.json as the loop writes it (`report_of`) with every part: a candidate with its interval, verdict,
    hold and weights, a JIT module's error and state, the verification, the precision and its choices, the task
    gate, the memory, the ranks and the decoder recipe's cost; through JSON."""
    spec = GraphSpec("0123456789ab", {"args": [{"tensor": "float32", "rank": 2}], "kwargs": {}}, [[2, 8]], [[2, 8]], 4)
    candidate = CandidateResult(
        "int8_dynamic", {}, "int8", "winner", None, 0.5, {"weight_bytes": {"original": 640, "tuned": 160}},
        HeldMemory(4096, None).to_dict(), 10.0, 0.02, 20.0, 2.0, SpeedupInterval(2.0, 1.9, 2.1, 8, 0.95).to_dict(),
        FASTER, 1e-3, 0.9999,
    )  # fmt: skip
    strategy = ait.MinLatencyStrategy([ait.EagerBackend()], time_budget_s=60.0).describe()
    graph = GraphResult(spec.graph_id, spec.to_dict(), 4, strategy, 20.0, 0.03, (candidate,), "int8_dynamic")
    tuned = RegionOutcome("body", "aot_module:body", "torch.nn.Linear", "cpu", (graph,))
    stopped = RegionOutcome("head", "jit_module:head", "torch.nn.Linear", "cpu", (), "RuntimeError: no", None, "eager")
    figure = PairedSpeedup(8, 2.0, 1.9, 2.1, (PairedSpeedup(8, 2.0, 1.9, 2.1),))
    tuning = Tuning(
        tuned=[TunedRegion("body", "aot", nn.Identity(), {}, tuned)],
        results={"body": (tuned,), "head": (stopped,)},
        outcomes={},
        undo=lambda: None,
        switches={},
        verification=Verification([RegionCheck("body", True, CONTRIBUTION, figure)], figure),
        judgment=TaskJudgment("int8", "top1_agreement", 0.99, 1.0, ("body",), 2),
        generation_cost=1.1,
    )
    ranks = {**rank_figures([[10.0], [20.0]], [[5.0], [8.0]]), "stragglers": ["rank 1 ran 2.0× the median"]}
    choices = [PrecisionChoice("body", "int8", "int8_dynamic won")]
    return through_json(report_of(tuning, "int8", choices, process_memory(1000, 1500), ranks))


def test_every_key_the_loop_writes_at_every_depth_is_one_the_model_names():
    written = loop_report()

    typed = msgspec.convert(written, TuningReport)

    assert msgspec.to_builtins(typed) == written
    assert {"verification", "precision_choices", "task_gate", "weight_memory", "process_memory", "ranks"} <= set(
        written
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda doc: doc["modules"][0]["graphs"][0]["candidates"][0]["speedup_interval"].update(rounds="8"),
            "modules[0].graphs[0].candidates[0].speedup_interval.rounds: '8' is not of type 'integer'",
        ),
        (
            lambda doc: doc["modules"][0]["graphs"][0]["candidates"][0].update(latency_median_us=float("inf")),
            "modules[0].graphs[0].candidates[0].latency_median_us: inf is not a finite number",
        ),
        (
            lambda doc: doc["weight_memory"].update(tuned_bytes=2**70),
            "weight_memory.tuned_bytes: an integer of 71 bits is larger than any figure a profile holds (4.6e+18)",
        ),
        (
            lambda doc: doc["modules"][0]["graphs"][0]["candidates"][0].update(status="won"),
            "modules[0].graphs[0].candidates[0].status: 'won' is not one of 'accepted', 'winner', 'rejected', "
            "'skipped'",
        ),
        (
            lambda doc: doc["modules"][0]["graphs"][0]["candidates"][0].update(verdict="maybe"),
            "modules[0].graphs[0].candidates[0].verdict: 'maybe' is not one of 'faster', 'not_faster', 'undecided'",
        ),
        (
            lambda doc: doc["verification"]["regions"][0].update(compared="a hunch"),
            "verification.regions[0].compared: 'a hunch' is not one of 'end to end', 'its contribution', "
            "'the captures', 'outrun by the other candidate'",
        ),
        (
            lambda doc: doc["modules"][0]["graphs"][0]["candidates"][0]["held_memory"].update(guessed_by="eye"),
            "modules[0].graphs[0].candidates[0].held_memory: ",
        ),
        (lambda doc: doc["modules"][1].pop("graphs"), "modules[1]: 'graphs' is a required property"),
    ],
    ids=["wrong-type", "infinity", "huge", "status", "verdict", "comparison", "unknown-measure", "missing"],
)
def test_a_tuning_report_wrong_deep_inside_names_the_json_path(change, problem):
    written = loop_report()
    change(written)

    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(written, TuningReport)
    assert first_problem(written, TuningReport).startswith(problem)


def test_the_loop_reads_the_weights_it_reports_from_the_tuning_report_s_model():
    result = SimpleNamespace(tuning=loop_report(), precision_choices=[], task_gate=None, precision="int8")
    result.tuning["weight_memory"] = {
        "regions": [{"path": "body", "original_bytes": 4 * 2**20, "tuned_bytes": 2**20}],
        "original_bytes": 4 * 2**20,
        "tuned_bytes": 2**20,
    }

    assert precision_lines(result) == ["weights of the tuned regions: 4.00 → 1.00 MB (int8)"]
