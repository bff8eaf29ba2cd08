"""The gain model's calibration measured on the device in use: a short timing run (a few seconds).

``calibrate(device)`` measures what ``aitune.suggest.gain`` needs; the loop hands it to
``aitune.torch.calibration.ensure_calibration``, which caches the result per device. It lives in the
tuning layer because one figure is what aitune's tuned wrapper costs. On CUDA every probe runs on the
device and is timed up to a synchronisation; ONNX Runtime's graphs run as aitune's backend runs them
there (its CUDA execution provider, inputs and outputs through the host).

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
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import torch
from torch import nn

from aitune.suggest.gain import FALLBACK, Calibration
from aitune.torch.backends.onnx_export import hand_built_model
from aitune.torch.calibration import LOADED_SUFFIX, TINY, DispatchProbe, _loaded, device_id, synchronize

MAX_ARITHMETIC_SPEEDUP = 3.0
"""A measured arithmetic speedup is clamped here: beyond it the eager side was starved (an OpenMP team
on a loaded machine ran a 16-channel convolution 400× slower than alone), not beaten."""
REPEATS = 25
CHAIN_BLOCKS = (2, 12)  # chain lengths (blocks of 4 operators) whose slope is the tuned cost per operator
STATEFUL_LAYERS = 12  # layers of the decode step whose per-call dynamo cost is `stateful_call_us`
RECURRENT_FEATURES = 64  # a GRU as the zoo's translator holds one: small enough that dispatch is most of it


def calibrate(device: torch.device | None = None) -> Calibration:
    """Measure ``device``'s figures (the CPU by default; see the module docstring); a few seconds."""
    import onnxruntime

    probe = _Probe(device or torch.device("cpu"), onnxruntime)
    with torch.no_grad():
        eager_op_us, wrapper_us = probe.eager_op_us(), probe.wrapper_us()
        stateful_call_us = probe.dynamo_call_us() + wrapper_us
        graph, note = (_graph_figures(probe, wrapper_us), "") if probe.runs_graphs() else (_FALLBACK_GRAPH, _NO_GRAPHS)
    tuned_op_us, tuned_call_us, arithmetic = graph
    when = datetime.now(timezone.utc).date().isoformat()
    load = f", load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores{LOADED_SUFFIX}" if _loaded() else ""
    source = (
        f"calibrated {when} on {probe.name}: torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"{torch.get_num_threads()} thread(s){note}{load}"
    )
    return Calibration(eager_op_us, tuned_op_us, tuned_call_us, arithmetic, source, stateful_call_us, probe.name)


def _graph_figures(probe: _Probe, wrapper_us: float) -> tuple[float, float, dict[str, float]]:
    """(µs per operator in a graph, µs per graph call through aitune's wrapper, arithmetic speedups by kind)."""
    short, long = (probe.graph_call_us(_chain_graph(blocks)) for blocks in CHAIN_BLOCKS)
    operators = [4 * blocks for blocks in CHAIN_BLOCKS]
    tuned_op_us = max(0.05, (long - short) / (operators[1] - operators[0]))
    arithmetic = {kind: min(MAX_ARITHMETIC_SPEEDUP, max(1.0, speedup(probe))) for kind, speedup in _ARITHMETIC.items()}
    arithmetic["attention"] = max(arithmetic["matmul"], arithmetic["elementwise_norm"])  # its matmuls and softmax
    return tuned_op_us, max(1.0, short - operators[0] * tuned_op_us) + wrapper_us, arithmetic


_FALLBACK_GRAPH = (FALLBACK.tuned_op_us, FALLBACK.tuned_call_us, dict(FALLBACK.arithmetic))
_NO_GRAPHS = "; graph figures from the fallback table (this ONNX Runtime has no CUDA execution provider)"


