"""Deferred tuning, dry runs with injected failures, error logs, a full disk, and the global switches."""

from __future__ import annotations

import errno
import logging
import subprocess
import sys

import pytest
import torch
from tuning.conftest import FAST_MEASURE, DiskFullBackend

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch import jit
from aitune.torch.tuning.strategies import TuneStrategy
from aitune.torch.tuning.trial import Candidate, Trial

from .conftest import Block, Net, built_net, config, states


def test_deferred_mode_records_until_armed_then_tunes_on_the_next_forward():
    net = built_net(mode="deferred")
    x = torch.randn(3, 8)
    for _ in range(4):
        net(x)
    recording = set(states(net).values())

    jit.arm()
    net(x)

    assert recording == {"recording"}
    assert states(net)["Net"] == "tuned"


def test_disarming_before_the_next_forward_keeps_recording():
    net = built_net(mode="deferred")
    net(torch.randn(3, 8))

    jit.arm()
    jit.disarm()
    net(torch.randn(3, 8))

    assert set(states(net).values()) == {"recording"}


def test_arming_in_eager_mode_names_the_fix():
    built_net()

    with pytest.raises(TuningError, match=r"arm\(\) applies to deferred mode .* JitConfig\(mode='deferred'\)"):
        jit.arm()


def test_a_dry_run_that_always_fails_falls_back_to_every_level_and_changes_nothing():
    net = built_net(dry_run=True, dry_run_failure_probability=1.0, seed=0)
    x = torch.randn(3, 8)
    expected = net(x)

    net(x)

    assert set(states(net).values()) == {"eager"}
    assert jit.active_session().find(net).reason.startswith("InjectedFailure: dry run: failure injected")
    assert torch.equal(net(x), expected)


def test_a_dry_run_injects_failures_with_the_given_probability():
    net = built_net(dry_run=True, dry_run_failure_probability=0.5, seed=3)
    net(torch.randn(3, 8))

    net(torch.randn(3, 8))

    found = states(net)

    assert "eager" in found.values() and "tuned" in found.values()
    assert all(p.runners == {} for p in jit.active_session().patched())  # a dry run keeps no backend


class RaisingStrategy(TuneStrategy):
    """A strategy with a bug: tuning raises outside any candidate."""

    name = "raising"

    def select(self, trial: Trial) -> Candidate | None:
        raise KeyError("graph id")


def test_a_tuning_error_is_logged_and_its_traceback_written_to_the_module_cache_folder(tmp_path, caplog):
    net = built_net(strategy=RaisingStrategy([]), cache_dir=tmp_path, skip=("Block",))
    caplog.set_level(logging.WARNING)

    net(torch.randn(3, 8))
    net(torch.randn(3, 8))

    log = tmp_path / "Net" / "tuning_error.log"
    assert states(net)["Net"] == "eager"
    assert "Traceback" in log.read_text() and "KeyError: 'graph id'" in log.read_text()
    assert f"JIT tuning of 'Net' failed (KeyError: 'graph id'); it runs eager, traceback in {log}" in caplog.text
    assert jit.active_session().find(net).outcome.error_log == str(log)


def test_a_full_disk_while_tuning_reaches_the_caller_and_leaves_the_module_working():
    net = built_net(strategy=ait.OneBackendStrategy(DiskFullBackend(), measure=FAST_MEASURE))
    x = torch.randn(3, 8)
    expected = net(x)

    with pytest.raises(RuntimeError, match="export failed") as raised:
        net(x)

    assert raised.value.__cause__.errno == errno.ENOSPC
    assert states(net)["Net"] == "recording"
    assert "forward" in vars(net.head)  # the descendants' routers are back
    assert torch.equal(jit.active_session().find(net).forward(x), expected)


def test_print_hierarchy_and_print_history_write_one_line_each_to_the_sink():
    net = built_net(skip=("Net",))
    net(torch.randn(3, 8))
    lines: list[str] = []

    jit.print_hierarchy(sink=lines.append)
    jit.print_history(sink=lines.append)

    assert lines[:3] == [
        "JIT tuning hierarchy:",
        "  Net [skipped: in the skip list] (Net)",
        "    Net.blocks.0 [recording] (Block)",
    ]
    assert "  Net: init → skipped (in the skip list)" in lines


def test_intercept_works_as_a_decorator_around_model_construction():
    @jit.intercept(config())
    def build() -> Block:
        return Block()

    block = build()

    assert "forward" in vars(block)


def test_importing_enable_intercepts_every_module_built_afterwards():
    code = (
        "import torch, aitune.torch.jit.enable, aitune.torch.jit as jit\n"
        "m = torch.nn.Linear(2, 2)\n"
        "print('forward' in vars(m), jit.active_session() is not None)\n"
        "jit.disable()\n"
        "print('forward' in vars(m), 'forward' in vars(torch.nn.Linear(2, 2)))\n"
    )

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.split() == ["True", "True", "False", "False"]


def test_global_interception_after_explicit_registration_is_a_clear_error():
    ait.register_for_jit_tuning(Block())

    with pytest.raises(TuningError, match="already uses JIT explicit registration, which cannot be mixed"):
        jit.intercept(config()).__enter__()


def test_explicit_registration_after_global_interception_is_a_clear_error():
    built_net()

    with pytest.raises(TuningError, match="already uses JIT global interception, which cannot be mixed"):
        ait.register_for_jit_tuning(Net())


def test_arm_without_jit_in_use_names_how_to_enable_it():
    with pytest.raises(TuningError, match=r"arm\(\) needs JIT tuning in use; enable it first"):
        jit.arm()


def test_disable_stops_interception():
    built_net()

    jit.disable()

    assert "forward" not in vars(Net())
