"""The compare report's typed model: the shipped JSON Schema is generated from it and stays in step, every
committed tune folder's report converts into it, and a report wrong deep inside is refused naming the path."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import msgspec
import orjson
import pytest
from documents import profile

from aitune.compare import compare_profiles
from aitune.compare.gains import RegionGain, Slowdown, WholeModel
from aitune.compare.loop_report import COMPARE_REPORT, compare_report, read_compare_report, read_loop_report
from aitune.compare.quality import TaskJudgment
from aitune.compare.ranks import rank_figures
from aitune.compare.report_model import CompareReport
from aitune.compare.report_schema import SHIPPED, compare_schema
from aitune.compare.verification import CONTRIBUTION, PairedSpeedup, RegionCheck, Verification
from aitune.errors import ProfileError

SAMPLES = Path(__file__).parents[1] / "sample_traces"
COMMITTED = sorted(SAMPLES.rglob(COMPARE_REPORT))


def test_the_shipped_schema_is_the_one_the_model_generates():
    """Fails when a Struct changed and the file did not: run ``python -m aitune.compare.report_schema``."""
    assert SHIPPED.file.read_text(encoding="utf-8") == SHIPPED.text()


def test_the_schema_requires_what_a_reader_cannot_do_without_and_allows_unknown_keys():
    schema = compare_schema()

    assert schema["required"] == ["domain", "speedup", "tuned_regions"]
    assert "additionalProperties" not in json.dumps(schema["$defs"]["TunedRegion"])
    assert schema["$defs"]["EndToEnd"]["properties"]["source"]["enum"] == ["captures", "nothing tuned", "verified"]


def test_there_is_a_committed_tune_folder():
    assert COMMITTED, "no compare.json under sample_traces"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.parent.name)
def test_every_committed_tune_folder_s_report_converts_and_reads(path):
    raw = orjson.loads(path.read_bytes())

    msgspec.convert(raw, CompareReport)
    assert read_compare_report(path, path.name).regions


def written_report() -> dict:
    """A compare report with every part the writer writes (verification, whole model, slowdowns, task gate,
    ranks), through JSON."""
    diff = compare_profiles(profile([{"untuned_module:a": 100.0}] * 3), profile([{"aot_module:a": 50.0}] * 3))
    figure = PairedSpeedup(8, 2.0, 1.9, 2.1, (PairedSpeedup(8, 2.0, 1.9, 2.1),))
    check = RegionCheck("a", True, CONTRIBUTION, figure)
    gain = RegionGain("a", "onnxruntime", None, 1.8, 2.0, 2.2, 2.0, check, 2.0)
    report = compare_report(
        diff,
        [gain],
        whole_model=WholeModel(1.9, 1.8, ("a", "b"), True, "one build instead of 2"),
        verification=Verification([check], figure),
        slowdowns=[Slowdown("b", 1.3, 1.2, 1.4)],
        precision="int8",
        task_gate=TaskJudgment("int8", "top1_agreement", 0.99, 1.0, ("a",), 2),
        ranks=rank_figures([[10.0], [20.0]], [[5.0], [8.0]]),
    )
    return json.loads(json.dumps(report))


def test_every_key_the_writer_writes_at_every_depth_is_one_the_model_names():
    report = written_report()

    typed = msgspec.convert(report, CompareReport)

    # the model drops the keys it does not name: what it gives back is what was written, its defaults filled in
    assert msgspec.to_builtins(typed) == {**report, "ranks": {**report["ranks"], "stragglers": []}}
    assert read_loop_report(report, COMPARE_REPORT).task_gate.passed


def test_a_verdict_reads_back_through_the_model_and_one_it_refuses_is_none():
    judged = TaskJudgment("int8", "top1_agreement", 0.99, 0.9375, ("a", "b"), 2, problem="one input diverged")

    assert TaskJudgment.from_dict(json.loads(json.dumps(judged.to_dict()))) == judged
    for broken in ({"inputs": 0}, {"minimum": float("nan")}, {"metric": "accuracy"}, {"regions": "a"}):
        assert TaskJudgment.from_dict({**judged.to_dict(), **broken}) is None
    assert TaskJudgment.from_dict(["int8"]) is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda report: report["verification"]["regions"][0]["speedup"].update(median="fast"),
            "verification.regions[0].speedup.median: 'fast' is not of type 'number'",
        ),
        (
            lambda report: report["tuned_regions"][0]["check"]["speedup"]["per_call"][0].update(ci_high=1e300),
            "tuned_regions[0].check.speedup.per_call[0].ci_high: 1e+300 is larger than any figure a profile holds "
            "(4.6e+18)",
        ),
        (
            lambda report: report["run_time"].update(ratio=float("nan")),
            "run_time.ratio: nan is not a finite number",
        ),
        (
            lambda report: report["ranks"]["ranks"][1].update(after_us=-1.0),
            "ranks.ranks[1].after_us: -1.0 is less than the minimum of 0",
        ),
        (
            lambda report: report["speedup"].update(source="guessed"),
            "speedup.source: 'guessed' is not one of 'verified', 'captures', 'nothing tuned'",
        ),
        (
            lambda report: report["tuned_regions"][0]["check"].update(compared="a hunch"),
            "tuned_regions[0].check.compared: 'a hunch' is not one of 'end to end', 'its contribution', "
            "'the captures', 'outrun by the other candidate'",
        ),
        (
            lambda report: report["task_gate"].update(metric="accuracy"),
            "task_gate.metric: 'accuracy' is not one of 'top1_agreement', 'token_agreement', 'psnr_db', 'cosine'",
        ),
        (
            lambda report: report["tuned_regions"][0].update(reason="x" * 70_000),
            f"tuned_regions[0].reason: '{'x' * 38}… is too long (at most 65536)",
        ),
    ],
    ids=["wrong-type", "too-large", "nan", "negative", "unknown-source", "unknown-comparison", "metric", "long"],
)
def test_a_report_wrong_deep_inside_is_refused_naming_the_path(change, problem):
    report = written_report()
    change(report)

    with pytest.raises(ProfileError) as error:
        read_loop_report(report, "run/compare.json")

    assert str(error.value) == f"run/compare.json: {problem}; write the folder again with `aitune-profile tune`."


def test_the_committed_report_refuses_a_wrong_figure_deep_in_its_verification():
    report = orjson.loads(COMMITTED[0].read_bytes())
    broken = copy.deepcopy(report)
    broken["verification"]["end_to_end"]["rounds"] = 6.5

    with pytest.raises(ProfileError, match=r"verification\.end_to_end\.rounds: 6\.5 is not of type 'integer'"):
        read_loop_report(broken, "compare.json")
