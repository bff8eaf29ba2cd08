"""Phases of a generate: encoder, prefill and decode found from what the capture saw, adding up to the run,
with time to first token and per output token that agree with a plain timing of the same calls."""

import functools
import time

import pytest
import torch
from builders import region as region_span
from busy import first_measured_call
from cli_helpers import terminal_text
from documents import laid_out, region_meta
from hf_models import NEW_TOKENS, llama_decoder, t5_encoder_decoder

import aitune.torch as ait
from aitune.analysis.phases import (
    BY_CALL_ORDER,
    BY_INPUT_LENGTHS,
    Call,
    PhaseSplit,
    RunCalls,
    decode_token_times,
    find_split,
    generation_figures,
    split_run,
)
from aitune.cli.render import profile_view
from aitune.compare import compare_profiles
from aitune.report import build_profile, render_markdown, validate
from aitune.report.headline import phase_rows
from aitune.report.io import read_trace_file_events, save
from aitune.suggest import suggest
from aitune.suggest.phase_advice import phase_advice
from aitune.viewer.store import ProfileStore

GENERATE = "untuned_module:generate"


MODEL, HEAD, ENCODER = "untuned_module:model", "untuned_module:lm_head", "untuned_module:encoder"


def loop_run(steps, encoder=False, start=0.0):
    """A run of ``steps`` step calls (10 µs each, then a 2 µs head), 20 µs apart, after an optional 30 µs encoder."""
    calls = [Call(ENCODER, start + 5, start + 35)] if encoder else []
    first = start + (40 if encoder else 5)
    for step in range(steps):
        at = first + 20 * step
        calls += [Call(MODEL, at, at + 10), Call(HEAD, at + 11, at + 13)]
    end = first + 20 * steps + 3
    return RunCalls(run_index=0, start_us=start, end_us=end, within_end_us=end - 1, calls=tuple(calls))


# ---- the split, on hand-built calls ------------------------------------------------------------------


def test_a_prompt_read_first_then_one_token_per_call_is_a_prefill_then_decode():
    split = find_split([loop_run(4)], [], {MODEL: [8, 1, 1, 1]})

    assert split is not None
    assert (split.step_region, split.method, split.names) == (MODEL, BY_INPUT_LENGTHS, ("prefill", "decode"))
    assert split.prompt_tokens == 8
    assert "8 tokens in its first call and 1 in each later one" in split.basis


def test_a_sequence_growing_by_one_token_per_call_is_a_generate_without_cache():
    split = find_split([loop_run(4)], [], {MODEL: [8, 9, 10, 11]})

    assert split is not None and split.method == BY_INPUT_LENGTHS
    assert "one more in each later one" in split.basis


def test_a_loop_whose_calls_all_take_the_same_input_is_not_a_generate():
    assert find_split([loop_run(4)], [], {MODEL: [4, 4, 4, 4]}) is None
    assert find_split([loop_run(4)], [], {}) is None


def test_under_generate_the_call_order_decides_when_the_token_counts_cannot():
    split = find_split([loop_run(4, encoder=True)], [GENERATE], {MODEL: [1, 1, 1, 1]})

    assert split is not None
    assert split.method == BY_CALL_ORDER
    assert split.within == GENERATE
    assert split.encoder_regions == (ENCODER,)
    assert split.names == ("encoder", "prefill", "decode")


def test_recorded_lengths_of_another_call_count_are_not_used():
    split = find_split([loop_run(3)], [GENERATE], {MODEL: [8, 1, 1, 1]})  # recorded 4 calls, the run made 3

    assert split is not None and split.method == BY_CALL_ORDER and split.prompt_tokens is None


def test_the_phases_tile_the_run_and_each_adds_up_to_one():
    run = loop_run(4, encoder=True)
    split = PhaseSplit(MODEL, BY_CALL_ORDER, "", (ENCODER,), GENERATE, None)

    phases = [phase.to_dict(run.end_us - run.start_us) for phase in split_run(run, split)]

    assert [phase["name"] for phase in phases] == ["encoder", "prefill", "decode"]
    assert [phase["cpu_time_us"] for phase in phases] == [40.0, 20.0, 63.0]
    assert sum(phase["cpu_time_fraction"] for phase in phases) == pytest.approx(1)
    assert [phase["steps"] for phase in phases] == [0, 1, 3]
    for phase in phases:
        shares = phase["residual"]["cpu_time_fraction"] + sum(r["cpu_time_fraction"] for r in phase["regions"])
        assert shares == pytest.approx(1)
    assert phases[2]["regions"] == [
        {"region_id": MODEL, "calls": 3, "cpu_time_us": 30.0, "cpu_time_fraction": pytest.approx(30 / 63)},
        {"region_id": HEAD, "calls": 3, "cpu_time_us": 6.0, "cpu_time_fraction": pytest.approx(6 / 63)},
    ]


