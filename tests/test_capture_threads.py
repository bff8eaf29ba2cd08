"""Capture with other threads calling the same modules: only the capturing thread's calls are timed,
the others are counted and reported, nothing crashes, and everything is restored while they run on."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.report import validate

MODES = ["full", "lite"]
CAPTURES = 20
RUNS = 3
WAIT_S = 30.0  # a generous bound on a handshake: a broken one fails the test instead of hanging it


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


class Decoder(nn.Module):
    """Reached through ``decode``, which calls ``self``: an entry-method region with its forward inside."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        return self(x * 2)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.enc, self.dec, self.head = Encoder(), Decoder(), nn.Linear(16, 4)


def pipeline(net: Net, x: torch.Tensor) -> torch.Tensor:
    return net.head(net.dec.decode(net.enc(x)))


TOP_REGIONS = ["untuned_module:enc", "untuned_module:dec.decode", "untuned_module:head"]
ALL_REGIONS = ["untuned_module:enc", "untuned_module:dec", "untuned_module:dec.decode", "untuned_module:head"]
CALLS_PER_PIPELINE = 4  # enc, dec.decode, dec (inside decode), head


class Hammer:
    """A background thread calling the pipeline on the same modules in a loop, checking every output."""

    def __init__(self, net: Net, x: torch.Tensor) -> None:
        self.net, self.x = net, x
        self.expected = pipeline(net, x).detach()
        self.finished = 0
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Hammer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)

    def wait_for(self, calls: int) -> None:
        """Block until ``calls`` more pipelines have finished on the background thread."""
        with self._progress:
            target = self.finished + calls
            if not self._progress.wait_for(lambda: self.finished >= target or self.problems, WAIT_S):
                raise AssertionError("the background thread stopped making progress")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                out = pipeline(self.net, self.x)
            except Exception as error:  # the test reports it; the thread must not die silently
                self.problems.append(f"{type(error).__name__}: {error}")
                out = None
            if out is not None and not torch.equal(out, self.expected):
                self.problems.append("an output differs from the uninstrumented one")
            with self._progress:
                self.finished += 1
                self._progress.notify_all()


def off_thread_warning(doc: dict) -> tuple[int, int] | None:
    """(calls, threads) of the document's OFF_THREAD_REGION_CALLS warning, None when it has none."""
    found = [w for w in doc["warnings"] if w["code"] == "OFF_THREAD_REGION_CALLS"]
    if not found:
        return None
    calls, threads = re.match(r"(\d+) call\(s\) .* on (\d+) thread\(s\)", found[0]["message"]).groups()
    return int(calls), int(threads)


def aitune_leftovers(net: Net) -> list[str]:
    """Instance attributes or hooks a capture could leave on the modules."""
    found = []
    for name, module in net.named_modules():
        found += [f"{name or 'net'}.{method}" for method in ("forward", "decode") if method in vars(module)]
        found += [f"{name or 'net'}: a forward pre hook"] if module._forward_pre_hooks else []
    return found


@pytest.mark.parametrize("mode", MODES)
def test_a_background_thread_calling_the_same_modules_never_breaks_the_capture(mode):
    net, x = Net(), torch.randn(8, 16)

    def infer(x: torch.Tensor) -> torch.Tensor:
        out = pipeline(net, x)
        hammer.wait_for(2)  # the second pipeline starts after this call did: at least one runs inside it
        return out

    with Hammer(net, torch.randn(4, 16)) as hammer:  # another batch size: its shapes must not be recorded
        docs = [ait.profile(net, x, infer, warmup_runs=1, measured_runs=RUNS, mode=mode).data for _ in range(CAPTURES)]
        leftovers = aitune_leftovers(net)
        hammer.wait_for(2)  # the thread started before the captures goes on after them, on the restored modules

    assert hammer.problems == []
    assert leftovers == []
    for doc in docs:
        assert validate(doc) == []
        assert {r["id"]: r["input_shapes"]["distinct"] for r in doc["regions"]} == dict.fromkeys(ALL_REGIONS, 1)
        for run in doc["runs"]:
            assert [(r["region_id"], r["calls"]) for r in run["regions"]] == [(region, 1) for region in TOP_REGIONS]
            decode = next(node for node in run["tree"] if node["region_id"] == "untuned_module:dec.decode")
            assert [(c["region_id"], c["calls"]) for c in decode["children"]] == [("untuned_module:dec", 1)]
        calls, threads = off_thread_warning(doc)
        assert calls >= CALLS_PER_PIPELINE * RUNS
        assert threads == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_capture_without_other_threads_reports_no_off_thread_calls(mode):
    net, x = Net(), torch.randn(8, 16)

    doc = ait.profile(net, x, lambda x: pipeline(net, x), warmup_runs=1, measured_runs=RUNS, mode=mode).data

    assert off_thread_warning(doc) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_workload_fanning_out_to_a_thread_pool_attributes_only_its_own_thread(mode, tmp_path):
    net, x = Net(), torch.randn(8, 16)
    both_workers = threading.Barrier(2, timeout=WAIT_S)  # two tasks at once: one on each worker thread

    def encode(chunk: torch.Tensor) -> torch.Tensor:
        both_workers.wait()
        return net.enc(chunk)

    def infer(x: torch.Tensor) -> torch.Tensor:
        encoded = torch.cat(list(pool.map(encode, x.chunk(2))))
        return net.head(net.dec.decode(encoded))

    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = infer(x)
        prof = ait.profile(net, x, infer, warmup_runs=1, measured_runs=RUNS, mode=mode, trace_file=tmp_path / "t.json")
        captured = infer(x)
    reanalysed = ait.analyze_trace(prof.trace_file).data

    assert torch.equal(captured, plain)
    assert aitune_leftovers(net) == []
    doc = prof.data
    assert validate(doc) == []
    for run in doc["runs"]:  # enc ran on the workers: its time is the run's wait for them, in the residual
        assert [r["region_id"] for r in run["regions"]] == ["untuned_module:dec.decode", "untuned_module:head"]
        assert run["residual"]["cpu_time_fraction"] > 0
    assert off_thread_warning(doc) == (2 * RUNS, 2)  # one enc call per worker per run
    assert off_thread_warning(reanalysed) == (2 * RUNS, 2)
