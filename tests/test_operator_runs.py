"""Full captures that trace operators in runs of their own: the measured runs are clock-timed, the
operator runs hold the operator data, and every reader takes each from where it is."""

import gzip
import json

import pytest
import torch
import torch.distributed as dist
from busy import BusyPipeline, TwoLevelModel, first_measured_call, median_gap
from cli_helpers import APPS, capture_busy_app, run_cli
from documents import region_shares, tree_shape
from torch import nn

import aitune.torch as ait
from aitune import compare
from aitune.errors import CaptureError, ProfileError
from aitune.report import build_profile, load, render_markdown, validate
from aitune.report.key_averages import operator_rows
from aitune.suggest import suggest
from aitune.suggest.candidates import gather

RUNS = {"warmup_runs": 1, "measured_runs": 4}


class ProfilerWitness(nn.Module):
    """Notes, at each call, whether torch's profiler is recording."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.profiled: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.profiled.append(torch.autograd._profiler_enabled())
        return self.linear(x)


@pytest.fixture(scope="module")
def split_and_all():
    model = TwoLevelModel()
    split = ait.profile(model, torch.ones(1, 4), operator_runs=2, **RUNS).data
    traced = ait.profile(model, torch.ones(1, 4), operator_runs="all", **RUNS).data
    return split, traced


def test_the_measured_runs_run_without_the_profiler_and_the_operator_runs_under_it():
    witness = ProfilerWitness()

    ait.profile(witness, torch.ones(1, 4), warmup_runs=0, measured_runs=3, operator_runs=2)

    # the 3 measured runs, then the 2 operator runs, all recorded: no warmup of the stamps or the profiler
    assert witness.profiled == [False] * 3 + [True] * 2


def test_a_cpu_capture_traces_operators_in_one_run_of_its_own_by_default():
    doc = ait.profile(TwoLevelModel(), torch.ones(1, 4), **RUNS).data

    assert doc["config"]["operator_runs"] == 1 and doc["profiler"]["mode"] == "full"
    assert [run["run_index"] for run in doc["runs"]] == [0, 1, 2, 3]
    assert [run["run_index"] for run in doc["operator_runs"]] == [0]


def test_operator_data_is_on_the_operator_runs_and_timing_on_the_measured_runs(split_and_all):
    split, _ = split_and_all

    assert all("causes" not in run["residual"] for run in split["runs"])
    assert all("operators" not in node for run in split["runs"] for node in run["tree"])
    assert all("causes" in run["residual"] for run in split["operator_runs"])
    assert all("operators" in node for run in split["operator_runs"] for node in run["tree"])
    assert split["statistics"]["runs"]["cpu_time_us"]["count"] == 4


def test_both_kinds_of_run_hold_the_same_regions_and_tree(split_and_all):
    split, traced = split_and_all

    trees = [split["runs"][0]["tree"], split["operator_runs"][0]["tree"], traced["runs"][0]["tree"]]
    assert tree_shape(trees[0]) == tree_shape(trees[1]) == tree_shape(trees[2])


def test_the_operator_table_totals_the_operator_runs_only(split_and_all):
    split, traced = split_and_all

    def linear_calls(doc):
        return next(row.count for row in operator_rows(doc) if row.key == "aten::linear")

    assert linear_calls(traced) == 4 * linear_calls(split) / 2  # per run, the same work


def test_a_document_with_operator_runs_is_valid_and_adds_up_in_both_kinds_of_run(split_and_all):
    split, _ = split_and_all

    assert validate(split) == []


def test_a_broken_operator_run_is_named_by_validation(split_and_all):
    split, _ = split_and_all
    broken = json.loads(json.dumps(split))
    broken["operator_runs"][1]["residual"]["cpu_time_fraction"] += 0.25

    assert any(problem.startswith("operator_runs[1]:") for problem in validate(broken))


def test_the_measured_runs_shares_match_the_work_the_modules_measured_themselves():
    pipe = BusyPipeline()

    prof = ait.profile(pipe, torch.ones(1, 4), warmup_runs=1, measured_runs=4, operator_runs=1)

    # the measured runs follow the warmups (any run set aside as still warming up is one of them)
    first = first_measured_call(prof.data)
    spent = {name: getattr(pipe, name).spent_us[first : first + 4] for name in ("encoder", "denoiser")}
    pairs: dict[str, list[tuple[float, float]]] = {"encoder": [], "denoiser": []}
    for index, run in enumerate(prof.data["runs"]):
        got = region_shares(run)
        for name, pair in pairs.items():
            pair.append((got[f"untuned_module:{name}"], spent[name][index] / run["timing"]["cpu_time_us"]))
    assert {key: median_gap(value) for key, value in pairs.items()} == {
        "encoder": pytest.approx(0, abs=0.03),
        "denoiser": pytest.approx(0, abs=0.03),
    }


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_the_saved_trace_reanalysed_gives_the_live_document(tmp_path, name):
    trace = tmp_path / name

    live = ait.profile(TwoLevelModel(), torch.ones(1, 4), trace_file=trace, **RUNS).data
    again = ait.analyze_trace(trace).data

    assert again == live


def test_a_malformed_table_of_timed_spans_is_one_sentence_naming_it(tmp_path):
    trace = tmp_path / "trace.json.gz"
    ait.profile(TwoLevelModel(), torch.ones(1, 4), trace_file=trace, **RUNS).wait_for_trace()
    document = json.loads(gzip.decompress(trace.read_bytes()))
    document["aitune"]["timed_spans"]["spans"][0][0] = 10**6  # a name index past the names

    with pytest.raises(ProfileError, match=r"'timed_spans' is malformed \(every span must be"):
        build_profile(document)


def test_readers_take_operator_data_from_the_operator_runs(split_and_all):
    split, _ = split_and_all

    text = render_markdown(split)
    assert "- Operator runs: operators traced in 2 run(s) of their own, after the measured runs" in text
    assert "Median over the 2 operator runs of the CPU time outside every region" in text
    codes = {reason.code for target in suggest(split).targets for reason in target.reasons}
    assert "NO_OPERATOR_MIX" not in codes
    totals = {row.key: row.self_cpu_time_total_us for row in operator_rows(split)}
    per_run = {row.key: row.before_us for row in compare.compare_profiles(split, split).operators}
    assert per_run == {key: pytest.approx(totals[key] / 2) for key in per_run}  # over its 2 operator runs


def test_operator_runs_all_gives_the_traced_runs_document(split_and_all):
    _, traced = split_and_all

    assert traced["config"]["operator_runs"] == "all" and "operator_runs" not in traced
    assert all("causes" in run["residual"] for run in traced["runs"])


@pytest.mark.parametrize("value", [0, -1, "some", 1.5, True])
def test_an_operator_run_count_that_is_not_a_positive_integer_or_all_is_refused(value):
    with pytest.raises(CaptureError, match="operator_runs must be 'all' or an integer of at least 1"):
        ait.profile(TwoLevelModel(), torch.ones(1, 4), operator_runs=value, **RUNS)


def test_operator_runs_are_refused_in_a_lite_capture():
    with pytest.raises(CaptureError, match="lite capture runs no profiler"):
        ait.profile(TwoLevelModel(), torch.ones(1, 4), operator_runs=2, mode="lite", **RUNS)


def test_the_cli_traces_operators_in_as_many_runs_as_asked(tmp_path):
    doc = load(capture_busy_app(tmp_path / "capture", "--operator-runs", "1"))

    assert doc.config.operator_runs == 1 and len(doc.operator_runs) == 1 and len(doc.runs) == 2


def test_the_cli_refuses_an_operator_run_count_it_cannot_honour(tmp_path):
    result = run_cli("capture", f"{APPS / 'busy_app.py'}:infer", "--input", "x", "--operator-runs", "0")

    assert result.returncode == 2
    assert "--operator-runs must be all or a whole number of at least 1" in result.stderr


class Wrapped(nn.Module):
    """All of its run is spent inside ``inner``: a region that spans the run."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = TwoLevelModel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_runs_and_operator_runs_are_listed_below_the_spanning_regions_both_share(tmp_path):
    trace = tmp_path / "trace.json.gz"
    # Three operator runs: their median share inside `inner` outlasts one run a loaded machine preempts.
    prof = ait.profile(Wrapped(), torch.ones(1, 4), trace_file=trace, operator_runs=3, **RUNS)
    live = prof.data
    prof.wait_for_trace()
    document = json.loads(gzip.decompress(trace.read_bytes()))
    inner = "aitune::region::untuned_module:inner"
    document["traceEvents"] = [event for event in document["traceEvents"] if event.get("name") != inner]

    reanalysed = build_profile(document)  # the operator runs no longer spend their time inside inner

    assert live["spanning_regions"] == ["untuned_module:inner"]
    assert "spanning_regions" not in reanalysed and validate(reanalysed) == []
    assert [r["region_id"] for r in reanalysed["runs"][0]["regions"]] == ["untuned_module:inner"]


def test_malformed_operator_run_wall_times_are_one_sentence_naming_them(tmp_path):
    trace = tmp_path / "trace.json.gz"
    ait.profile(TwoLevelModel(), torch.ones(1, 4), trace_file=trace, **RUNS).wait_for_trace()
    document = json.loads(gzip.decompress(trace.read_bytes()))
    document["aitune"]["operator_run_wall_times_us"] = 5

    with pytest.raises(ProfileError, match="'operator_run_wall_times_us' has the wrong type"):
        build_profile(document)


def test_suggest_takes_the_operator_mix_per_operator_run(split_and_all):
    split, _ = split_and_all

    found = gather(split, "cpu")

    assert {(c.runs, c.mix_runs) for c in found.candidates.values()} == {(4, 2)}


def test_a_count_of_operator_runs_is_refused_in_a_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(CaptureError, match=r"in a torch\.distributed process group; pass operator_runs=.all."):
            ait.profile(TwoLevelModel(), torch.ones(1, 4), operator_runs=2, **RUNS)
    finally:
        dist.destroy_process_group()
