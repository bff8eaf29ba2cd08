"""``aitune-profile merge``: per-rank profiles of one run in, one schema-valid document with stragglers out."""

import json
import random
import shutil
import statistics

import pytest
from cli_helpers import run_cli
from ranks import MLP, SLOW_MLP_MS, capture_shard, rank_folder

from aitune.analysis.stragglers import stragglers
from aitune.compare import compare_profiles
from aitune.errors import ProfileError
from aitune.report import load, render_markdown, save, validate
from aitune.report.headline import RESIDUAL_LABEL
from aitune.report.merge import merge_profiles, read_rank_profiles
from aitune.report.model import as_profile
from aitune.report.safe_text import visible
from aitune.report.samples import region_samples, run_samples
from aitune.suggest import suggest


@pytest.fixture(scope="module")
def shards():
    """Real captures: two balanced shards and one whose MLP is 27 ms slower."""
    return {"balanced": capture_shard(), "also balanced": capture_shard(), "slow": capture_shard(SLOW_MLP_MS)}


@pytest.fixture(scope="module")
def straggling(shards, tmp_path_factory):
    """Rank 1 of 2 is slow inside its MLP."""
    return rank_folder(tmp_path_factory.mktemp("straggling"), [shards["balanced"], shards["slow"]])


@pytest.fixture(scope="module")
def merged_cli(straggling):
    """`aitune-profile merge` of the straggling folder, once: its result and the merged document."""
    result = run_cli("merge", str(straggling), check=True)
    return result, load(straggling / "merged" / "profile.json")


def test_a_merged_document_is_a_valid_profile_whose_runs_add_up(straggling):
    doc = merge_profiles(read_rank_profiles(straggling))

    assert validate(doc) == []
    assert doc["ranks"]["world_size"] == 2


def test_each_run_of_a_merged_document_is_its_steps_slowest_rank(straggling):
    inputs = [profile.doc for profile in read_rank_profiles(straggling)]

    doc = merge_profiles(read_rank_profiles(straggling))

    times = [run_samples(rank_doc, "cpu") for rank_doc in inputs]
    slowest = [max((0, 1), key=lambda rank: times[rank][index]) for index in range(len(times[0]))]
    assert [run["rank"] for run in doc["runs"]] == slowest == doc["ranks"]["step_ranks"]
    assert run_samples(doc, "cpu") == [max(pair) for pair in zip(*times, strict=True)]
    assert [run.regions for run in as_profile(doc).runs] == [
        inputs[rank].runs[i].regions for i, rank in enumerate(slowest)
    ]


def test_per_rank_figures_are_the_inputs_figures(straggling):
    inputs = [profile.doc for profile in read_rank_profiles(straggling)]

    ranks = merge_profiles(read_rank_profiles(straggling))["ranks"]

    for rank, rank_doc in enumerate(inputs):
        entry = ranks["per_rank"][rank]
        assert entry["run_times_us"] == run_samples(rank_doc, "cpu")
        assert entry["region_times_us"][MLP] == region_samples(rank_doc, "cpu")["mlp"][1]
        assert entry["barrier_wait_us"] == [run.barrier_wait_us for run in rank_doc.runs]
        assert entry["source"] == f"rank{rank}/profile.json"
    mlp = next(region for region in ranks["regions"] if region["region_id"] == MLP)
    medians = [statistics.median(region_samples(rank_doc, "cpu")["mlp"][1]) for rank_doc in inputs]
    assert mlp["median_us"] == medians
    assert mlp["slowest_rank"] == 1
    assert mlp["imbalance"] == pytest.approx(max(medians) / statistics.median(medians))


def test_a_rank_slowed_inside_one_region_is_named_a_straggler_with_that_region(straggling):
    doc = merge_profiles(read_rank_profiles(straggling))

    assert [(s["rank"], s["region_id"]) for s in doc["ranks"]["stragglers"]] == [(1, MLP)]
    found = [w for w in doc["warnings"] if w["code"] == "RANK_STRAGGLER"]
    assert len(found) == 1
    assert found[0]["message"].startswith("rank 1 is slower than the other ranks beyond noise")
    assert f"most of it in {MLP}" in found[0]["message"]
    assert doc["ranks"]["critical_rank"] == 1


