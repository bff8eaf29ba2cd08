"""The torch-free profile diff: alignment by path, bootstrap intervals, and the regression gate."""

import json
import random
import statistics

import pytest
from cli_helpers import run_cli
from documents import profile, scenarios

from aitune.analysis.statistics import bootstrap_ratio_interval
from aitune.compare import Change, compare_profiles, headline_paths, regressed
from aitune.errors import ProfileError
from aitune.report import headline_rows


def test_regions_line_up_by_path_whatever_their_kind():
    before = profile([{"untuned_module:unet": 100.0, "untuned_module:vae": 50.0}] * 3)
    after = profile([{"aot_module:unet": 50.0, "untuned_module:vae": 50.0}] * 3)

    diff = compare_profiles(before, after)

    unet = next(row for row in diff.regions if row.path == "unet")
    assert (unet.before_id, unet.after_id, unet.status) == ("untuned_module:unet", "aot_module:unet", "both")
    assert unet.kind_changed
    assert unet.change == Change(100.0, 50.0, 0.5, 0.5, 0.5)
    assert diff.run_time.ratio == pytest.approx(110 / 160)


def test_nested_regions_line_up_with_their_flat_selves():
    before = profile([{"untuned_module:unet": 100.0}] * 2)
    after = profile([{"untuned_module:pipe": (120.0, {"aot_module:unet": 80.0})}] * 2, residual_us=20.0)

    diff = compare_profiles(before, after)

    assert [(row.path, row.status, row.change.ratio) for row in diff.regions] == [
        ("pipe", "added", None),
        ("unet", "both", 0.8),
    ]


def test_a_root_one_side_names_is_stripped_from_the_other_sides_paths():
    entry = profile([{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 20.0}] * 2)
    entry["target"] = {"type": "pipeline_app.Pipeline", "root": "pipe"}
    script = profile([{"untuned_module:pipe.unet": 90.0, "untuned_module:pipe.vae": 20.0}] * 2)

    diff = compare_profiles(entry, script)

    assert [(row.path, row.before_id, row.after_id) for row in diff.regions] == [
        ("unet", "untuned_module:unet", "untuned_module:pipe.unet"),
        ("vae", "untuned_module:vae.decode", "untuned_module:pipe.vae"),  # the method meets its module
    ]
    assert not diff.regions[0].kind_changed
    assert [row.path for row in compare_profiles(entry, entry).regions] == ["unet", "vae.decode"]


def test_an_entry_method_lines_up_with_the_wrapper_that_replaced_it():
    before = profile(
        [{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 40.0}] * 2,
        methods={"untuned_module:vae.decode": "decode"},
    )
    after = profile([{"untuned_module:unet": 100.0, "aot_module:vae": 10.0}] * 2)

    diff = compare_profiles(before, after)

    for rows in (diff.regions, diff.headline):
        vae = next(row for row in rows if row.path == "vae")
        assert (vae.before_id, vae.after_id, vae.status) == ("untuned_module:vae.decode", "aot_module:vae", "both")
        assert vae.kind_changed and vae.change.ratio == 0.25
    assert (diff.added, diff.removed) == ([], [])


def test_a_method_whose_forward_is_nested_inside_it_stays_apart_where_the_forward_meets_the_wrapper():
    before = profile(
        [{"untuned_module:vae.decode": (40.0, {"untuned_module:vae": 38.0})}] * 2,
        methods={"untuned_module:vae.decode": "decode"},
    )
    after = profile([{"aot_module:vae": 10.0}] * 2)

    diff = compare_profiles(before, after)

    assert [(row.path, row.before_id, row.after_id) for row in diff.regions] == [
        ("vae.decode", "untuned_module:vae.decode", None),
        ("vae", "untuned_module:vae", "aot_module:vae"),
    ]
    assert [(row.path, row.before_id, row.after_id) for row in diff.headline] == [
        ("vae", "untuned_module:vae.decode", "aot_module:vae")
    ]


