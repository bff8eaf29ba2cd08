"""Capture on real modules under the real profiler: shares, restoration, regions, errors."""

import gzip
import inspect
import os
import subprocess
import sys

import pipeline_app
import pytest
import torch
import torch.utils._pytree as pytree
from busy import Busy, BusyPipeline, Decoder, first_measured_call, median_gap
from cli_helpers import ROOT
from documents import region_shares
from hf_models import llama_decoder, t5_encoder_decoder
from torch import nn

import aitune.torch as ait
from aitune.errors import CaptureError
from aitune.report import validate
from aitune.report.samples import path_of
from aitune.torch.calibration import DispatchProbe
from aitune.torch.registry import ManagedModule, ModuleRegistry

FAST = {"warmup_runs": 0, "measured_runs": 2}


def snapshot(module: nn.Module) -> list:
    """Everything instrumentation may touch, for every submodule."""
    return [
        (
            dict(vars(m)),
            m.forward,
            dict(m._forward_hooks),
            dict(m._forward_pre_hooks),
            dict(m._forward_hooks_always_called),
        )
        for m in module.modules()
    ]


def test_known_busy_times_are_attributed_within_three_points():
    """10/30/10 ms nominally; checked against the times the modules measured themselves (median over
    runs), so that a busy machine, which stretches a spin by a preemption or two, cannot fail it."""
    pipe = BusyPipeline()

    prof = ait.profile(pipe, torch.ones(1, 4), warmup_runs=1, measured_runs=5)

    pairs: dict[str, list[tuple[float, float]]] = {"encoder": [], "denoiser": [], "glue": []}
    for index, run in enumerate(prof.data["runs"]):
        # the runs follow the warmups (runs set aside as still warming up among them)
        call, total = first_measured_call(prof.data) + index, run["timing"]["cpu_time_us"]
        got = region_shares(prof.data["runs"][index])
        pairs["encoder"].append((got["untuned_module:encoder"], pipe.encoder.spent_us[call] / total))
        pairs["denoiser"].append((got["untuned_module:denoiser"], pipe.denoiser.spent_us[call] / total))
        pairs["glue"].append((run["residual"]["cpu_time_fraction"], pipe.glue_spent_us[call] / total))
    assert {key: median_gap(value) for key, value in pairs.items()} == {
        "encoder": pytest.approx(0, abs=0.03),
        "denoiser": pytest.approx(0, abs=0.03),
        "glue": pytest.approx(0, abs=0.03),
    }


def test_outputs_are_bitwise_identical_with_and_without_instrumentation():
    outputs = []

    def infer(token_ids):
        outputs.append(pipeline_app.pipe(token_ids))

    plain = pipeline_app.pipe(**pipeline_app.input_data)
    ait.profile(pipeline_app.pipe, pipeline_app.input_data, infer, **FAST)

    # 2 measured runs, 1 operator run: no warmup of the stamps' or the profiler's
    assert all(torch.equal(plain, out) for out in outputs) and len(outputs) == 3


def test_every_module_is_restored_after_profile():
    pipe = pipeline_app.pipe
    before = [snapshot(m) for m in (pipe.text_encoder, pipe.unet, pipe.vae)]

    ait.profile(pipe, pipeline_app.input_data, pipeline_app.infer, **FAST)

    assert [snapshot(m) for m in (pipe.text_encoder, pipe.unet, pipe.vae)] == before


def test_every_module_is_restored_when_the_workload_raises_mid_run():
    class Failing(Busy):
        calls = 0

        def forward(self, x):
            Failing.calls += 1
            if Failing.calls == 1:  # no warmup asked for: the first measured run
                raise RuntimeError("boom")
            return super().forward(x)

    model = nn.Sequential(Busy(0), Failing(0))
    before = snapshot(model)

    with pytest.raises(CaptureError, match="raised RuntimeError during the measured run 1 of 2: boom"):
        ait.profile(model, torch.ones(1, 4), warmup_runs=0, measured_runs=2)

    assert snapshot(model) == before


def test_decode_method_is_its_own_region_and_the_forward_it_calls_is_nested_inside_it():
    class Pipe:
        def __init__(self):
            self.vae = Decoder(20)  # long against the call's own overhead, so vae spans the run on a busy machine too

        def __call__(self, x):
            return self.vae.decode(x, scale=2.0)

    prof = ait.profile(Pipe(), torch.ones(1, 4), **FAST)

    (decode,) = prof.data["runs"][0]["tree"]
    assert (decode["region_id"], decode["calls"]) == ("untuned_module:vae.decode", 1)
    assert [(c["region_id"], c["calls"]) for c in decode["children"]] == [("untuned_module:vae", 1)]
    assert [c["region_id"] for c in decode["children"][0]["children"]] == ["untuned_module:vae.body"]
    assert prof.data["regions"][0]["module_type"] == "busy.Decoder"
    # decode is all this pipeline does, so the headline looks through it and its forward
    assert prof.data["spanning_regions"] == ["untuned_module:vae.decode", "untuned_module:vae"]