def test_like_ranks_on_a_noisy_machine_are_almost_never_called_stragglers():
    """Per-run samples of one 10 ms step, 10 runs per rank, 10% noise and one run in ten preempted (1.5×):
    fewer than 1 rank in 200 is called slow, in runs of 2 and of 8 ranks."""
    rng = random.Random(7)

    def runs() -> list[float]:
        return [10_000 * rng.gauss(1, 0.10) * (1.5 if rng.random() < 0.1 else 1) for _ in range(10)]

    for world in (2, 8):
        draws = [{rank: runs() for rank in range(world)} for _ in range(500)]

        called = sum(
            len(stragglers(draw, {rank: {RESIDUAL_LABEL: times} for rank, times in draw.items()})) for draw in draws
        )

        assert called / (500 * world) < 1 / 200


def test_a_rank_slower_beyond_the_noise_is_found_and_its_region_named():
    rng = random.Random(3)

    def noisy(us: float) -> list[float]:
        return [us * rng.gauss(1, 0.02) for _ in range(10)]

    ranks = range(4)
    regions = {
        rank: {"a": noisy(4000), "b": noisy(6000 if rank != 2 else 8000), RESIDUAL_LABEL: noisy(100)} for rank in ranks
    }
    run_times = {rank: [sum(parts) for parts in zip(*regions[rank].values(), strict=True)] for rank in ranks}

    found = stragglers(run_times, regions)

    assert [(item.rank, item.region) for item in found] == [(2, "b")]
    assert found[0].region_excess_us == pytest.approx(2000, rel=0.1)


def test_merge_writes_the_merged_folder_and_shows_the_ranks(merged_cli, straggling):
    result, doc = merged_cli

    assert (straggling / "merged" / "profile.md").is_file()
    assert "Ranks (cpu, 2 ranks, median per run)" in result.stdout
    assert "RANK_STRAGGLER" in result.stdout
    assert f"profile:  {straggling / 'merged' / 'profile.json'}" in result.stdout
    assert doc.ranks.stragglers[0].rank == 1


def test_report_of_a_merged_document_has_a_row_per_rank(merged_cli, straggling):
    path = straggling / "merged" / "profile.json"

    text = run_cli("report", str(path), check=True).stdout
    markdown = render_markdown(load(path))

    rows = [line for line in text.splitlines() if line.startswith(("│ 0 ", "│ 1 "))]
    assert len(rows) == 2 and MLP in rows[1] and MLP not in rows[0]
    assert "## Ranks" in markdown
    assert "| Region | Slowest rank | Imbalance | Rank 0 (ms) | Rank 1 (ms) |" in markdown
    assert markdown == (straggling / "merged" / "profile.md").read_text()


def test_compare_of_merged_documents_says_so(merged_cli, straggling, shards, tmp_path):
    balanced = rank_folder(tmp_path / "balanced", [shards["balanced"], shards["also balanced"]])
    save(merge_profiles(read_rank_profiles(balanced)), balanced / "merged.json")

    result = run_cli("compare", str(straggling / "merged" / "profile.json"), str(balanced / "merged.json"))
    diff = compare_profiles(load(straggling / "merged" / "profile.json"), load(balanced / "merged.json")).to_dict()

    assert result.returncode == 0
    assert "comparing merged documents (2 ranks merged → 2 ranks merged)" in result.stdout
    assert diff["world_sizes"] == (2, 2)
    assert diff["run_time"]["ratio"] < 1  # the balanced pair no longer waits for a slow MLP


def test_every_single_profile_reader_reads_a_merged_document(merged_cli):
    _, doc = merged_cli

    diff = compare_profiles(doc, doc)
    targets = suggest(doc).targets

    assert diff.run_time.ratio == 1 and diff.world_sizes == (2, 2)
    assert {target.path for target in targets} == {"attention", "mlp"}


def _missing_rank(folder):
    shutil.rmtree(folder / "rank1")
    return "{dir}/rank1/profile.json is missing: {dir}/rank0/profile.json says world_size 2"


def _duplicate_rank(folder):
    shutil.copy(folder / "rank0" / "profile.json", folder / "rank1" / "profile.json")
    return "{dir}/rank1/profile.json and {dir}/rank0/profile.json both say distributed.rank 0"