def test_a_method_stays_apart_when_its_own_side_has_the_module_or_the_other_side_has_the_method():
    both = profile([{"untuned_module:vae.decode": 40.0, "untuned_module:vae": 5.0}] * 2)
    wrapped = profile([{"aot_module:vae": 10.0}] * 2)
    methods = profile([{"untuned_module:vae.decode": 30.0, "untuned_module:vae.encode": 8.0}] * 2)

    assert sorted(row.path for row in compare_profiles(both, wrapped).headline) == ["vae", "vae.decode"]
    assert sorted(row.path for row in compare_profiles(methods, methods).headline) == ["vae.decode", "vae.encode"]


def test_a_capture_that_marks_its_methods_moves_only_the_marked_ones():
    unmarked = profile([{"untuned_module:vae.decode": 40.0}] * 2)  # AITune's files mark none: read by name
    marked = profile(
        [{"untuned_module:vae.decode": 40.0, "untuned_module:generate": 5.0}] * 2,
        methods={"untuned_module:generate": "generate"},
    )
    after = profile([{"aot_module:vae": 10.0, "untuned_module:generate": 5.0}] * 2)

    assert [row.path for row in compare_profiles(unmarked, after).headline if row.status == "both"] == ["vae"]
    assert sorted(row.path for row in compare_profiles(marked, after).headline) == ["generate", "vae", "vae.decode"]


def test_the_headline_paths_a_chart_groups_by_are_compares_lineup():
    before = profile(
        [{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 40.0}] * 2,
        methods={"untuned_module:vae.decode": "decode"},
    )
    after = profile([{"aot_module:unet": 50.0, "aot_module:vae": 10.0}] * 2)

    assert headline_paths(before, after) == (
        {"untuned_module:unet": "unet", "untuned_module:vae.decode": "vae"},
        {"aot_module:unet": "unet", "aot_module:vae": "vae"},
    )


def test_added_and_removed_regions_and_one_sided_warnings_are_reported():
    before = profile([{"untuned_module:a": 10.0}], warnings=["SHARED", "OLD_ONLY"])
    after = profile([{"untuned_module:b": 10.0}], warnings=["SHARED", "NEW_ONLY"])

    diff = compare_profiles(before, after)

    assert (diff.added, diff.removed) == (["b"], ["a"])
    assert [w["code"] for w in diff.warnings_only_before] == ["OLD_ONLY"]
    assert [w["code"] for w in diff.warnings_only_after] == ["NEW_ONLY"]


def test_operator_deltas_are_per_run_self_times():
    before = profile([{"untuned_module:a": 1.0}] * 2, residual_us=100.0, glue={"aten::conv": 100.0})
    after = profile([{"untuned_module:a": 1.0}] * 4, residual_us=50.0, glue={"aten::conv": 50.0})  # the same 200 µs

    (operator,) = compare_profiles(before, after).operators

    assert (operator.before_us, operator.after_us, operator.delta_us) == (100.0, 50.0, -50.0)


def test_the_bootstrap_interval_is_deterministic_and_brackets_the_ratio():
    before, after = [100.0, 102.0, 98.0, 101.0, 99.0], [130.0, 131.0, 129.0, 133.0, 128.0]

    low, high = bootstrap_ratio_interval(before, after)

    assert bootstrap_ratio_interval(before, after) == (low, high)
    assert 1.25 < low < 1.30 < high < 1.36


def documented_interval(before, after, resamples, seed=0):
    """The method as the README states it, written plainly: resample each side, ratio of medians, percentiles."""
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        old = statistics.median(rng.choices(before, k=len(before)))
        new = statistics.median(rng.choices(after, k=len(after)))
        if old > 0:
            ratios.append(new / old)
    ratios.sort()
    tail = (1 - 0.95) / 2
    return interpolated(ratios, tail), interpolated(ratios, 1 - tail)


