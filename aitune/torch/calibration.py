"""The gain model's calibration on this machine: a short timing run, cached per machine and versions.

``ensure_calibration()`` measures once (a few seconds) what ``aitune.suggest.gain`` needs and keeps
it in ``$AITUNE_CACHE_DIR/calibration`` (else ``~/.cache/aitune/calibration``, created 0700):

- ``eager_op_us``: host µs per eager operator on tiny tensors (a chain of linear, add, relu and
  layer_norm calls: dispatch, not arithmetic);
- ``tuned_op_us`` and ``tuned_call_us``: the same chain as an ONNX Runtime graph (built with
  ``onnx.helper``, nothing exported), on torch's thread count, spinning off as aitune's backend runs
  it: the cost per original operator (the slope over two chain lengths) and per call (the rest,
  plus what aitune's wrapper adds to a call: a tiny module tuned with the eager backend);
- ``stateful_call_us``: what dynamo adds to a call that takes and returns an object with state: a
  12-layer decode step carrying a key-value cache of 24 tensors (GPT-2's, Whisper-base's decoder's)
  compiled with a backend that keeps dynamo's graph as it is (no code generated), timed against that
  graph alone (dynamo's guards, argument handling, the cache's mutations replayed), plus aitune's
  wrapper. Importing dynamo and compiling take a few seconds, once per machine (the cache);
- ``arithmetic``: eager ÷ ONNX Runtime time of a matmul, a convolution in a residual block (two conv →
  batch norm pairs, a ReLU between, the input added and a ReLU: ONNX Runtime folds each normalisation
  into its convolution and fuses the rest), a GRU layer over 8 steps (one eager operator
  dispatching every gate of every step; one ONNX kernel) and a chain of elementwise operators, large
  enough that dispatch does not count (at least 1: a slower backend is never kept; at most
  `MAX_ARITHMETIC_SPEEDUP`); attention gets the larger of matmul's and elementwise's.

A calibration measured on a machine busier than its cores (load average) says so, and is measured
again by the first ``ensure_calibration()`` that finds the machine quiet.

Every figure is a median over interleaved repeats. ``cached_calibration()`` only reads the cache:
``aitune.torch.performance.environment.profile_environment`` puts it in every captured profile's
``environment.gain_calibration``, so that suggest, which never runs torch, predicts with this
machine's figures.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aitune.cpuinfo import cpu_model
from aitune.suggest.gain import Calibration
from aitune.torch.backends.onnx_export import hand_built_model

logger = logging.getLogger(__name__)

MAX_CACHE_BYTES = 16_384
LOADED_SUFFIX = " (a loaded machine: measured again once it is quiet)"
MAX_ARITHMETIC_SPEEDUP = 3.0
"""A measured arithmetic speedup is clamped here: beyond it the eager side was starved (an OpenMP team
on a loaded machine ran a 16-channel convolution 400× slower than alone), not beaten."""
REPEATS = 25
TINY = 16  # features of the dispatch chain: arithmetic negligible
CHAIN_BLOCKS = (2, 12)  # chain lengths (blocks of 4 operators) whose slope is the tuned cost per operator
STATEFUL_LAYERS = 12  # layers of the decode step whose per-call dynamo cost is `stateful_call_us`
RECURRENT_FEATURES = 64  # a GRU as the zoo's translator holds one: small enough that dispatch is most of it
METHOD = 5
"""What `calibrate` measures, part of the cache key: raised whenever a figure is measured differently, so a
calibration cached by an earlier method is measured again (2: the convolution as a conv → batch norm → ReLU
block; 3: ``stateful_call_us``; 4: the recurrent kind; 5: the convolution as a residual block)."""


def cache_dir() -> Path:
    """``$AITUNE_CACHE_DIR/calibration``, else ``~/.cache/aitune/calibration``."""
    root = os.environ.get("AITUNE_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "aitune") / "calibration"


def cache_file() -> Path:
    """This machine's cache file: named by a hash of the processor, core count, threads, versions and `METHOD`."""
    facts = {
        "method": METHOD,
        "machine": platform.machine(),
        "processor": _processor(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "onnxruntime": _version("onnxruntime"),
    }
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"gain-{key}.json"


def cached_calibration() -> Calibration | None:
    """This machine's cached calibration, or None (none yet, or the file is not one): never measures."""
    path = cache_file()
    try:
        if not path.is_file() or path.stat().st_size > MAX_CACHE_BYTES:
            return None
        return Calibration.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def ensure_calibration() -> Calibration | None:
    """The cached calibration, measured and cached first when there is none (or it was measured on a
    loaded machine and this one is quiet now); None where ONNX Runtime or onnx is missing or the
    measuring fails (the gain model then uses its fallback table; a warning says why)."""
    found = cached_calibration()
    if found is not None and (not found.source.endswith(LOADED_SUFFIX) or _loaded()):
        return found
    if _version("onnxruntime") is None or _version("onnx") is None:
        return found
    try:
        calibration = calibrate()
    except Exception as error:  # a figure for the forecast: its failure must not stop the capture or the tuning
        logger.warning("aitune: the gain model's calibration failed (%s); suggest predicts without it", error)
        return found
    folder = cache_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    temporary = folder / f".{cache_file().name}.{os.getpid()}"
    temporary.write_text(json.dumps(calibration.to_dict()), encoding="utf-8")
    temporary.replace(cache_file())
    return calibration


def calibrate() -> Calibration:
    """Measure this machine's figures (see the module docstring); a few seconds."""
    import onnxruntime

    with torch.no_grad():
        eager_op_us = _eager_op_us()
        short, long = (_graph_call_us(onnxruntime, _chain_graph(blocks)) for blocks in CHAIN_BLOCKS)
        operators = [4 * blocks for blocks in CHAIN_BLOCKS]
        tuned_op_us = max(0.05, (long - short) / (operators[1] - operators[0]))
        wrapper_us = _wrapper_us()
        tuned_call_us = max(1.0, short - operators[0] * tuned_op_us) + wrapper_us
        stateful_call_us = _dynamo_call_us() + wrapper_us
        arithmetic = {
            kind: min(MAX_ARITHMETIC_SPEEDUP, max(1.0, speedup(onnxruntime))) for kind, speedup in _ARITHMETIC.items()
        }
    arithmetic["attention"] = max(arithmetic["matmul"], arithmetic["elementwise_norm"])  # its matmuls and softmax
    when = datetime.now(timezone.utc).date().isoformat()
    load = f", load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores{LOADED_SUFFIX}" if _loaded() else ""
    source = (
        f"calibrated {when}: torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"{torch.get_num_threads()} thread(s){load}"
    )
    return Calibration(eager_op_us, tuned_op_us, tuned_call_us, arithmetic, source, stateful_call_us)


class DispatchProbe:
    """The eager chain ``eager_op_us`` is calibrated on (25 blocks of linear, add, layer_norm and relu on a
    1 × `TINY` tensor: dispatch, no arithmetic), timed once per call: µs per operator at that moment.

    A capture times it after each measured run (`capture_eager_op_us` in the profile's environment), so
    the gain model can scale the cached calibration's µs figures to the machine's speed during the
    runs it predicts from: a shared machine's speed drifts by tens of percent over minutes."""

    BLOCKS = 25

    def __init__(self) -> None:
        self._x, self._layer, self._norm = torch.randn(1, TINY), nn.Linear(TINY, TINY), nn.LayerNorm(TINY)

    def chain(self) -> None:
        h = self._x
        for _ in range(self.BLOCKS):
            h = torch.relu(self._norm(self._layer(h) + self._x))

    def __call__(self) -> float:
        with torch.no_grad():
            start = time.perf_counter_ns()
            self.chain()
            return (time.perf_counter_ns() - start) / 1000 / (4 * self.BLOCKS)


def _eager_op_us() -> float:
    probe = DispatchProbe()
    return _median_us(probe.chain) / (4 * probe.BLOCKS)


def _wrapper_us() -> float:
    """What aitune's wrapper adds to each call of a tuned module (inputs matched to a graph, outputs
    rebuilt): a tiny module wrapped and tuned with the eager backend, against the module alone."""
    from aitune.torch.backends import EagerBackend
    from aitune.torch.module.paths import unwrap, wrap
    from aitune.torch.tuning.api import record, tune_recorded
    from aitune.torch.tuning.strategies import OneBackendStrategy

    holder, x = nn.Sequential(nn.Linear(TINY, TINY)).eval(), torch.randn(1, TINY)
    plain = _median_us(lambda: holder(x))
    wrappers = list(wrap(holder, ["0"]).values())
    try:
        record(holder, [x, x], wrappers)
        tune_recorded(wrappers, strategy=OneBackendStrategy(EagerBackend()))
        return max(0.0, _median_us(lambda: holder(x)) - plain)
    finally:
        unwrap(holder, ["0"])


class _Cache:
    """A key-value cache as Hugging Face's ``DynamicCache`` holds one: a key and a value per layer, grown each call."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        self.keys, self.values = list(keys), list(values)

    def update(self, key: torch.Tensor, value: torch.Tensor, layer: int) -> torch.Tensor:
        self.keys[layer] = torch.cat([self.keys[layer], key], dim=-2)
        self.values[layer] = torch.cat([self.values[layer], value], dim=-2)
        return self.values[layer]


class _DecodeStep(nn.Module):
    """One decode step: a token's features through `STATEFUL_LAYERS` linear layers, each adding to the cache."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(TINY, TINY) for _ in range(STATEFUL_LAYERS))

    def forward(self, x: torch.Tensor, cache: _Cache) -> tuple[torch.Tensor, _Cache]:
        for index, layer in enumerate(self.layers):
            h = layer(x)
            x = x + cache.update(h, h, index)[:, -1:]
        return x, cache


def _dynamo_call_us() -> float:
    """Host µs dynamo adds to a call of `_DecodeStep` with a fresh cache: the step compiled with a
    backend that keeps dynamo's graph as it is, against that graph alone on the same inputs; 0 where
    torch.compile cannot run here (the gain model then uses its fallback figure)."""
    graphs: list[tuple[Callable[..., Any], list[Any]]] = []

    def keep(graph: Any, inputs: list[Any]) -> Callable[..., Any]:
        graphs.append((graph, inputs))
        return graph.forward

    step, x = _DecodeStep().eval(), torch.randn(1, 1, TINY)
    keys, values = ([torch.randn(1, 2, TINY) for _ in range(STATEFUL_LAYERS)] for _ in range(2))
    try:
        compiled = torch.compile(step, backend=keep, dynamic=False, fullgraph=True)
        compiled(x, _Cache(keys, values))
    except Exception:  # no dynamo on this Python or platform: nothing to measure
        return 0.0
    graph, inputs = graphs[0]
    dynamo, alone = _interleaved(
        lambda: compiled(x, _Cache(keys, values)), lambda: (_Cache(keys, values), graph(*inputs))
    )
    return max(0.0, dynamo - alone)


def _chain_graph(blocks: int) -> Any:
    """``blocks`` × (MatMul, Add, LayerNormalization, Relu) on a 1 × `TINY` input: the eager chain's ONNX twin."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weights = [
        numpy_helper.from_array(np.random.default_rng(0).standard_normal((TINY, TINY)).astype(np.float32), "w"),
        numpy_helper.from_array(np.ones(TINY, np.float32), "scale"),
        numpy_helper.from_array(np.zeros(TINY, np.float32), "bias"),
    ]
    nodes, h = [], "x"
    for index in range(blocks):
        names = [f"{kind}{index}" for kind in ("mm", "add", "norm", "relu")]
        nodes += [
            helper.make_node("MatMul", [h, "w"], [names[0]]),
            helper.make_node("Add", [names[0], "x"], [names[1]]),
            helper.make_node("LayerNormalization", [names[1], "scale", "bias"], [names[2]], axis=-1),
            helper.make_node("Relu", [names[2]], [names[3]]),
        ]
        h = names[3]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "chain", [value("x", TensorProto.FLOAT, [1, TINY])], [value(h, TensorProto.FLOAT, [1, TINY])], weights
    )
    return hand_built_model(graph, 17)


def _graph_call_us(onnxruntime: Any, model: Any) -> float:
    """Median µs of one call of ``model`` on a 1 × `TINY` input, as aitune's backend makes it."""
    return _median_us(_graph_call(onnxruntime, model, torch.randn(1, TINY)))


def _graph_call(onnxruntime: Any, model: Any, x: torch.Tensor) -> Callable[[], object]:
    """One call of ``model`` on ``x`` as aitune's backend makes it: torch in, numpy through ORT, torch out."""
    session = _session(onnxruntime, model)
    name = session.get_inputs()[0].name
    return lambda: torch.from_numpy(session.run(None, {name: x.numpy()})[0])


def _session(onnxruntime: Any, model: Any) -> Any:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _graph(name: str, nodes: list[Any], x: torch.Tensor, weights: dict[str, torch.Tensor] | None = None) -> Any:
    """An ONNX model of ``nodes`` from the input ``x`` to the output ``y``, ``weights`` as initialisers."""
    from onnx import TensorProto, helper, numpy_helper

    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        name,
        [value("x", TensorProto.FLOAT, list(x.shape))],
        [value("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(tensor.numpy(), key) for key, tensor in (weights or {}).items()],
    )
    return hand_built_model(graph, 17)


def _matmul(onnxruntime: Any) -> float:
    from onnx import helper

    x, w = torch.randn(128, 256), torch.randn(256, 256)
    tuned = _graph_call(onnxruntime, _graph("matmul", [helper.make_node("MatMul", ["x", "w"], ["y"])], x, {"w": w}), x)
    return _speedup(lambda: torch.mm(x, w), tuned)


def _conv(onnxruntime: Any) -> float:
    """A convolution as models hold one, in a residual block (conv → batch norm → ReLU → conv → batch
    norm, plus the input, → ReLU: a ResNet's basic block; a UNet's resnet blocks have the same shape):
    ONNX Runtime folds each normalisation into its convolution's weights, fuses the activations and the
    sum, and keeps its blocked layout from one convolution to the next; eager runs seven operators."""
    from onnx import helper

    x = torch.randn(1, 16, 32, 32)
    weights = {"w1": torch.randn(16, 16, 3, 3), "w2": torch.randn(16, 16, 3, 3)}
    norm = {
        "scale": torch.rand(16) + 0.5,
        "shift": torch.randn(16),
        "mean": torch.randn(16),
        "variance": torch.rand(16) + 0.5,
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", *norm], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", *norm], ["n2"]),
        helper.make_node("Add", ["n2", "x"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    tuned = _graph_call(onnxruntime, _graph("basic_block", nodes, x, {**weights, **norm}), x)
    functional = torch.nn.functional

    def normalised(h: torch.Tensor) -> torch.Tensor:
        return functional.batch_norm(h, norm["mean"], norm["variance"], norm["scale"], norm["shift"])

    def eager() -> None:
        h = torch.relu(normalised(functional.conv2d(x, weights["w1"], padding=1)))
        torch.relu(normalised(functional.conv2d(h, weights["w2"], padding=1)) + x)

    return _speedup(eager, tuned)


def _elementwise(onnxruntime: Any) -> float:
    from onnx import helper

    x = torch.randn(64, 1024)
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["a"]),
        helper.make_node("Add", ["a", "x"], ["b"]),
        helper.make_node("Sigmoid", ["b"], ["c"]),
        helper.make_node("Mul", ["c", "b"], ["y"]),
    ]
    tuned = _graph_call(onnxruntime, _graph("silu", nodes, x), x)

    def eager() -> None:
        b = x * x + x
        torch.sigmoid(b) * b

    return _speedup(eager, tuned)


def _recurrent(onnxruntime: Any) -> float:
    """A GRU layer over a short sequence, as the layer a translator or a speech model holds: eager runs one
    operator that dispatches each gate of each time step; ONNX Runtime's GRU runs the loop in one kernel."""
    from onnx import helper

    steps, features = 8, RECURRENT_FEATURES
    layer = nn.GRU(features, features).eval()  # (time, batch, features), as ONNX's GRU takes it
    x = torch.randn(steps, 1, features)
    # PyTorch keeps the gates as (reset, update, new); ONNX as (update, reset, new). Its bias is Wb then Rb.
    order = [1, 0, 2]

    def gates(weight: torch.Tensor) -> torch.Tensor:
        chunks = weight.detach().chunk(3)
        return torch.cat([chunks[index] for index in order]).unsqueeze(0)

    weights = {
        "w": gates(layer.weight_ih_l0),
        "r": gates(layer.weight_hh_l0),
        "b": torch.cat([gates(layer.bias_ih_l0), gates(layer.bias_hh_l0)], dim=1),
    }
    node = helper.make_node("GRU", ["x", "w", "r", "b"], ["y"], hidden_size=features, linear_before_reset=1)
    tuned = _graph_call(onnxruntime, _graph("gru", [node], x, weights), x)
    return _speedup(lambda: layer(x), tuned)


_ARITHMETIC: dict[str, Callable[[Any], float]] = {
    "matmul": _matmul,
    "conv": _conv,
    "recurrent": _recurrent,
    "elementwise_norm": _elementwise,
}


def _median_us(call: Callable[[], object]) -> float:
    call()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(times)


def _speedup(eager: Callable[[], object], tuned: Callable[[], object]) -> float:
    """Median eager µs ÷ median tuned µs over `REPEATS` interleaved pairs of calls: drift hits both."""
    eager_us, tuned_us = _interleaved(eager, tuned)
    return eager_us / tuned_us


def _interleaved(eager: Callable[[], object], tuned: Callable[[], object]) -> tuple[float, float]:
    """Median µs of each of two calls over `REPEATS` interleaved pairs."""
    eager(), tuned()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(REPEATS):
        for call, kept in zip((eager, tuned), times, strict=True):
            start = time.perf_counter_ns()
            call()
            kept.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def _loaded() -> bool:
    """More runnable processes than cores over the last minute: timings then measure the queue."""
    return hasattr(os, "getloadavg") and os.getloadavg()[0] > (os.cpu_count() or 1)


def _processor() -> str:
    return cpu_model() or platform.processor()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
