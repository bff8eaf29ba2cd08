"""Instrumentation for one capture: forward and entry-method wrappers that open region spans, and
the input-shape recorder installed for the profiler warmup run only.

A region's forward is wrapped on the instance (``module.forward = wrapper``), not hooked: any
forward hook sends ``nn.Module.__call__`` down its slow path, about 3 µs a call before the hook
does anything, against about 0.3 µs for a wrapper (``benchmarks/overhead.py --spans``). The user's
own forward hooks therefore run outside the region's span, in its parent's time.

A span is a ``record_function`` span for the profiler (full captures), or a pair of
``time.perf_counter_ns`` stamps kept in a list (lite captures, no profiler): the same wrappers
and depth counters serve both.

Everything installed is undone on exit, also when the workload raised: method overrides restored
(or deleted when the class defined the method), shape hooks removed, open spans closed. No state
is stored on the user's modules; the per-module depth counters live in the installer.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

try:  # ~0.4 µs a span against ~9 µs for record_function (measured with the profiler off, torch 2.13)
    from torch._C._profiler import _RecordFunctionFast as _open_span
except ImportError:  # an older or newer torch without it: the public, slower equivalent
    from torch.autograd.profiler import record_function as _open_span

from aitune.errors import CaptureError
from aitune.markers import region_span_name
from aitune.torch.performance.inputs import input_summary
from aitune.torch.performance.regions import RegionTarget

Undo = Callable[[], None]
_clock = time.perf_counter_ns
_thread = threading.get_ident


StampedSpan = tuple[str, int, int, int]
"""One region entry timed by the lite capture's clock: (span name, ``perf_counter_ns`` at entry and
at exit, thread ident); a plain tuple, as a named one costs a Python-level constructor per span."""


class _RegionState:
    """The open span of one module entry point (its forward, or its methods) and how deep it is nested.

    A depth counter, not a flag: ``forward`` may call itself, and ``generate()`` may call
    ``prepare_inputs_for_generation()``; only the outermost entry opens a span, the inner ones are
    its own time.
    """

    __slots__ = ("depth", "span")

    def __init__(self) -> None:
        self.depth = 0
        self.span: Any = None

    def enter(self, name: str) -> None:
        if self.depth == 0:
            self.span = self._open(name)
        self.depth += 1

    def leave(self) -> None:
        if self.depth == 0:  # a leave whose enter never ran (an earlier wrapper raised)
            return
        self.depth -= 1
        if self.depth == 0:
            self.close()

    def close(self) -> None:
        span, self.span, self.depth = self.span, None, 0
        if span is not None:
            self._close(span)

    def _open(self, name: str) -> Any:
        span = _open_span(name)
        span.__enter__()
        return span

    def _close(self, span: Any) -> None:
        span.__exit__(None, None, None)


class _StampedState(_RegionState):
    """A region state whose spans are clock stamps appended to ``stamps`` (the lite capture)."""

    __slots__ = ("stamps",)

    def __init__(self, stamps: list[StampedSpan]) -> None:
        super().__init__()
        self.stamps = stamps

    def _open(self, name: str) -> Any:
        return name, _clock()

    def _close(self, span: Any) -> None:
        self.stamps.append((span[0], span[1], _clock(), _thread()))


class Instrumented:
    """Context manager that instruments ``targets`` on enter and restores every module on exit.

    With ``stamps`` (a list), spans are clock stamps appended to it instead of profiler spans.
    """

    def __init__(self, targets: Sequence[RegionTarget], stamps: list[StampedSpan] | None = None) -> None:
        self.targets = list(targets)
        self._undo: list[Undo] = []
        self._states: list[_RegionState] = []
        self._state = _RegionState if stamps is None else functools.partial(_StampedState, stamps)

    def __enter__(self) -> Instrumented:
        try:
            for target in self.targets:
                forward, methods = self._state(), self._state()
                self._states += [forward, methods]
                if target.hook_forward:
                    name = region_span_name(target.region)
                    self._undo.append(_override_method(target.module, "forward", _spanning(name, forward)))
                for method in target.methods:
                    name = region_span_name(target.method_region(method))
                    self._undo.append(_wrap_method(target.module, method, name, methods, forward))
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        _restore_all(self._undo, [state.close for state in self._states])
        self._states.clear()


EXAMPLE_SHAPES = 3
"""Shape signatures kept as examples per region; the count of distinct ones is always complete."""


class InputShapes:
    """Context manager recording the distinct tensor-shape signatures each region's calls receive.

    A signature is the (path, shape, dtype) of every tensor among a call's positional and keyword
    arguments (nested lists, tuples and dicts included). Installed around the profiler warmup run
    only, which is discarded, so the measured runs pay nothing for it.
    """

    def __init__(self, targets: Sequence[RegionTarget]) -> None:
        self.targets = list(targets)
        self._seen: dict[str, dict[tuple[Any, ...], dict[str, list[int]]]] = {}
        self._undo: list[Undo] = []

    def __enter__(self) -> InputShapes:
        try:
            for target in self.targets:
                if target.hook_forward:
                    self._undo.append(_install_shape_hook(target.module, self._recorder(target.region)))
                for method in target.methods:
                    record = self._recorder(target.method_region(method))
                    self._undo.append(_override_method(target.module, method, _recording(record)))
        except BaseException:
            _restore_all(self._undo)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        _restore_all(self._undo)

    def by_region(self) -> dict[str, dict[str, Any]]:
        """Per region that was called: ``{"distinct": n, "examples": [{argument path: shape}, ...]}``."""
        return {
            region: {"distinct": len(seen), "examples": list(seen.values())[:EXAMPLE_SHAPES]}
            for region, seen in self._seen.items()
        }

    def _recorder(self, region: str) -> Callable[[tuple[Any, ...], dict[str, Any]], None]:
        seen = self._seen.setdefault(region, {})

        def record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            tensors = input_summary(args, kwargs)["signature"]
            key = tuple((t["path"], tuple(t["shape"]), t["dtype"]) for t in tensors)
            if key not in seen:
                seen[key] = {t["path"]: t["shape"] for t in tensors}

        return record


def _restore_all(undo: list[Undo], first: Sequence[Undo] = ()) -> None:
    """Run ``first``, then every undo (newest first), even when some fail; the failures are raised together."""
    failures: list[BaseException] = []
    for action in [*first, *reversed(undo)]:
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
    span_name: str, state: _RegionState, inside: _RegionState | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a callable so each outermost call is one span (closed also when it raises), unless the
    ``inside`` state (the module's forward, for its methods) is open: then it is that span's time."""

    def spanning(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if inside is not None and inside.depth:
                return original(*args, **kwargs)
            state.enter(span_name)
            try:
                return original(*args, **kwargs)
            finally:
                state.leave()

        return wrapper

    return spanning


def _install_shape_hook(module: nn.Module, record: Callable[[tuple[Any, ...], dict[str, Any]], None]) -> Undo:
    def pre_hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        record(args, kwargs)

    return module.register_forward_pre_hook(pre_hook, with_kwargs=True).remove


def _wrap_method(module: nn.Module, method: str, span_name: str, state: _RegionState, forward: _RegionState) -> Undo:
    """Wrap ``module.method`` so it opens a span, unless the module's own forward is running.

    Methods and forward count apart on purpose: ``vae.decode()`` calling ``self()`` opens the
    ``vae`` region inside ``vae.decode``, so ``vae`` is the same region whichever entry point
    reaches it (script mode, which sees forwards only, names it so too). A method the forward calls
    itself (a UNet's ``get_time_embed``) is part of the forward's time.
    """
    return _override_method(module, method, _spanning(span_name, state, inside=forward))


def _recording(record: Callable[[tuple[Any, ...], dict[str, Any]], None]) -> Callable[..., Any]:
    def recording(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record(args, kwargs)
            return original(*args, **kwargs)

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