def interpolated(ordered, q):
    position = q * (len(ordered) - 1)
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ([100.0, 102.0, 98.0, 101.0, 99.0], [130.0, 131.0, 129.0, 133.0, 128.0]),
        ([0.0, 5.0, 7.0, 0.0], [3.0, 4.0, 8.0, 1.0, 2.0, 9.0, 6.0]),
        ([10.0, 11.0], [12.0, 9.0, 30.0]),
    ],
)
def test_the_vectorised_bootstrap_gives_the_documented_methods_numbers(before, after):
    assert bootstrap_ratio_interval(before, after, resamples=300) == documented_interval(before, after, 300)


@pytest.mark.parametrize("seed", [1, 12345, 2**40 + 7])
def test_the_bulk_draws_are_pythons_draws_for_any_seed(seed):
    before, after = [100.0, 102.0, 98.0, 101.0, 99.0, 97.0], [130.0, 131.0, 129.0]

    assert bootstrap_ratio_interval(before, after, 200, seed) == documented_interval(before, after, 200, seed)


def test_the_same_inputs_give_the_same_intervals_for_every_region_and_call():
    runs = [{"untuned_module:a": us, "untuned_module:b": us} for us in (100.0, 120.0, 90.0, 110.0)]
    slower = [{"untuned_module:a": us * 1.5, "untuned_module:b": us * 1.5} for us in (100.0, 120.0, 90.0, 110.0)]

    first = compare_profiles(profile(runs), profile(slower))
    second = compare_profiles(profile(runs), profile(slower))

    assert first.to_dict() == second.to_dict()
    assert first.regions[0].change == first.regions[1].change


def test_a_single_run_has_no_interval_and_the_ratio_alone_decides_the_gate():
    diff = compare_profiles(profile([{"untuned_module:a": 100.0}]), profile([{"untuned_module:a": 200.0}]))

    assert (diff.run_time.ci_low, diff.run_time.ci_high) == (None, None)
    assert regressed(diff, 5)


def test_slower_within_noise_is_not_a_regression():
    before = profile([{"untuned_module:a": us} for us in (100.0, 140.0, 90.0, 150.0)])
    after = profile([{"untuned_module:a": us} for us in (110.0, 150.0, 95.0, 160.0)])

    diff = compare_profiles(before, after)

    assert diff.run_time.ratio > 1.05 and not diff.run_time.beyond_noise
    assert not regressed(diff, 5)


def test_scenarios_are_selected_by_name():
    doc = scenarios(batch4=profile([{"untuned_module:a": 99.0}]), batch1=profile([{"untuned_module:a": 10.0}] * 2))

    assert compare_profiles(doc, doc).run_time.before_us == 109.0  # the first scenario, as a one-input reader sees it
    assert compare_profiles(doc, doc, scenario="batch1").run_time.before_us == 20.0
    with pytest.raises(ProfileError) as unknown:
        compare_profiles(doc, doc, scenario="batch8")
    assert str(unknown.value) == (
        "no scenario 'batch8' in this profile; it has ['batch4', 'batch1']; pick one of those with --scenario."
    )


def test_the_diff_is_json_ready():
    diff = compare_profiles(profile([{"untuned_module:a": 10.0}] * 2), profile([{"aot_module:a": 20.0}] * 2))

    data = json.loads(json.dumps(diff.to_dict()))

    assert data["regions"][0]["status"] == "both"
    assert data["run_time"]["beyond_noise"] is True
    assert (data["added"], data["removed"]) == ([], [])


def test_a_capture_compared_with_itself_passes_a_5_percent_gate(busy_captures):
    """Whether two captures of one workload pass is up to the machine's load between them (at load 13 the
    runs of busy_app drifted 15% apart, beyond their noise); the gate's rule on runs that differ by noise
    alone is `test_slower_within_noise_is_not_a_regression`'s, on documents whose times no load moves."""
    result = run_cli("compare", str(busy_captures["first"]), str(busy_captures["first"]), "--fail-if-slower", "5")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "gate --fail-if-slower 5: passed (run time speedup 1.00× [" in result.stdout  # the sides resample apart


