"""Instrumentation for one capture: forward and entry-method wrappers that open region spans, and
the input-shape recorder installed for the profiler warmup run only.

A region's forward is wrapped on the instance (``module.forward = wrapper``), not hooked: any
forward hook sends ``nn.Module.__call__`` down its slow path, about 3 µs a call before the hook
does anything, against about 0.3 µs for a wrapper (``benchmarks/overhead.py --spans``). The user's
own forward hooks therefore run outside the region's span, in its parent's time.

A span is a ``record_function`` span for the profiler (full captures), or a pair of
``time.perf_counter_ns`` stamps kept in a list (runs timed without the profiler: a lite capture's,
and the measured runs of a full capture that traces operators in runs of their own): the same
wrappers and entry flags serve both.

Threads: only the thread that installed the wrappers (the capturing thread, which runs the
workload) opens spans. A call on any other thread (a background thread using the same modules, a
worker pool the workload hands calls to) runs the original untimed and is counted per thread
(`OffThreadCalls`), so it can neither open, close nor skip the capturing thread's spans. A span
is held by the call that opened it, never in shared state.

Everything installed is undone on exit, also when the workload raised or other threads are still
calling the modules: method overrides restored (or deleted when the class defined the method),
shape hooks removed; a call already inside a wrapper finishes there and closes its own span. No
state is stored on the user's modules; the entry flags live in the wrappers.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

try:  # ~0.4 µs a span against ~9 µs for record_function (measured with the profiler off, torch 2.13)
    from torch._C._profiler import _RecordFunctionFast as _open_span
except ImportError:  # an older or newer torch without it: the public, slower equivalent
    from torch.autograd.profiler import record_function as _open_span

from aitune.analysis.stamps import StampedSpan  # a plain tuple: a named one costs a constructor per span
from aitune.errors import CaptureError
from aitune.markers import region_span_name
from aitune.torch.performance.inputs import carries_state, input_summary, sequence_length
from aitune.torch.performance.regions import RegionTarget

Undo = Callable[[], None]
_clock = time.perf_counter_ns
_thread = threading.get_ident


class _EntryPoint:
    """Whether one module entry point (its forward, or its methods) has a span open on the capturing thread.

    A flag set by the outermost entry only: ``forward`` may call itself, and ``generate()`` may call
    ``prepare_inputs_for_generation()``; the inner calls see it set and run as the outer span's own
    time. Only the capturing thread reads or sets it, so other threads cannot open, close or skip
    the capturing thread's spans.
    """

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = False


_NEVER_OPEN = _EntryPoint()
"""The ``inside`` of a forward wrapper: a forward opens its span even inside its module's method (``decode()``
calling ``self()``)."""


class _ProfilerSpans:
    """Region spans as ``record_function`` spans, for a profiler session (full captures)."""

    @staticmethod
    def open(name: str) -> Any:
        span = _open_span(name)
        span.__enter__()
        return span

    @staticmethod
    def close(name: str, span: Any) -> None:
        span.__exit__(None, None, None)


class _StampedSpans:
    """Region spans as clock stamps appended to ``stamps`` (lite captures), all on ``thread``."""

    __slots__ = ("stamps", "thread")

    def __init__(self, stamps: list[StampedSpan], thread: int) -> None:
        self.stamps = stamps
        self.thread = thread

    def open(self, name: str) -> int:
        return _clock()

    def close(self, name: str, start: int) -> None:
        self.stamps.append((name, start, _clock(), self.thread))


class OffThreadCalls:
    """Calls of instrumented modules on threads other than the capturing one, counted per thread ident.

    Such calls run untimed: torch.profiler records only the thread that started it (a span opened
    on another thread is not in its trace), so a lite capture does the same for one meaning across
    modes; and a worker's span inside a run would overlap the capturing thread's time, which the
    run's regions and residual already split.
    """

    def __init__(self) -> None:
        self._by_thread: dict[int, int] = {}

    def add(self, thread: int) -> None:
        # Each thread writes only its own key, so this read-then-write cannot lose another thread's count.
        self._by_thread[thread] = self._by_thread.get(thread, 0) + 1

    def snapshot(self) -> dict[int, int]:
        """The counts so far, to pass to `since` later."""
        return dict(self._by_thread)

    def since(self, snapshot: dict[int, int]) -> tuple[int, int]:
        """(calls, threads) made after ``snapshot`` was taken."""
        added = [count - snapshot.get(thread, 0) for thread, count in self.snapshot().items()]
        return sum(added), sum(1 for count in added if count)


class Instrumented:
    """Context manager that instruments ``targets`` on enter and restores every module on exit.

    The thread that enters it is the capturing thread: only its calls open spans; calls on other
    threads run untimed and are counted in ``off_thread``. With ``stamps`` (a list), spans are clock
    stamps appended to it instead of profiler spans.
    """

    def __init__(self, targets: Sequence[RegionTarget], stamps: list[StampedSpan] | None = None) -> None:
        self.targets = list(targets)
        self.off_thread = OffThreadCalls()
        self._stamps = stamps
        self._undo: list[Undo] = []

    def __enter__(self) -> Instrumented:
        thread = _thread()
        spans = _ProfilerSpans() if self._stamps is None else _StampedSpans(self._stamps, thread)
        spanning = functools.partial(_spanning, spans=spans, thread=thread, off_thread=self.off_thread)
        with _undone_on_failure(self._undo):
            for target in self.targets:
                forward, methods = _EntryPoint(), _EntryPoint()
                if target.hook_forward:
                    name = region_span_name(target.region)
                    self._undo.append(_override_method(target.module, "forward", spanning(name, forward)))
                # Methods and forward count apart on purpose: ``vae.decode()`` calling ``self()`` opens the
                # ``vae`` region inside ``vae.decode``, so ``vae`` is the same region whichever entry point
                # reaches it (script mode, which sees forwards only, names it so too). A method the forward
                # calls itself (a UNet's ``get_time_embed``) is part of the forward's time.
                for method in target.methods:
                    name = region_span_name(target.method_region(method))
                    wrap = spanning(name, methods, inside=forward)
                    self._undo.append(_override_method(target.module, method, wrap))
        return self

    def __exit__(self, *exc: object) -> None:
        _restore_all(self._undo)


EXAMPLE_SHAPES = 3
"""Shape signatures kept as examples per region; the count of distinct ones is always complete."""

MAX_CALL_LENGTHS = 4096
"""Calls whose token count (`sequence_length`) is kept per top-level region: a generate of 4,095
new tokens; a region called more often keeps the first ones, and phases fall back on call order."""


class InputShapes:
    """Context manager recording the distinct tensor-shape signatures each region's calls receive.

    A signature is the (path, shape, dtype) of every tensor among a call's positional and keyword
    arguments (nested lists, tuples and dicts included). Installed around the profiler warmup run
    only, which is discarded, so the measured runs pay nothing for it. Like the spans, only calls on
    the thread that entered it are recorded. For top-level regions (and their entry methods) it also
    keeps the tokens each call took, in call order (`call_lengths`): the evidence that splits a
    generate into its prefill and decode phases (`aitune.analysis.phases`). And it notes the regions
    whose calls take or return an object with state (`carries_state`: a key-value cache), checked on
    the same calls, the output by a forward hook beside the pre-hook (`stateful`). Two more facts the
    gain model reads: what a tuned wrapper would pay per call to take this call's arguments apart and
    put its output back together (`structure_us`, timed on the first calls), and which regions a root
    module's entry method ran outside the root's forward (`outside_root`: a generate's encoder, which
    tuning the whole model leaves eager).
    """

    def __init__(self, targets: Sequence[RegionTarget]) -> None:
        self.targets = list(targets)
        self._seen: dict[str, dict[tuple[Any, ...], dict[str, list[int]]]] = {}
        self._lengths: dict[str, list[int | None]] = {}
        self._stateful: set[str] = set()
        self._taken_apart: dict[str, list[float]] = {}  # µs per call, arguments
        self._put_together: dict[str, list[float]] = {}  # µs per call, output
        self._outside_root: set[str] = set()
        self._inside_root: set[str] = set()
        self._root_depth: int | None = None  # None: no root module is watched
        self._undo: list[Undo] = []
        self._thread: int | None = None

    def __enter__(self) -> InputShapes:
        self._thread = _thread()
        with _undone_on_failure(self._undo):
            for target in self.targets:
                top = target.parent is None
                if target.hook_forward:
                    record, returned = self._recorder(target.region, top), self._output_recorder(target.region)
                    self._undo += _install_shape_hooks(target.module, record, returned)
                elif target.path == "" and target.methods:
                    self._undo += self._watch_root(target.module)
                for method in target.methods:
                    region = target.method_region(method)
                    record = self._recorder(region, top, beside_root=bool(target.path))
                    wrap = _recording(record, self._output_recorder(region))
                    self._undo.append(_override_method(target.module, method, wrap))
        return self

    def __exit__(self, *exc: object) -> None:
        _restore_all(self._undo)

    def by_region(self) -> dict[str, dict[str, Any]]:
        """Per region that was called: ``{"distinct": n, "examples": [{argument path: shape}, ...]}``."""
        return {
            region: {"distinct": len(seen), "examples": list(seen.values())[:EXAMPLE_SHAPES]}
            for region, seen in self._seen.items()
        }

    def stateful(self) -> set[str]:
        """The regions some call of which took or returned an object with state (`carries_state`)."""
        return set(self._stateful)

    def structure_us(self) -> dict[str, float]:
        """Per region: the µs of taking a call's arguments apart and putting its output back together
        (`call_structure_us`), the least over its first `STRUCTURE_CALLS` calls (a tuned call pays it
        warm, every call; a preempted sample says nothing about that)."""
        rebuilt = self._put_together
        return {
            region: min(times) + min(rebuilt.get(region) or [0.0])
            for region, times in self._taken_apart.items()
            if times
        }

    def outside_root(self) -> set[str]:
        """The regions whose every call ran outside the root module's forward (none when the root is no
        module with entry methods): tuning the root whole leaves them as they are."""
        return self._outside_root - self._inside_root

    def call_lengths(self) -> dict[str, list[int | None]]:
        """Per top-level region called more than once with a token argument: the tokens of each call in order
        (None: that call had none). A region called once is no step of a loop, so it is left out."""
        return {
            region: list(lengths)
            for region, lengths in self._lengths.items()
            if len(lengths) > 1 and any(length is not None for length in lengths)
        }

    def _recorder(
        self, region: str, top_level: bool = False, beside_root: bool = True
    ) -> Callable[[tuple[Any, ...], dict[str, Any]], None]:
        """What each call of ``region`` records; ``beside_root`` False for the root's own entry methods,
        which run outside its forward by definition."""
        seen = self._seen.setdefault(region, {})
        lengths = self._lengths.setdefault(region, []) if top_level else None

        def record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if _thread() != self._thread:
                return
            if lengths is not None and len(lengths) < MAX_CALL_LENGTHS:
                lengths.append(sequence_length(args, kwargs))
            if beside_root and self._root_depth is not None:
                (self._inside_root if self._root_depth else self._outside_root).add(region)
            times = self._taken_apart.setdefault(region, [])
            if len(times) < STRUCTURE_CALLS and (cost := _structure_us((args, kwargs))) is not None:
                times.append(cost)
            tensors = input_summary(args, kwargs)["signature"]
            key = tuple((t["path"], tuple(t["shape"]), t["dtype"]) for t in tensors)
            if key not in seen:
                seen[key] = {t["path"]: t["shape"] for t in tensors}
            if region not in self._stateful and carries_state((args, kwargs)):
                self._stateful.add(region)

        return record

    def _output_recorder(self, region: str) -> Callable[[Any], None]:
        def returned(output: Any) -> None:
            if _thread() != self._thread:
                return
            if region not in self._stateful and carries_state(output):
                self._stateful.add(region)
            times = self._put_together.setdefault(region, [])
            if len(times) < STRUCTURE_CALLS:
                cost = 0.0 if isinstance(output, torch.Tensor) else _structure_us(output, rebuild=True)
                times.extend(() if cost is None else (cost,))

        return returned

    def _watch_root(self, root: nn.Module) -> list[Undo]:
        """Hooks that count how deep the calls are inside ``root``'s forward (`outside_root`)."""
        self._root_depth = 0

        def enter(_module: nn.Module, _args: tuple[Any, ...]) -> None:
            if _thread() == self._thread:
                self._root_depth = (self._root_depth or 0) + 1

        def leave(_module: nn.Module, _args: tuple[Any, ...], _output: Any) -> None:
            if _thread() == self._thread:
                self._root_depth = max(0, (self._root_depth or 0) - 1)

        return [
            root.register_forward_pre_hook(enter).remove,
            root.register_forward_hook(leave, always_call=True).remove,
        ]