class _Probe:
    """Times calls on one device: each call is followed by a synchronisation (none on the CPU), and ONNX
    Runtime's graphs run on the provider aitune's backend uses there."""

    def __init__(self, device: torch.device, onnxruntime: Any) -> None:
        self.device, self.onnxruntime, self.name = device, onnxruntime, device_id(device)

    def runs_graphs(self) -> bool:
        """Whether ONNX Runtime runs graphs on this device here (on CUDA: its CUDA execution provider)."""
        return self.device.type != "cuda" or "CUDAExecutionProvider" in self.onnxruntime.get_available_providers()

    def tensor(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=self.device)

    def timed(self, call: Callable[[], object]) -> Callable[[], object]:
        """``call`` followed by a synchronisation: its clock covers the device work it queued."""

        def run() -> object:
            result = call()
            synchronize(self.device)
            return result

        return run

    def median_us(self, call: Callable[[], object]) -> float:
        return _median_us(self.timed(call))

    def speedup(self, eager: Callable[[], object], tuned: Callable[[], object]) -> float:
        """Median eager µs ÷ median tuned µs over `REPEATS` interleaved pairs of calls: drift hits both."""
        eager_us, tuned_us = _interleaved(self.timed(eager), self.timed(tuned))
        return eager_us / tuned_us

    def eager_op_us(self) -> float:
        dispatch = DispatchProbe(self.device)
        return _median_us(dispatch.chain) / (4 * dispatch.BLOCKS)

    def graph_call_us(self, model: Any) -> float:
        """Median µs of one call of ``model`` on a 1 × `TINY` input, as aitune's backend makes it."""
        return self.median_us(self.graph_call(model, self.tensor(1, TINY)))

    def graph_call(self, model: Any, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        """One call of ``model`` on ``x`` as aitune's backend makes it: torch in, numpy through ORT, torch
        out, back on the device."""
        session = _session(self.onnxruntime, model, self.device)
        name = session.get_inputs()[0].name
        return lambda: torch.from_numpy(session.run(None, {name: x.cpu().numpy()})[0]).to(self.device)

    def wrapper_us(self) -> float:
        """What aitune's wrapper adds to each call of a tuned module (inputs matched to a graph, outputs
        rebuilt): a tiny module wrapped and tuned with the eager backend, against the module alone."""
        from aitune.torch.backends import EagerBackend
        from aitune.torch.tuning.api import record, tune_recorded
        from aitune.torch.tuning.paths import unwrap, wrap
        from aitune.torch.tuning.strategies import OneBackendStrategy

        holder, x = nn.Sequential(nn.Linear(TINY, TINY)).eval().to(self.device), self.tensor(1, TINY)
        plain = self.median_us(lambda: holder(x))
        wrappers = list(wrap(holder, ["0"]).values())
        try:
            record(holder, [x, x], wrappers)
            tune_recorded(wrappers, strategy=OneBackendStrategy(EagerBackend()))
            return max(0.0, self.median_us(lambda: holder(x)) - plain)
        finally:
            unwrap(holder, ["0"])

    def dynamo_call_us(self) -> float:
        """Host µs dynamo adds to a call of `_DecodeStep` with a fresh cache: the step compiled with a
        backend that keeps dynamo's graph as it is, against that graph alone on the same inputs; 0 where
        torch.compile cannot run here (the gain model then uses its fallback figure)."""
        graphs: list[tuple[Callable[..., Any], list[Any]]] = []

        def keep(graph: Any, inputs: list[Any]) -> Callable[..., Any]:
            graphs.append((graph, inputs))
            return graph.forward

        step, x = _DecodeStep().eval().to(self.device), self.tensor(1, 1, TINY)
        keys, values = ([self.tensor(1, 2, TINY) for _ in range(STATEFUL_LAYERS)] for _ in range(2))
        try:
            compiled = torch.compile(step, backend=keep, dynamic=False, fullgraph=True)
            compiled(x, _Cache(keys, values))
        except Exception:  # no dynamo on this Python or platform: nothing to measure
            return 0.0
        graph, inputs = graphs[0]
        dynamo, alone = _interleaved(
            self.timed(lambda: compiled(x, _Cache(keys, values))),
            self.timed(lambda: (_Cache(keys, values), graph(*inputs))),
        )
        return max(0.0, dynamo - alone)


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


def _session(onnxruntime: Any, model: Any, device: torch.device) -> Any:
    """A session as aitune's ONNX Runtime backend opens one for a module on ``device``."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device.type == "cuda" else ["CPUExecutionProvider"]
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=providers)


def _graph(name: str, nodes: list[Any], x: torch.Tensor, weights: dict[str, torch.Tensor] | None = None) -> Any:
    """An ONNX model of ``nodes`` from the input ``x`` to the output ``y``, ``weights`` as initialisers."""
    from onnx import TensorProto, helper, numpy_helper

    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        name,
        [value("x", TensorProto.FLOAT, list(x.shape))],
        [value("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(tensor.cpu().numpy(), key) for key, tensor in (weights or {}).items()],
    )
    return hand_built_model(graph, 17)


def _matmul(probe: _Probe) -> float:
    from onnx import helper

    x, w = probe.tensor(128, 256), probe.tensor(256, 256)
    tuned = probe.graph_call(_graph("matmul", [helper.make_node("MatMul", ["x", "w"], ["y"])], x, {"w": w}), x)
    return probe.speedup(lambda: torch.mm(x, w), tuned)


def _conv(probe: _Probe) -> float:
    """A convolution as models hold one, in a residual block (conv → batch norm → ReLU → conv → batch
    norm, plus the input, → ReLU: a ResNet's basic block; a UNet's resnet blocks have the same shape):
    ONNX Runtime folds each normalisation into its convolution's weights, fuses the activations and the
    sum, and keeps its blocked layout from one convolution to the next; eager runs seven operators."""
    from onnx import helper

    x = probe.tensor(1, 16, 32, 32)
    weights = {"w1": probe.tensor(16, 16, 3, 3), "w2": probe.tensor(16, 16, 3, 3)}
    norm = {
        "scale": probe.tensor(16).abs() + 0.5,
        "shift": probe.tensor(16),
        "mean": probe.tensor(16),
        "variance": probe.tensor(16).abs() + 0.5,
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
    tuned = probe.graph_call(_graph("basic_block", nodes, x, {**weights, **norm}), x)
    functional = torch.nn.functional

    def normalised(h: torch.Tensor) -> torch.Tensor:
        return functional.batch_norm(h, norm["mean"], norm["variance"], norm["scale"], norm["shift"])

    def eager() -> None:
        h = torch.relu(normalised(functional.conv2d(x, weights["w1"], padding=1)))
        torch.relu(normalised(functional.conv2d(h, weights["w2"], padding=1)) + x)

    return probe.speedup(eager, tuned)


def _elementwise(probe: _Probe) -> float:
    from onnx import helper

    x = probe.tensor(64, 1024)
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["a"]),
        helper.make_node("Add", ["a", "x"], ["b"]),
        helper.make_node("Sigmoid", ["b"], ["c"]),
        helper.make_node("Mul", ["c", "b"], ["y"]),
    ]
    tuned = probe.graph_call(_graph("silu", nodes, x), x)

    def eager() -> None:
        b = x * x + x
        torch.sigmoid(b) * b

    return probe.speedup(eager, tuned)


def _recurrent(probe: _Probe) -> float:
    """A GRU layer over a short sequence, as the layer a translator or a speech model holds: eager runs one
    operator that dispatches each gate of each time step; ONNX Runtime's GRU runs the loop in one kernel."""
    from onnx import helper

    steps, features = 8, RECURRENT_FEATURES
    layer = nn.GRU(features, features).eval().to(probe.device)  # (time, batch, features), as ONNX's GRU takes it
    x = probe.tensor(steps, 1, features)
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
    tuned = probe.graph_call(_graph("gru", [node], x, weights), x)
    return probe.speedup(lambda: layer(x), tuned)


_ARITHMETIC: dict[str, Callable[[_Probe], float]] = {
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