def test_a_method_the_forward_calls_itself_is_part_of_the_forward():
    class Embedder(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Busy(1)

        def forward(self, x):
            return self.body(self.embed_time(x))

        def embed_time(self, x):  # public, as a UNet's get_time_embed: an entry method when called from outside
            return x * 2

    class Pipe:
        def __init__(self):
            self.unet = Embedder()

        def __call__(self, x):
            return self.unet(x)

    prof = ait.profile(Pipe(), torch.ones(1, 4), **FAST)

    unet = prof.data["runs"][0]["tree"][0]
    assert (unet["region_id"], [c["region_id"] for c in unet["children"]]) == (
        "untuned_module:unet",
        ["untuned_module:unet.body"],
    )


def test_wrapped_methods_keep_their_signature_during_capture():
    seen = []
    expected = str(inspect.signature(Decoder(0).decode))

    class Pipe:
        def __init__(self):
            self.vae = Decoder(0)

        def __call__(self, x):
            seen.append(str(inspect.signature(self.vae.decode)))
            return self.vae.decode(x)

    ait.profile(Pipe(), torch.ones(1, 4), **FAST)

    assert set(seen) == {expected}
    assert "scale" in expected


def test_modulelist_entries_are_regions_of_their_own():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Busy(0), Busy(0)])
            self.heads = nn.ModuleDict({"main": Busy(0)})

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.heads["main"](x)

    prof = ait.profile(Model(), torch.ones(1, 4), **FAST)

    assert list(region_shares(prof.data["runs"][0])) == [
        "untuned_module:blocks.0",
        "untuned_module:blocks.1",
        "untuned_module:heads.main",
    ]


def test_an_aliased_module_is_instrumented_once_under_its_first_path():
    class Pipe:
        def __init__(self):
            self.vae = Busy(0)
            self.legacy_vae = self.vae

        def __call__(self, x):
            return self.legacy_vae(self.vae(x))

    prof = ait.profile(Pipe(), torch.ones(1, 4), **FAST)

    assert [(r["region_id"], r["calls"]) for r in prof.data["runs"][0]["regions"]] == [("untuned_module:vae", 2)]


class Managed:
    """A real registry entry for a module, as the AOT wrapper provides one."""

    def __init__(self, registry, name, module, state="tuned"):
        self.name, self.module, self.state = name, module, state
        registry.register("aot_module", name, self.describe)

    def describe(self):
        return ManagedModule("aot_module", self.name, self.module, self.module, self.state)


def test_managed_modules_are_aot_regions_and_their_siblings_stay_untuned():
    registry = ModuleRegistry()
    model = nn.Sequential(nn.Sequential(Busy(1), Busy(0)), Busy(0))
    keep = Managed(registry, "inner", model[0][0])

    prof = ait.profile(model, torch.ones(1, 4), registry=registry, **FAST)

    assert list(region_shares(prof.data["runs"][0])) == ["aot_module:inner", "untuned_module:0.1", "untuned_module:1"]
    inner = dict(prof.data["regions"][0])
    assert inner.pop("call_structure_us") >= 0  # timed: what a tuned wrapper pays for a tensor in, a tensor out
    assert inner == {
        "id": "aot_module:inner",
        "name": "inner",
        "kind": "aot_managed_module",
        "module_type": "busy.Busy",
        "wrapper_state": "tuned",
        "input_shapes": {"distinct": 1, "examples": [{"args[0]": [1, 4]}]},
    }
    del keep


def test_a_managed_region_nested_in_another_is_not_a_top_level_region():
    registry = ModuleRegistry()
    model = nn.Sequential(nn.Sequential(Busy(1), Busy(1)))
    keep = [Managed(registry, "outer", model[0]), Managed(registry, "inner", model[0][1])]

    prof = ait.profile(model, torch.ones(1, 4), registry=registry, **FAST)

    (outer,) = prof.data["runs"][0]["tree"]
    assert (outer["region_id"], outer["calls"]) == ("aot_module:outer", 1)
    assert [(c["region_id"], c["calls"]) for c in outer["children"]] == [("aot_module:inner", 1)]
    del keep


def test_offline_analysis_of_the_saved_trace_equals_the_live_result(tmp_path):
    prof = ait.profile(BusyPipeline(), torch.ones(1, 4), trace_file=tmp_path / "out" / "trace.json.gz", **FAST)

    offline = ait.analyze_trace(tmp_path / "out" / "trace.json.gz")

    assert offline.data == prof.data
    assert prof.data["trace_file"] == "trace.json.gz"