STRUCTURE_CALLS = 3
"""Calls per region whose argument and output structure is timed (`InputShapes.structure_us`)."""
STRUCTURE_REPEATS = 3
"""Times each of those calls' structure is taken apart (and built again), the least kept."""


def _structure_us(value: Any, rebuild: bool = False) -> float | None:
    """µs to flatten ``value`` into its leaves (and, with ``rebuild``, to build it again from them), as a
    tuned wrapper does with every call's arguments and output: a Hugging Face ``ModelOutput`` costs tens.
    The least of `STRUCTURE_REPEATS`: the first time a type is flattened costs several times a warm one.
    None when the value cannot be taken apart and rebuilt (a user's pytree node that refuses): the
    capture goes on, and the region's figure is left out."""
    best = math.inf
    for _ in range(STRUCTURE_REPEATS):
        start = time.perf_counter_ns()
        try:
            leaves, spec = pytree.tree_flatten(value)
            if rebuild:
                pytree.tree_unflatten(leaves, spec)
        except Exception:  # whatever a user's node raises is its own: never the capture's failure
            return None
        best = min(best, (time.perf_counter_ns() - start) / 1000)
    return best


@contextlib.contextmanager
def _undone_on_failure(undo: list[Undo]) -> Iterator[None]:
    """Around installing: when one install fails, undo the ones made before it (`_restore_all`) and re-raise."""
    try:
        yield
    except BaseException:
        _restore_all(undo)
        raise