def _fewer_runs(folder):
    path = folder / "rank1" / "profile.json"
    doc = json.loads(path.read_text())
    doc["runs"] = doc["runs"][:-1]
    path.write_text(json.dumps(doc))
    return "{dir}/rank1/profile.json has measured run count 6 but {dir}/rank0/profile.json has 7"


def _not_a_profile(folder):
    (folder / "rank1" / "profile.json").write_text('{"traceEvents": []}')
    return "{dir}/rank1/profile.json: not a profile document (no schema_version and runs keys)."


def _hostile_name(folder):
    (folder / "rank1\x1b[2J").mkdir()
    return "{dir}/rank1\\x1b[2J: not a rank folder (rank<r>, r = 0, 1, … unpadded); move it out of {dir}."


def _no_distributed_block(folder):
    path = folder / "rank0" / "profile.json"
    doc = json.loads(path.read_text())
    del doc["distributed"]
    path.write_text(json.dumps(doc))
    return "{dir}/rank0/profile.json: no distributed block with rank and world_size"


BROKEN = {
    "missing rank": _missing_rank,
    "duplicate rank": _duplicate_rank,
    "different run counts": _fewer_runs,
    "a file that is not a profile": _not_a_profile,
    "a hostile folder name": _hostile_name,
    "a profile of one process": _no_distributed_block,
}


def broken_copy(straggling, tmp_path, case):
    """A copy of the straggling folder broken as ``case`` says, and the sentence merge must answer with."""
    folder = tmp_path / "run"
    shutil.copytree(straggling, folder, ignore=shutil.ignore_patterns("merged"))
    return folder, BROKEN[case](folder).format(dir=folder)


@pytest.mark.parametrize("case", BROKEN)
def test_inconsistent_ranks_are_refused_in_one_sentence_naming_the_file(case, straggling, tmp_path):
    folder, expected = broken_copy(straggling, tmp_path, case)

    with pytest.raises(ProfileError) as error:
        merge_profiles(read_rank_profiles(folder))

    assert visible(error.value).startswith(expected)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("case", ["missing rank", "a hostile folder name"])
def test_the_command_refuses_them_with_exit_2_and_writes_nothing(case, straggling, tmp_path):
    folder, expected = broken_copy(straggling, tmp_path, case)

    result = run_cli("merge", str(folder))

    assert result.returncode == 2
    assert result.stderr.startswith(f"[error] {expected}") and result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert not (folder / "merged").exists()


class _Tracked(dict):
    """A rank's document that says when it is freed (a plain dict cannot be weakly referenced)."""


def test_merge_holds_one_rank_s_document_at_a_time_besides_the_slowest_rank_s(tmp_path):
    import gc
    import weakref
    from pathlib import Path

    from ranks import as_ranks

    from aitune.report.merge import RankProfile
    from aitune.report.model import Profile

    def records() -> int:  # a Struct takes no weak reference: count the live ones
        gc.collect()
        return sum(type(item) is Profile for item in gc.get_objects())

    sample = json.loads((Path(__file__).parent.parent / "sample_traces/tuned-pipeline/before/profile.json").read_text())
    docs = as_ranks([sample] * 8)  # equal medians: the critical rank stays rank 0
    alive: list[weakref.ref] = []
    most_alive = most_records = 0
    records_before = records()

    def one_at_a_time():
        nonlocal most_alive, most_records
        for rank in range(len(docs)):
            doc = _Tracked(docs[rank])
            docs[rank] = None  # the only copy is the one handed over
            alive.append(weakref.ref(doc))
            most_alive = max(most_alive, sum(ref() is not None for ref in alive))
            most_records = max(most_records, records() - records_before)
            yield RankProfile(rank, Path(f"rank{rank}/profile.json"), doc)
            del doc

    merged = merge_profiles(one_at_a_time())

    assert merged["ranks"]["world_size"] == 8 and len(merged["ranks"]["per_rank"]) == 8
    # The rank being read and the one before it (still the merge loop's variable until the next arrives): two
    # documents, however many ranks. Of the records read from them, the one before's and the critical rank's
    # so far (its operators, target, …): two.
    assert most_alive == 2
    assert most_records == 2