def test_a_workload_made_30_percent_slower_fails_the_5_percent_gate(busy_captures):
    result = run_cli(
        "compare", str(busy_captures["first"]), str(busy_captures["slower"]), "--fail-if-slower", "5", "--json"
    )

    assert result.returncode == 1, result.stderr
    diff = json.loads(result.stdout)
    assert diff["gate"] == {"fail_if_slower_pct": 5.0, "failed": True}
    assert diff["run_time"]["ci_low"] > 1
    # Where the time went, not how much: 1.3 on an idle machine, 1.15 beside a CPU burner (preemptions add
    # the same time to both sides). All of the slowdown is the denoiser's.
    changes = {region["path"]: region["change"] for region in diff["regions"]}
    assert changes["denoiser"]["ci_low"] > 1 and changes["denoiser"]["ratio"] > changes["encoder"]["ratio"]


def test_entry_and_script_captures_of_the_example_pipeline_line_up_region_by_region(entry_capture, script_capture):
    entry, script = entry_capture[0] / "profile.json", script_capture[0] / "profile.json"

    result = run_cli("compare", str(entry), str(script), "--json")

    assert result.returncode == 0, result.stderr
    both = {row["path"]: row["before_id"] for row in json.loads(result.stdout)["regions"] if row["status"] == "both"}
    assert both == {  # script mode sees forwards only: vae is the forward that vae.decode calls
        "text_encoder": "untuned_module:text_encoder",
        "unet": "untuned_module:unet",
        "vae": "untuned_module:vae",
    }
    headline = {row["path"]: row["before_id"] for row in json.loads(result.stdout)["headline"]}
    assert headline == {  # at the headline's level, the entry method meets the script's forward
        "text_encoder": "untuned_module:text_encoder",
        "unet": "untuned_module:unet",
        "vae": "untuned_module:vae.decode",
    }


def test_a_method_that_bypasses_forward_lines_up_with_the_child_tuned_in_its_place():
    before = profile(
        [{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 40.0}] * 2,
        methods={"untuned_module:vae.decode": "decode"},
    )
    after = profile(
        [{"untuned_module:unet": 100.0, "aot_module:vae.decoder": 12.0, "untuned_module:vae.post_quant_conv": 1.0}] * 2
    )

    diff = compare_profiles(before, after)

    for rows in (diff.regions, diff.headline):
        decoder = next(row for row in rows if row.path == "vae.decoder")
        assert (decoder.before_id, decoder.after_id, decoder.status) == (
            "untuned_module:vae.decode",
            "aot_module:vae.decoder",
            "both",
        )
        assert decoder.change.ratio == pytest.approx(0.3)
    assert (diff.added, diff.removed) == (["vae.post_quant_conv"], [])
    assert headline_paths(before, after)[0] == {
        "untuned_module:unet": "unet",
        "untuned_module:vae.decode": "vae.decoder",
    }


def test_an_untuned_child_never_stands_in_for_a_method():
    before = profile([{"untuned_module:vae.decode": 40.0}] * 2, methods={"untuned_module:vae.decode": "decode"})
    after = profile([{"untuned_module:vae.decoder": 38.0}] * 2)

    assert sorted(row.status for row in compare_profiles(before, after).headline) == ["added", "removed"]


def test_the_headline_keeps_a_region_whole_where_the_other_side_cannot_look_through_it():
    bert = (990.0, {"untuned_module:bert.embeddings": 90.0, "untuned_module:bert.encoder": 880.0})
    before = profile([{"untuned_module:bert": bert, "untuned_module:classifier": 1.0}] * 2)
    after = profile([{"aot_module:bert": 400.0, "untuned_module:classifier": 1.0}] * 2)

    diff = compare_profiles(before, after)

    assert [row.path for row in headline_rows(before)][:3] == ["bert.embeddings", "bert.encoder", "bert (self)"]
    assert [(row.path, row.status) for row in diff.headline] == [("bert", "both"), ("classifier", "both")]
    assert [row.path for row in compare_profiles(before, before).headline][:2] == ["bert.encoder", "bert.embeddings"]
