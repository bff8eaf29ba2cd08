"""Entry-mode capture (``aitune-profile capture app.py:infer``): profile one function of a user's file or module.

The file is imported without running its ``__main__`` block. The discovery root is one named
global, or by default every ``nn.Module`` and pipeline-like object among the module's globals.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from torch import nn

from aitune.errors import AituneError, CaptureError, UserCodeError
from aitune.report.document import FULL_MODE, LITE_MODE
from aitune.torch.performance.profile import PerformanceProfile, profile
from aitune.torch.performance.usercode import importable_from, is_file_source, load_module, user_code_error


@dataclass(frozen=True)
class EntryPoint:
    """What ``app.py:infer`` names once the file is loaded: the function, the discovery root and the input."""

    source: str
    function_name: str
    function: Callable[..., Any]
    root: Any
    root_name: str | None  # the global the root is, when one is (profiles record the root their paths start from)
    input_data: Any = None
    eval_inputs: tuple[Any, ...] = ()  # more inputs, each in the form of input_data, for the task gate to judge

    def user_error(self, error: CaptureError) -> AituneError:
        """``error`` as the user's own failure when the workload raised it (its traceback kept), else as it is."""
        cause = error.__cause__
        if cause is None or isinstance(cause, (AituneError, OSError)):
            return error
        failure = user_code_error(f"{self.source}:{self.function_name} raised {type(cause).__name__}", cause)
        needed = _required_parameters(self.function)
        if self.input_data is None and isinstance(cause, TypeError) and needed:
            hint = f"; it takes {', '.join(needed)}: name the global holding its input with --input"
            return UserCodeError(f"{failure}{hint}", failure.details)
        return failure


@contextmanager
def loaded_entry(
    source: str,
    function_name: str,
    *,
    obj: str | None = None,
    input_name: str | None = None,
    eval_inputs_name: str | None = None,
) -> Iterator[EntryPoint]:
    """Load ``source`` (its folder importable for the block) and name its function, root, input and the
    global holding a list of further inputs (``eval_inputs_name``), when one is named."""
    folder = Path(source).parent if is_file_source(source) else Path.cwd()
    try:
        with importable_from(folder):
            yield from _entry_point(source, function_name, obj, input_name, eval_inputs_name)
    except SystemExit as exit_request:  # a BaseException: it would end the command silently with its status
        raise UserCodeError(
            f"{source}:{function_name} called sys.exit({exit_request.code!r}); an entry function must return, not exit."
        ) from None


def _entry_point(
    source: str, function_name: str, obj: str | None, input_name: str | None, eval_inputs_name: str | None
) -> Iterator[EntryPoint]:
    module = load_module(source)
    function = module_global(module, source, function_name, "function")
    if not callable(function):
        raise CaptureError(
            f"{source}: {function_name!r} is a {type(function).__name__}, not a function; name a callable."
        )
    if obj is not None:
        root, root_name = module_global(module, source, obj, "object"), obj
    else:
        root, root_name = discovery_root(module)
    input_data = module_global(module, source, input_name, "input") if input_name is not None else None
    eval_inputs = _input_list(module, source, eval_inputs_name) if eval_inputs_name is not None else ()
    yield EntryPoint(source, function_name, function, root, root_name, input_data, eval_inputs)


def _input_list(module: ModuleType, source: str, name: str) -> tuple[Any, ...]:
    """The global ``name``: a non-empty list (or tuple) of inputs; `CaptureError` saying what it holds otherwise."""
    value = module_global(module, source, name, "list of evaluation inputs")
    if not isinstance(value, list | tuple) or not value:
        held = "an empty list" if isinstance(value, list | tuple) else f"a {type(value).__name__}"
        raise CaptureError(
            f"{source}: --eval-inputs {name} holds {held}; it must be a non-empty list of inputs, each in the form"
            " --input takes."
        )
    return tuple(value)


def capture_entry(
    source: str,
    function_name: str,
    *,
    obj: str | None = None,
    input_name: str | None = None,
    warmup_runs: int = 3,
    measured_runs: int = 10,
    trace_file: Path | None = None,
    on_call: Callable[[], None] | None = None,
    on_warmed_up: Callable[[int], None] | None = None,
    lite: bool = False,
    operator_runs: int | str | None = None,
) -> PerformanceProfile:
    """Load ``source``, then profile ``source.function_name(input)``; ``on_call`` runs after every call,
    ``on_warmed_up`` with the number of calls the capture makes, once the warmups are done and whenever it grows
    (see `profile`).

    ``lite`` profiles with ``mode="lite"`` (no profiler), ``operator_runs`` is `profile`'s."""
    with loaded_entry(source, function_name, obj=obj, input_name=input_name) as entry:
        function = counted(entry.function, on_call)
        try:
            return profile(
                entry.root,
                entry.input_data,
                function,
                warmup_runs,
                measured_runs,
                trace_file,
                obj_name=entry.root_name,
                mode=LITE_MODE if lite else FULL_MODE,
                operator_runs=operator_runs,
                on_warmed_up=on_warmed_up,
            )
        except CaptureError as error:
            raise entry.user_error(error) from error.__cause__


def module_global(module: ModuleType, source: str, name: str, role: str) -> Any:
    """The global ``name`` of the loaded module; `CaptureError` naming the file and the candidates it has."""
    if name in vars(module):
        return vars(module)[name]
    fits = inspect.isfunction if role == "function" else _is_plain_value
    candidates = sorted(key for key, value in vars(module).items() if not key.startswith("_") and fits(value))
    hint = f" (it defines: {', '.join(candidates[:12])}{', …' if len(candidates) > 12 else ''})" if candidates else ""
    raise CaptureError(f"{source} has no global named {name!r} to use as the {role}{hint}.")


def discovery_root(module: ModuleType) -> tuple[Any, str | None]:
    """The one ``nn.Module`` or pipeline-like global and its name, or a namespace of all of them and None.

    A pipeline-like object is a plain instance holding ``nn.Module`` attributes; with several
    roots, a pipeline's modules keep its name as prefix (``pipe.unet``), so the paths already start
    from the module's globals and there is no root name to record.
    """
    roots = {name: value for name, value in vars(module).items() if not name.startswith("_") and _is_root(value)}
    if len(roots) == 1:
        return next(iter(roots.values())), next(iter(roots))
    namespace = SimpleNamespace()
    for name, value in roots.items():
        if isinstance(value, nn.Module):
            setattr(namespace, name, value)
            continue
        for attribute, child in vars(value).items():
            if isinstance(child, nn.Module) and not attribute.startswith("_"):
                setattr(namespace, f"{name}.{attribute}", child)
    return namespace, None


def _required_parameters(function: Callable[..., Any]) -> list[str]:
    """Names of the parameters ``function`` cannot be called without; [] when it has none or cannot be inspected."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in parameters if p.kind in kinds and p.default is inspect.Parameter.empty]


def _is_root(value: Any) -> bool:
    if isinstance(value, nn.Module):
        return True
    if inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, ModuleType):
        return False
    attributes = getattr(value, "__dict__", None)
    return isinstance(attributes, dict) and any(isinstance(child, nn.Module) for child in attributes.values())


def _is_plain_value(value: Any) -> bool:
    if inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, ModuleType):
        return False
    return type(value).__module__ != "__future__"  # `from __future__ import annotations` leaves a global


def counted(function: Callable[..., Any], on_call: Callable[[], None] | None) -> Callable[..., Any]:
    """``function``, calling ``on_call`` after each call (a progress bar's tick); itself when there is none."""
    if on_call is None:
        return function

    def call(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        on_call()
        return result

    return call