def test_time_to_first_token_ends_where_the_second_step_starts_and_decode_tokens_are_step_to_step():
    run = loop_run(4)
    split = PhaseSplit(MODEL, BY_INPUT_LENGTHS, "", (), None, 8)

    figures = generation_figures(run, split)

    assert figures["output_tokens"] == 4
    assert figures["ttft_us"] == 25.0  # run start 0 → second step at 25
    assert decode_token_times([5.0, 25.0, 45.0, 65.0], run.within_end_us) == [
        20.0,
        20.0,
        22.0,
    ]  # the last to the end of the spanning call
    assert figures["time_per_output_token_us"]["median"] == 20.0
    assert figures["tokens_per_second"] == pytest.approx(4 / 88 * 1e6)


def test_a_run_that_makes_one_token_is_not_split():
    assert find_split([loop_run(1)], [GENERATE], {}) is None


# ---- real captures: Hugging Face generate and a hand-written loop -------------------------------------


class StepClock:
    """Plain timing of the same calls, taken in the same runs: the inference function's start and end,
    and a forward pre-hook on the step module (it fires just before the region's span opens)."""

    def __init__(self, step_module):
        self.calls = []  # per inference call: [start ns, step starts ns..., end ns]
        step_module.register_forward_pre_hook(lambda *_: self.calls[-1].append(time.perf_counter_ns()))

    def timed(self, infer):
        def call(x):
            self.calls.append([time.perf_counter_ns()])
            out = infer(x)
            self.calls[-1].append(time.perf_counter_ns())
            return out

        return call

    def figures(self, invocation):
        """(TTFT µs, decode token µs) of one inference call, as the document defines them."""
        start, *steps, end = self.calls[invocation]
        return (steps[1] - start) / 1000, decode_token_times([s / 1000 for s in steps], end / 1000)


def hand_written_loop():
    """A Llama decoder driven by a plain greedy loop with a KV cache: the model is called once per new token."""
    model, ids, _ = llama_decoder()

    @torch.no_grad()
    def greedy(prompt):
        out = model(prompt, use_cache=True)
        tokens = [out.logits[:, -1].argmax(-1, keepdim=True)]
        for _ in range(NEW_TOKENS - 1):
            cache = "cache" if "cache" in out else "past_key_values"  # transformers 5.x renamed it
            out = model(tokens[-1], **{cache: out[cache]}, use_cache=True)
            tokens.append(out.logits[:, -1].argmax(-1, keepdim=True))
        return torch.cat(tokens, dim=1)

    return model, ids, greedy, model.model


WORKLOADS = {
    "llama": lambda: (*llama_decoder(), None),
    "t5": lambda: (*t5_encoder_decoder(), None),
    "loop": hand_written_loop,
}


@functools.cache
def captured(name):
    """The profile of one workload (1 warmup, 2 runs, lite but for llama) and the plain timing of its calls."""
    obj, ids, infer, step = WORKLOADS[name]()
    step = step if step is not None else (obj.model if name == "llama" else obj.decoder)
    clock = StepClock(step)
    mode = "full" if name == "llama" else "lite"
    prof = ait.profile(obj, ids, clock.timed(infer), warmup_runs=1, measured_runs=2, mode=mode)
    return prof.data, clock


def measured_invocations(doc):
    """The inference calls that were the measured runs."""
    first = first_measured_call(doc)
    return [first + run["run_index"] for run in doc["runs"]]