def _restore_all(undo: list[Undo]) -> None:
    """Run every undo (newest first), even when some fail; the failures are raised together."""
    failures: list[BaseException] = []
    for action in reversed(undo):
        _collect(action, failures)
    undo.clear()
    if failures:
        details = "; ".join(f"{type(error).__name__}: {error}" for error in failures)
        message = f"restoring {len(failures)} instrumented module part(s) failed: {details}"
        raise CaptureError(message) from failures[0]


def _collect(action: Undo, failures: list[BaseException]) -> None:
    try:
        action()
    except Exception as error:  # cleanup must go on; every failure is reported
        failures.append(error)


def _spanning(
    span_name: str,
    entry: _EntryPoint,
    inside: _EntryPoint = _NEVER_OPEN,
    *,
    spans: _ProfilerSpans | _StampedSpans,
    thread: int,
    off_thread: OffThreadCalls,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a callable so each outermost call on ``thread`` is one span (closed also when it raises),
    unless ``inside`` (the module's forward, for its methods) is open: then it is that span's time.
    A call on another thread runs the callable untimed and is counted in ``off_thread``."""
    open_span, close_span, count_off_thread = spans.open, spans.close, off_thread.add

    def spanning(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = _thread()
            if caller != thread:
                count_off_thread(caller)
                return original(*args, **kwargs)
            if entry.open or inside.open:
                return original(*args, **kwargs)
            # The span lives in this frame, never in shared state: the call that opened it closes it.
            span = open_span(span_name)
            entry.open = True
            try:
                return original(*args, **kwargs)
            finally:
                entry.open = False
                close_span(span_name, span)

        return wrapper

    return spanning


def _install_shape_hooks(
    module: nn.Module, record: Callable[[tuple[Any, ...], dict[str, Any]], None], returned: Callable[[Any], None]
) -> list[Undo]:
    """Hooks on ``module``'s forward: ``record`` its arguments before each call, ``returned`` its output after."""

    def pre_hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        record(args, kwargs)

    def hook(_module: nn.Module, _args: tuple[Any, ...], output: Any) -> None:
        returned(output)

    return [
        module.register_forward_pre_hook(pre_hook, with_kwargs=True).remove,
        module.register_forward_hook(hook).remove,
    ]


def _recording(
    record: Callable[[tuple[Any, ...], dict[str, Any]], None], returned: Callable[[Any], None]
) -> Callable[..., Any]:
    def recording(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record(args, kwargs)
            output = original(*args, **kwargs)
            returned(output)
            return output

        return wrapper

    return recording


def _override_method(module: nn.Module, method: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Undo:
    """Set ``wrap(bound method)`` on the instance; the undo puts back what was there (or deletes it)."""
    had_override = method in vars(module)
    previous = vars(module).get(method)
    original = getattr(module, method)
    # functools.wraps keeps inspect.signature() of the bound method for frameworks that read it.
    setattr(module, method, functools.wraps(original)(wrap(original)))

    def undo() -> None:
        if had_override:
            setattr(module, method, previous)
        else:
            delattr(module, method)

    return undo