def test_a_gzipped_trace_is_written_at_aitunes_level_and_leaves_nothing_beside_it(tmp_path):
    from aitune.report.io import gzipped

    ait.profile(BusyPipeline(), torch.ones(1, 4), trace_file=tmp_path / "trace.json.gz", **FAST).wait_for_trace()

    packed = (tmp_path / "trace.json.gz").read_bytes()
    assert gzipped(gzip.decompress(packed)) == packed  # gzipped() wrote it, not torch's level-9 copy
    assert [path.name for path in tmp_path.iterdir()] == ["trace.json.gz"]


def test_a_trace_the_disk_cannot_hold_is_one_sentence_and_leaves_no_partial_file(tmp_path):
    code = (
        "import resource, signal, sys, torch; sys.path.insert(0, 'tests'); from busy import BusyPipeline\n"
        "import aitune.torch as ait; from aitune.errors import OutputError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))\n"
        f"try: ait.profile(BusyPipeline(), torch.ones(1, 4), trace_file={str(tmp_path / 'trace.json.gz')!r}, "
        "warmup_runs=0, measured_runs=2).wait_for_trace()\n"
        "except OutputError as error: print(error)"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": "."}
    )

    assert "the profiler could not write the trace" in result.stdout, result.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_no_trace_file_is_written_unless_asked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    prof = ait.profile(BusyPipeline(), torch.ones(1, 4), **FAST)

    assert prof.trace_file is None and "trace_file" not in prof.data
    assert list(tmp_path.iterdir()) == []


def test_input_signature_lists_tensors_without_values():
    prof = ait.profile(pipeline_app.pipe, pipeline_app.input_data, pipeline_app.infer, **FAST)

    assert prof.data["input"] == {
        "args_count": 0,
        "kwargs": ["token_ids"],
        "signature": [{"path": "kwargs.token_ids", "shape": [2, 16], "dtype": "int64", "device": "cpu"}],
    }


def test_input_shapes_are_recorded_in_the_first_operator_run_only():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.hooks_seen = []

        def forward(self, x, mask=None):
            self.hooks_seen.append(len(self._forward_pre_hooks))
            return x * 2

    class Growing:
        def __init__(self):
            self.step = Counting()

        def __call__(self, x):
            for length in (3, 4, 4):
                self.step(x[:, :length], mask=torch.ones(length, length))

    pipe = Growing()

    prof = ait.profile(pipe, torch.ones(1, 8), warmup_runs=1, measured_runs=2)

    assert prof.data["regions"][0]["input_shapes"] == {
        "distinct": 2,
        "examples": [{"args[0]": [1, 3], "kwargs.mask": [3, 3]}, {"args[0]": [1, 4], "kwargs.mask": [4, 4]}],
    }
    # the operator run (the last call) records the shapes: only it sees the shape hook; warmups and
    # measured runs see none (spans wrap forward)
    assert pipe.step.hooks_seen[-6:] == [0] * 3 + [1] * 3 and sum(pipe.step.hooks_seen) == 3


def test_regions_whose_calls_carry_a_cache_object_are_marked_stateful_and_plain_ones_are_not():
    model, ids, infer = llama_decoder()  # generate passes a DynamicCache to every decoder call and gets it back
    convolutional = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3)).eval()

    with torch.no_grad():
        decoder = ait.profile(model, ids, infer, max_depth=1, **FAST)
        plain = ait.profile(convolutional, torch.randn(1, 3, 8, 8), **FAST)

    marked = {
        path_of(region["id"]): region["stateful_io"] for region in decoder.data["regions"] if "stateful_io" in region
    }
    assert marked == {"model": True}  # not generate (ids in, ids out) nor lm_head (hidden states in, logits out)
    assert validate(decoder.data) == []
    assert not any("stateful_io" in region for region in plain.data["regions"])


def test_a_generates_encoder_is_marked_as_running_outside_the_roots_forward_and_structured_calls_cost_more():
    model, ids, infer = t5_encoder_decoder()  # generate calls model.get_encoder()(...), then model(...) per token

    with torch.no_grad():
        prof = ait.profile(model, ids, infer, max_depth=1, **FAST)

    regions = {path_of(region["id"]): region for region in prof.data["regions"]}
    assert [path for path, region in regions.items() if region.get("outside_root_forward")] == ["encoder"]
    assert prof.data["environment"]["capture_eager_op_us"] > 0  # the machine's speed between the measured runs
    # the decoder takes a cache and a dozen keywords and returns a ModelOutput; lm_head a tensor for a tensor
    assert regions["decoder"]["call_structure_us"] > 3 * regions["lm_head"]["call_structure_us"]
    assert validate(prof.data) == []