@pytest.mark.parametrize(
    ("name", "step", "phases", "method"),
    [
        ("llama", MODEL, ["prefill", "decode"], BY_INPUT_LENGTHS),
        ("t5", "untuned_module:decoder", ["encoder", "prefill", "decode"], BY_CALL_ORDER),
        ("loop", MODEL, ["prefill", "decode"], BY_INPUT_LENGTHS),
    ],
)
def test_phases_are_found_from_what_the_capture_saw(name, step, phases, method):
    doc, _ = captured(name)

    assert validate(doc) == []
    split = doc["phase_split"]
    assert (split["step_region"], split["phases"], split["method"]) == (step, phases, method)
    for run in doc["runs"]:
        assert [phase["name"] for phase in run["phases"]] == phases
        assert [phase["steps"] for phase in run["phases"]][-2:] == [1, NEW_TOKENS - 1]
        assert run["generation"]["output_tokens"] == NEW_TOKENS


def test_the_llama_prefill_is_the_first_model_call_over_the_prompt():
    doc, _ = captured("llama")

    assert doc["phase_split"]["within"] == GENERATE
    assert doc["phase_split"]["prompt_tokens"] == 8
    assert next(r for r in doc["regions"] if r["id"] == MODEL)["call_lengths"] == [8, 1, 1, 1]


