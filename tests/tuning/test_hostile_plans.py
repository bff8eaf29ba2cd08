"""The hostile plan corpus (tests/hostile/plans/, made by make_plan_corpus.py) through `apply_plan` and `tune --plan`.

Every case is refused in one sentence naming the file and the field, before anything changes: the
model keeps its own modules, nothing is registered, nothing is written (a new ``--out`` folder is
never made), and a plan whose size is the attack never costs its size in memory. FIFOs and links to
devices are refused by type, under a timeout, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import loop_app
import orjson
import pytest
from cli_helpers import ROOT
from torch import nn
from typer.testing import CliRunner

from aitune.cli.app import app
from aitune.errors import TuningError
from aitune.report import dumps
from aitune.torch.registry import MODULE_REGISTRY
from aitune.torch.tuning.paths import unwrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.plan_check import MAX_PLAN_BYTES

CORPUS = ROOT / "tests" / "hostile" / "plans"
GOOD = CORPUS / "good.plan.json"
APP = f"{ROOT / 'tests' / 'apps' / 'loop_app.py'}:infer"

WHERE = {
    "regions-a-string": "regions: 'encoder'",
    "regions-of-strings": "regions[0]: 'encoder.body.0'",
    "region-not-an-object": "regions[0]: 5",
    "kind-missing": 'is not an aitune plan (no "kind"',
    "schema-version-true": "schema_version True",
    "schema-version-float": "schema_version 1.0",
    "schema-version-string": "schema_version '1'",
    "schema-version-newer": "schema_version 2; this aitune reads version 1: upgrade aitune",
    "tolerance-negative": "tolerance.rtol: -1",
    "environment-escape": "environment.torch: '\\x1b[2J",
    "path-index-5000-digits": "regions[0].path: 'encoder.body.9999",
    "path-superscript-digit": "regions[0].path: 'encoder.body.²' is not a dotted path",
    "path-dunder": "regions[0].path: '__class__.__init__'",
    "path-empty-part": "regions[0].path: 'encoder..body'",
    "path-negative-index": "regions[0].path: 'encoder.body.-1'",
    "path-a-number": "regions[0].path: 5",
    "path-twice": "regions[1].path: 'encoder.body.0' appears twice",
    "path-nested": "regions[1].path: 'encoder' and 'encoder.body.0' nest",
    "module-type-escape": "regions[0].module_type: '\\x1b[31m",
    "mode-unknown": "regions[0].mode: 'eval'",
    "wrapper-a-string": "regions[0].wrapper: 'pickle'",
    "wrapper-type-unknown": "regions[0].wrapper.type: 'torch.nn.Module'",
    "wrapper-name-slash": "regions[0].wrapper.name: '../etc'",
    "state-bogus": "regions[0].wrapper.state: 'bogus'",
    "state-recording": "regions[0].wrapper.state: 'recording'",
    "graphs-a-dict": "regions[0].wrapper.graphs: {'a': 1}",
    "graph-id-a-path": "graph_id: '../../etc/x'",
    "backend-for-no-graph": "tuned_backends.0123456789ab: no graph of that id",
    "structure-not-json": "graphs[0]",
    "structure-a-number": "graphs[0].structure: 42",
    "structure-nested-100": "graphs[0]",
    "dtype-unknown": "float33",
    "dtype-a-torch-function": "'load'",
    "shape-negative": "graphs[0].max_shapes[0][2]: -16",
    "shape-wrong-rank": "graphs[0]",
    "shape-float": "graphs[0].max_shapes[0][2]: 16.5",
    "shape-a-string": "graphs[0].max_shapes[0]: '2x3x16x16'",
    "shapes-one-too-many": "graphs[0]",
    "shape-min-over-max": "graphs[0].min_shapes[0]: [4, 3, 16, 16] exceeds",
    "shape-min-other-rank": "graphs[0].min_shapes[0]: [2, 3, 16] does not match",
    "shape-huge-1x3x2000x2000": "[1, 3, 2000, 2000] brings the example input to 12,000,000 elements, over the 8,38",
    "shape-huge-dimension": "graphs[0].max_shapes[0][3]: 1000000000000 is greater than the maximum",
    "shape-huge-product": "elements, over the 8,388,608",
    "backend-unknown": "name: 'pickle' is not one of 'eager'",
    "backend-config-a-string": "config: 'bfloat16' is not of type 'object'",
    "backend-config-unknown-key": "config: 'module' was unexpected here (known: dtype)",
    "backend-config-wrong-type": "intra_op_threads: '4' is not of type 'integer'",
    "autocast-dtype-unknown": "dtype: 'float8' is not a dtype autocast computes in",
    "inductor-mode-unknown": "mode: 'turbo'",
    "tensorrt-workspace-huge": "workspace_gib: 1000000000 is greater than the maximum of 1024",
    "threads-2000": "intra_op_threads: 2000 is greater than the maximum of 1024",
    "threads-negative": "intra_op_threads: -1 is less than the minimum of 0",
    "threads-over-cpus": f"intra_op_threads: 1024 threads is more than this machine's {os.cpu_count()} CPUs",
    "precision-unknown": "precision: 'fp8' is not a precision aitune tunes at",
    "region-precision-unknown": "regions[0].precision: 'fp8' is not the precision the region's backends compute at",
    "precision-a-list": "precision: ['bf16'] is not a precision aitune tunes at",
    "int8-backend-in-fp32-plan": "name: int8_dynamic computes in int8, but the plan's precision is fp32",
    "bf16-config-unknown-key": "config: 'dtype' was unexpected here (known: compile)",
    "task-gate-metric-unknown": "task_gate.metric: 'accuracy' is not a task metric",
    "task-gate-value-huge": "task_gate.value: 1e+300 is greater than the maximum of 100",
    "task-gate-regions-huge": "task_gate.regions: ['a', 'a'",
    "not-json": "not valid JSON",
    "empty": "not valid JSON",
    "not-an-object": "is not an aitune plan",
    "nan-speedup": "not valid JSON",
    "gzip-bomb": f"unpacks to at least 16 MB, over the {MAX_PLAN_BYTES // 2**20} MB limit",
}
"""Case → what its sentence must say (the field and the value), so each is refused for its own fault."""

CASES = sorted(name.removesuffix(".plan.json") for name in os.listdir(CORPUS) if name != GOOD.name)


def _assert_one_sentence(message: str, plan: str) -> None:
    assert message.startswith(plan), message
    assert "\n" not in message and message.endswith(".") and len(message) < 700, message
    assert not any(ord(character) < 32 for character in message), message


def _assert_untouched(pipe: loop_app.Pipeline) -> None:
    for module in (pipe.encoder, pipe.encoder.body, pipe.encoder.body[0], pipe.head):
        assert "forward" not in vars(module)
    assert type(pipe.encoder.body[0]) is nn.Conv2d
    assert list(MODULE_REGISTRY) == []


def test_every_case_of_the_corpus_says_what_it_must():
    assert sorted(WHERE) == CASES


def test_the_committed_plan_corpus_is_what_the_script_makes():
    from hostile.make_plan_corpus import corpus

    assert {name: (CORPUS / name).read_bytes() for name in corpus()} == corpus()


def test_the_good_plan_of_the_corpus_applies():
    pipe = loop_app.build()

    applied = apply_plan(pipe, GOOD)

    assert list(applied.wrappers) == ["encoder.body.0"] and pipe.encoder.body[0].state.value == "tuned"
    unwrap(pipe, list(applied.wrappers))


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_plan_is_refused_in_one_sentence_and_changes_nothing(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pipe = loop_app.build()
    plan = str(CORPUS / f"{case}.plan.json")

    with pytest.raises(TuningError) as refused:
        apply_plan(pipe, plan)

    message = str(refused.value)
    _assert_one_sentence(message, plan)
    assert WHERE[case] in message
    _assert_untouched(pipe)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "case", ["path-superscript-digit", "shape-huge-1x3x2000x2000", "schema-version-true", "threads-2000", "gzip-bomb"]
)
def test_tune_refuses_a_hostile_plan_with_exit_2_and_leaves_no_out_folder(case, tmp_path):
    plan = str(CORPUS / f"{case}.plan.json")

    result = CliRunner().invoke(app, ["tune", APP, "--input", "x", "--plan", plan, "--out", str(tmp_path / "out")])

    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1 and result.stderr.startswith(f"[error] {plan}")
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def _special_files(tmp_path):
    fifo = tmp_path / "fifo.plan.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.plan.json"
    zero.symlink_to("/dev/zero")
    big = tmp_path / "big.plan.json"
    with big.open("wb") as sparse:  # no disk used: a hole of MAX_PLAN_BYTES + 1
        sparse.truncate(MAX_PLAN_BYTES + 1)
    return {
        fifo: "not a regular file",
        zero: "not a regular file",
        tmp_path: "is a folder",
        big: "is 16 MB, over the 16 MB limit",
        tmp_path / "missing.plan.json": "no such file",
    }


REFUSE_EACH = textwrap.dedent(
    """
    import sys
    from aitune.errors import TuningError
    from aitune.torch.tuning.plan_apply import apply_plan
    for plan in sys.argv[1:]:
        try:
            apply_plan(object(), plan)
        except TuningError as error:
            print(error)
        else:
            raise SystemExit(f"{plan} was applied")
    """
)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_a_device_a_folder_or_a_huge_file_as_plan_is_refused_by_type_or_size_within_a_timeout(tmp_path):
    special = _special_files(tmp_path)

    result = subprocess.run(  # in a process of its own: a FIFO or /dev/zero read would block or read for ever
        [sys.executable, "-c", REFUSE_EACH, *map(str, special)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )

    assert result.returncode == 0, result.stderr
    sentences = result.stdout.splitlines()
    assert len(sentences) == len(special)
    for (plan, wanted), sentence in zip(special.items(), sentences, strict=True):
        _assert_one_sentence(sentence, str(plan))
        assert wanted in sentence


SIZE_ATTACKS = ["shape-huge-1x3x2000x2000", "shape-huge-product", "shape-huge-dimension", "gzip-bomb", "threads-2000"]
MEASURE_PEAK = textwrap.dedent(
    """
    import sys
    sys.path[:0] = sys.argv[1:3]

    def peak_kib():  # this process's own high-water mark: ru_maxrss starts at the parent's, carried over at fork
        return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])

    import loop_app
    from aitune.errors import TuningError
    from aitune.torch.tuning.plan_apply import apply_plan
    pipe = loop_app.build()
    pipe(loop_app.x)
    before = peak_kib()
    for plan in sys.argv[3:]:
        try:
            apply_plan(pipe, plan)
        except TuningError:
            pass
        else:
            raise SystemExit(f"{plan} was applied")
    print(peak_kib() - before)
    """
)


def test_a_plan_whose_size_is_the_attack_never_costs_its_size_in_memory():
    plans = [str(CORPUS / f"{case}.plan.json") for case in SIZE_ATTACKS]

    result = subprocess.run(
        [sys.executable, "-c", MEASURE_PEAK, str(ROOT), str(ROOT / "tests" / "apps"), *plans],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )

    grown_kib = int(result.stdout.strip().splitlines()[-1])
    # The gzip bomb is read up to the limit (16 MiB, then its unpacked bytes): a few times the limit at most,
    # against 1.7 GB for 1×3×2000² before.
    assert grown_kib < 4 * MAX_PLAN_BYTES // 1024


def test_tune_refuses_a_plan_made_on_another_module_and_leaves_no_out_folder(tmp_path):
    other = orjson.loads(GOOD.read_bytes())
    other["regions"][0]["module_type"] = "torch.nn.modules.linear.Linear"
    plan = tmp_path / "plan.json"
    plan.write_bytes(dumps(other))

    result = CliRunner().invoke(app, ["tune", APP, "--input", "x", "--plan", str(plan), "--out", str(tmp_path / "out")])

    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert "made on a torch.nn.modules.linear.Linear at 'encoder.body.0'" in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plan.json"]