def test_an_output_that_cannot_be_rebuilt_leaves_its_structure_cost_out_and_the_capture_goes_on():
    class Refusing:  # a user's pytree node whose rebuild raises
        def __init__(self, tensor):
            self.tensor = tensor

    def rebuild(children, context):
        raise RuntimeError("this node cannot be rebuilt")

    pytree.register_pytree_node(Refusing, lambda node: ([node.tensor], None), rebuild)
    try:

        class Wrapping(nn.Module):
            def forward(self, x):
                return Refusing(x * 2)

        model = nn.Sequential(Wrapping(), nn.Identity())
        prof = ait.profile(model, torch.ones(1, 4), **FAST)
    finally:
        pytree._deregister_pytree_node(Refusing)

    regions = {path_of(region["id"]): region for region in prof.data["regions"]}
    assert regions["0"]["call_structure_us"] >= 0  # its argument, a tensor in a tuple, was taken apart
    assert validate(prof.data) == []


def test_a_recurrent_layer_is_its_own_kind_of_work_in_the_operator_mix():
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(8, 8, batch_first=True)

        def forward(self, x):
            return self.gru(x)[1]

    prof = ait.profile(Encoder().eval(), torch.randn(1, 5, 8), **FAST)

    runs = prof.data.get("operator_runs") or prof.data["runs"]
    gru = next(entry for run in runs for entry in run["regions"] if path_of(entry["region_id"]) == "gru")
    categories = gru["operators"]["categories"]  # the gates the GRU dispatches count under it; its zeros do not
    assert max(categories, key=categories.get) == "recurrent" and "matmul" not in categories
    assert validate(prof.data) == []


def test_environment_names_versions_and_never_the_host():
    import getpass
    import socket

    prof = ait.profile(BusyPipeline(), torch.ones(1, 4), **FAST)

    text = str(prof.data["environment"])
    assert prof.data["environment"]["torch"] == torch.__version__
    assert socket.gethostname() not in text and getpass.getuser() not in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warmup_runs": -1}, "warmup_runs must be an integer of at least 0 (got -1)"),
        ({"measured_runs": 0}, "measured_runs must be an integer of at least 1 (got 0)"),
    ],
)
def test_bad_run_counts_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ait.profile(BusyPipeline(), torch.ones(1, 4), **kwargs)


def test_a_non_callable_target_is_refused_by_name():
    with pytest.raises(CaptureError, match=r"nothing to call: builtins.int is not callable"):
        ait.profile(3)


def test_an_input_the_callable_rejects_names_the_problem_and_leaves_nothing_patched():
    model = nn.Sequential(Busy(0))
    before = snapshot(model)

    with pytest.raises(CaptureError, match=r"TypeError during the measured run 1 of 1: .*unexpected keyword"):
        ait.profile(model, {"nonsense": 1}, warmup_runs=0, measured_runs=1)

    assert snapshot(model) == before


def test_an_unwritable_trace_file_is_refused_before_anything_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    model = Busy(0)

    with pytest.raises(CaptureError, match="cannot write the Chrome trace to"):
        ait.profile(model, torch.ones(1, 4), trace_file=blocker / "trace.json", **FAST)


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_a_trace_the_disk_cannot_hold_leaves_the_old_file_and_no_partial_one(tmp_path, mode):
    target = tmp_path / "trace.json"
    target.write_bytes(b"old")
    code = (
        "import resource, signal, torch, aitune.torch as ait; from aitune.errors import OutputError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\n"
        f"try: ait.profile(torch.nn.Linear(4, 4), torch.ones(1, 4), warmup_runs=0, measured_runs=2, mode={mode!r}, "
        f"trace_file={str(target)!r}).wait_for_trace()\n"
        "except OutputError as error: print(error)"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )

    assert result.stdout.startswith(f"cannot write {target}"), result.stderr[-2000:]
    assert target.read_bytes() == b"old"
    assert [path.name for path in tmp_path.iterdir()] == ["trace.json"]


def test_the_machines_speed_is_probed_after_the_first_middle_and_last_measured_runs_only(monkeypatch):
    probed = []
    original = DispatchProbe.__call__
    monkeypatch.setattr(DispatchProbe, "__call__", lambda probe: probed.append(1) or original(probe))

    prof = ait.profile(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.ones(1, 4), warmup_runs=0, measured_runs=8)

    assert len(probed) == 3  # after runs 1, 5 and 8: a median over the runs for a fraction of the whole call
    assert prof.data["environment"]["capture_eager_op_us"] > 0