def test_the_t5_encoder_phase_holds_the_encoder_call():
    doc, _ = captured("t5")

    for run in doc["runs"]:
        encoder = run["phases"][0]
        assert [(r["region_id"], r["calls"]) for r in encoder["regions"]] == [(ENCODER, 1)]


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_phase_times_add_up_to_the_run_and_each_region_to_its_run_total(name):
    doc, _ = captured(name)

    for run in doc["runs"]:
        phases = run["phases"]
        assert sum(p["cpu_time_us"] for p in phases) == pytest.approx(run["timing"]["cpu_time_us"])
        assert sum(p["cpu_time_fraction"] for p in phases) == pytest.approx(1)
        for phase in phases:
            assert phase["residual"]["cpu_time_fraction"] + sum(
                r["cpu_time_fraction"] for r in phase["regions"]
            ) == pytest.approx(1)
        for region in run["regions"]:
            in_phases = [r for p in phases for r in p["regions"] if r["region_id"] == region["region_id"]]
            assert sum(r["cpu_time_us"] for r in in_phases) == pytest.approx(region["cpu_time_us"])
            assert sum(r["calls"] for r in in_phases) == region["calls"]


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_ttft_and_per_token_times_agree_with_a_plain_timing_of_the_same_calls(name):
    doc, clock = captured(name)

    for run, invocation in zip(doc["runs"], measured_invocations(doc), strict=True):
        ttft, tokens = clock.figures(invocation)
        generation = run["generation"]
        # the same calls timed two ways in the same run: only the few µs between the stamps differ
        assert generation["ttft_us"] == pytest.approx(ttft, rel=0.2, abs=1000)
        per_token = generation["time_per_output_token_us"]
        assert per_token["median"] == pytest.approx(sorted(tokens)[len(tokens) // 2], rel=0.2, abs=1000)
        assert per_token["p90"] <= max(tokens) + 1000


def test_a_saved_trace_reanalysed_gives_the_same_phases(tmp_path):
    model, ids, infer = llama_decoder()
    trace = tmp_path / "trace.json"

    prof = ait.profile(model, ids, infer, warmup_runs=0, measured_runs=1, mode="lite", trace_file=trace)

    again = build_profile(read_trace_file_events(trace))
    assert again["phase_split"] == prof.data["phase_split"]
    assert again["runs"][0]["phases"] == prof.data["runs"][0]["phases"]


# ---- the views ------------------------------------------------------------------------------------------


def test_the_phase_headline_adds_up_to_one_per_run_in_every_phase():
    doc, _ = captured("t5")

    for name in doc["phase_split"]["phases"]:
        rows = phase_rows(doc, name)
        assert rows[-1].role == "residual"
        for index in range(len(doc["runs"])):
            assert sum(row.fractions[index] for row in rows) == pytest.approx(1)


def test_markdown_and_the_terminal_report_show_the_phases_and_token_figures():
    doc, _ = captured("llama")

    markdown = render_markdown(doc)
    terminal = terminal_text(profile_view(doc))

    assert "## Phases" in markdown and "| prefill |" in markdown and "| decode |" in markdown
    for text in (markdown, terminal):
        assert "time to first token" in text and "per output token" in text
        assert "decided by input lengths" in text


def test_a_profile_that_is_not_a_generate_shows_no_phases():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())

    doc = ait.profile(model, torch.randn(2, 4), warmup_runs=0, measured_runs=2, mode="lite").data

    assert "phase_split" not in doc and all("phases" not in run for run in doc["runs"])
    assert "## Phases" not in render_markdown(doc) and phase_rows(doc, "decode") == []


def test_compare_lines_up_the_phases_both_sides_have_with_their_regions_and_token_figures():
    llama, _ = captured("llama")
    t5, _ = captured("t5")

    same = compare_profiles(llama, llama)
    across = compare_profiles(llama, t5)

    assert [phase.name for phase in same.phases] == ["prefill", "decode"]
    assert all(phase.change.ratio == pytest.approx(1) for phase in same.phases)
    assert [row.path for row in same.phases[1].regions] == ["model", "lm_head", "(residual)"]
    assert [token.figure for token in same.tokens] == ["ttft_us", "per_output_token_us"]
    assert [phase.name for phase in across.phases] == ["prefill", "decode"]  # the encoder phase is t5's only
    assert "phases" in same.to_dict()


# ---- suggest, per phase -----------------------------------------------------------------------------------


def synthetic_doc(prefill_us, decode_us, gap_us, lengths=(8, 1, 1, 1)):
    """A document of two runs of step calls (a prefill call, then decode calls ``gap_us`` apart), through the trace."""
    durations = (prefill_us, decode_us, decode_us, decode_us)

    def calls(start, index):
        spans, at = [], start
        for us in durations:
            spans.append(region_span(MODEL, at, at + us))
            at += us + gap_us
        return spans

    run_us = sum(durations) + len(durations) * gap_us
    return laid_out(calls, runs=2, run_us=run_us, regions=[region_meta(MODEL, call_lengths=list(lengths))])


def codes(doc):
    return [code for code, *_ in phase_advice(doc)]


def test_a_decode_call_costing_nearly_the_prompts_is_dominated_by_dispatch():
    assert codes(synthetic_doc(prefill_us=100.0, decode_us=80.0, gap_us=1.0)) == ["PHASE_DECODE_DISPATCH"]
    assert codes(synthetic_doc(prefill_us=800.0, decode_us=100.0, gap_us=1.0)) == []


def test_time_between_decode_steps_is_the_loops_own_work():
    assert "PHASE_DECODE_OUTSIDE" in codes(synthetic_doc(prefill_us=800.0, decode_us=100.0, gap_us=60.0))


def test_a_step_that_rereads_the_growing_sequence_has_no_cache():
    doc = synthetic_doc(prefill_us=800.0, decode_us=900.0, gap_us=1.0, lengths=(8, 9, 10, 11))

    assert "PHASE_NO_CACHE" in codes(doc)
    assert "PHASE_DECODE_DISPATCH" not in codes(doc)  # a decode call reads 9+ tokens, not one


def test_suggest_carries_the_phase_findings_of_a_captured_loop_without_cache():
    model, ids, _ = llama_decoder()

    @torch.no_grad()
    def no_cache(prompt):
        for _ in range(NEW_TOKENS):
            prompt = torch.cat([prompt, model(prompt, use_cache=False).logits[:, -1:].argmax(-1)], dim=1)
        return prompt

    doc = ait.profile(model, ids, no_cache, warmup_runs=0, measured_runs=2, mode="lite").data

    assert doc["phase_split"]["method"] == BY_INPUT_LENGTHS
    assert "one more in each later one" in doc["phase_split"]["basis"]
    assert "PHASE_NO_CACHE" in [line.code for line in suggest(doc).advice]


def test_the_viewer_store_lists_each_phase_then_its_regions_and_residual(tmp_path):
    doc, _ = captured("t5")
    path = tmp_path / "t5.profile.json"
    save(doc, path)
    store = ProfileStore(runs_dir=tmp_path)

    assert store.open_names(path.name), store.problem

    phases = store.phase_table()
    assert list(phases.loc[phases["row"] == "(phase)", "phase"]) == ["encoder", "prefill", "decode"]
    for name in ("encoder", "prefill", "decode"):
        parts = phases[(phases["phase"] == name) & (phases["row"] != "(phase)")]
        assert parts["row"].iloc[-1] == "(residual)"
    assert any("time to first token" in line for line in store.phase_lines())
