"""The task gate: a reduced precision is judged on the workload's final output, not on each module's numbers.

The workload runs once with every tuned region on its original code (the reference) and once with the
reduced-precision regions tuned, each run from the same random seed (the caller's random state is put
back); the figure compares the two final outputs by the output's kind (`output_metric`):

- a tensor of integers (greedy ``generate``'s token ids): token agreement, and the first divergent position;
- logits (``.logits``, or a float tensor of 2 dimensions): top-1 agreement, the argmax of the last dimension;
- images (``.images``, PIL images, a float tensor of 4 dimensions with 1, 3 or 4 channels): PSNR in dB;
- anything else of floats (embeddings, hidden states): cosine similarity.

The workload is judged on the recorded input and on any further inputs (``--eval-inputs``); over several
inputs the figure is pooled (`aitune.compare.quality.pooled`): agreements over all their decisions, PSNR
and cosine at the worst input.

`judge_task` weighs the set of reduced regions; when the set fails and holds several, each region is
judged alone, and the ones that pass alone are judged together once more. What fails is put back.
Bounded: at most ``len(regions) + 3`` workload runs per input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from aitune.compare.quality import QualityBar, TaskJudgment, default_bar, pooled
from aitune.compare.task_metrics import COSINE, PSNR, TOKENS, TOP1
from aitune.errors import TuningError
from aitune.torch.performance.inputs import normalize_input
from aitune.torch.tuning.verify import Switch

SEED = 0
IMAGE_KEYS = ("images", "image", "pixel_values", "sample")
EMBEDDING_KEYS = ("image_embeds", "text_embeds", "embeddings", "pooler_output", "last_hidden_state")


def judge_task(
    function: Callable[..., Any],
    inputs: Sequence[Any],
    switches: Mapping[str, Switch],
    reduced: Sequence[str],
    precision: str,
    bar: QualityBar | None = None,
) -> TaskJudgment:
    """Judge the ``reduced`` regions (paths of ``switches``) on ``function(input)``'s final output for each of
    ``inputs`` (the recorded input first) and put back the ones that fail; the judgment returned is of the
    regions kept (or of the whole set, when none is)."""
    run = _runner(function, inputs, switches)
    reference = run(frozenset())
    tuned = frozenset(switches)
    judgment = _judged(reference, run(tuned), reduced, precision, bar)
    if judgment.passed or len(reduced) < 2:
        _put_back(switches, () if judgment.passed else reduced)
        return judgment
    alone = [
        path
        for path in reduced
        if _judged(reference, run(tuned - (set(reduced) - {path})), (path,), precision, bar).passed
    ]
    if alone:
        together = _judged(reference, run(tuned - (set(reduced) - set(alone))), alone, precision, bar)
        if together.passed:
            _put_back(switches, [path for path in reduced if path not in alone])
            return together
    _put_back(switches, reduced)
    return judgment


def _judged(
    references: Sequence[Any],
    candidates: Sequence[Any],
    regions: Sequence[str],
    precision: str,
    bar: QualityBar | None,
) -> TaskJudgment:
    """The verdict over every input: the metric of the first output's kind (or the bar's), pooled over the inputs."""
    metric = bar.metric if bar is not None else output_metric(references[0], candidates[0])[0]
    pairs = list(zip(references, candidates, strict=True))
    figures = [output_metric(ref, cand, metric) for ref, cand in pairs]
    problem = next((figure[3] for figure in figures if figure[3] is not None), None)
    if problem is None and not all(math.isfinite(figure[1]) for figure in figures):
        problem = "the output holds non-finite values (NaN or Inf)"
    weighed = [(figure[1], _decisions(metric, *pair)) for figure, pair in zip(figures, pairs, strict=True)]
    value = pooled(metric, weighed) if problem is None else None
    divergence = min((figure[2] for figure in figures if figure[2] is not None), default=None)
    minimum = bar.minimum if bar is not None else default_bar(metric).minimum
    return TaskJudgment(precision, metric, minimum, value, tuple(regions), len(references), divergence, problem)


def _decisions(metric: str, reference: Any, candidate: Any) -> int:
    """How many decisions an output holds, the weight of its agreement when inputs are pooled: its rows for
    top-1 agreement, its rows times the longer generation for token agreement; 1 otherwise."""
    if not isinstance(reference, torch.Tensor) or not isinstance(candidate, torch.Tensor) or reference.dim() == 0:
        return 1
    rows = reference.numel() // max(1, reference.shape[-1])
    if metric == TOP1:
        return max(1, rows)
    if metric == TOKENS and candidate.dim() > 0:
        return max(1, rows * max(reference.shape[-1], candidate.shape[-1]))
    return 1


def _put_back(switches: Mapping[str, Switch], paths: Sequence[str]) -> None:
    for path in paths:
        switches[path].put_back()


def _runner(
    function: Callable[..., Any], inputs: Sequence[Any], switches: Mapping[str, Switch]
) -> Callable[[frozenset[str]], list[Any]]:
    calls = [normalize_input(input_data) for input_data in inputs]

    def run(enabled: frozenset[str]) -> list[Any]:
        """The final output of each input, with the regions not in ``enabled`` on their original code."""
        with ExitStack() as stack, torch.no_grad():
            for path, switch in switches.items():
                if path not in enabled:
                    stack.enter_context(switch.original())
            return [
                _reference_output(function, args, kwargs, index)
                if not enabled
                else _seeded_output(function, args, kwargs)
                for index, (args, kwargs) in enumerate(calls)
            ]

    return run


def _reference_output(function: Callable[..., Any], args: Any, kwargs: Any, index: int) -> Any:
    """The final output of the workload on its original code for input ``index`` (0: the recorded one, then the
    evaluation inputs); `TuningError` when the workload rejects that input: it is the input that is wrong."""
    try:
        return _seeded_output(function, args, kwargs)
    except Exception as error:
        if index == 0:  # the recorded input ran in the captures: a failure now is the workload's, as it is
            raise
        reason = str(error).partition("\n")[0][:200]  # a torch error runs on for lines: its first says what
        raise TuningError(
            f"the workload raised {type(error).__name__} on eval_inputs[{index - 1}], untuned, before the task gate "
            f"could judge it ({reason}); make each evaluation input one the function takes, in the form of --input."
        ) from error


def _seeded_output(function: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    with _seeded():  # each input from the same seed: its draws do not depend on the inputs judged before it
        return _detached(function(*args, **kwargs))


@contextmanager
def _seeded() -> Iterator[None]:
    """The same random draws in every judged run (a pipeline's noise), the caller's random state put back after."""
    devices = (
        list(range(torch.cuda.device_count())) if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    )
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(SEED)
        yield


def _detached(output: Any) -> Any:
    """The output kept for judging: its primary value (`primary`), as a CPU tensor."""
    value, _ = primary(output)
    return value.detach().cpu().clone() if isinstance(value, torch.Tensor) else value


def primary(output: Any) -> tuple[Any, str | None]:
    """The part of a workload's output the task is judged on, and the metric its kind calls for (None: unknown)."""
    if isinstance(output, torch.Tensor):
        return output, _tensor_metric(output)
    for key, metric in (
        ("sequences", TOKENS),
        ("logits", TOP1),
        *((k, PSNR) for k in IMAGE_KEYS),
        *((k, COSINE) for k in EMBEDDING_KEYS),
    ):
        value = output.get(key) if isinstance(output, Mapping) else getattr(output, key, None)
        if value is not None:
            tensor, found = primary(value)
            return tensor, metric if isinstance(tensor, torch.Tensor) else found
    if isinstance(output, list | tuple) and output:
        if all(hasattr(item, "getbands") for item in output):  # PIL images
            import numpy as np

            return torch.stack([torch.from_numpy(np.asarray(item).copy()) for item in output]), PSNR
        return primary(output[0])
    if type(output).__module__ == "numpy" and hasattr(output, "dtype"):
        tensor = torch.from_numpy(output.copy())
        return tensor, PSNR if tensor.dim() == 4 else _tensor_metric(tensor)
    return output, None


def _tensor_metric(tensor: torch.Tensor) -> str:
    if not tensor.dtype.is_floating_point:
        return TOKENS
    if tensor.dim() == 4 and (tensor.shape[1] in (1, 3, 4) or tensor.shape[-1] in (1, 3, 4)):
        return PSNR
    return TOP1 if tensor.dim() == 2 else COSINE


def output_metric(
    reference: Any, candidate: Any, metric: str | None = None
) -> tuple[str, float | None, int | None, str | None]:
    """``(metric, value, first divergent position, problem)`` of ``candidate`` against ``reference``, with the
    metric of the reference's kind unless ``metric`` is given."""
    ref, kind = primary(reference)
    cand, _ = primary(candidate)
    metric = metric or kind or COSINE
    if not isinstance(ref, torch.Tensor) or not isinstance(cand, torch.Tensor):
        return metric, None, None, f"the workload returned a {type(reference).__name__}, which has no tensor to judge"
    if metric == TOKENS:
        value, divergence = token_agreement(ref, cand)
        return metric, value, divergence, None
    if ref.shape != cand.shape:
        return (
            metric,
            None,
            None,
            f"the output's shape {tuple(cand.shape)} differs from the original's {tuple(ref.shape)}",
        )
    if metric == TOP1:
        return metric, float((ref.argmax(-1) == cand.argmax(-1)).double().mean()), None, None
    if metric == PSNR:
        return metric, psnr_db(ref, cand), None, None
    return metric, cosine(ref, cand), None, None


def token_agreement(reference: torch.Tensor, candidate: torch.Tensor) -> tuple[float, int | None]:
    """Share of positions (over the longer of the two, row by row) holding the same token, and the first
    position (last dimension) where any row differs; None when none does."""
    ref, cand = reference.reshape(-1, reference.shape[-1]) if reference.dim() else reference.reshape(1, 1), candidate
    cand = cand.reshape(-1, cand.shape[-1]) if cand.dim() else cand.reshape(1, 1)
    if ref.shape[0] != cand.shape[0]:
        return 0.0, 0
    shared = min(ref.shape[1], cand.shape[1])
    longest = max(ref.shape[1], cand.shape[1])
    same = ref[:, :shared] == cand[:, :shared]
    agreement = float(same.sum()) / (ref.shape[0] * longest) if longest else 1.0
    differs = (~same).any(0).nonzero()
    if len(differs):
        return agreement, int(differs[0])
    return agreement, (shared if ref.shape[1] != cand.shape[1] else None)


def psnr_db(reference: torch.Tensor, candidate: torch.Tensor) -> float:
    """PSNR over the reference's range (255 for 8-bit images), capped at 100 dB (identical images)."""
    ref, cand = reference.double(), candidate.double()
    peak = 255.0 if reference.dtype == torch.uint8 else float(ref.max() - ref.min()) or 1.0
    mse = float(((ref - cand) ** 2).mean())
    return 100.0 if mse == 0 else min(100.0, 10 * math.log10(peak**2 / mse))


def cosine(reference: torch.Tensor, candidate: torch.Tensor) -> float:
    ref, cand = reference.double().flatten(), candidate.double().flatten()
    norms = float(ref.norm() * cand.norm())
    return (1.0 if torch.equal(ref, cand) else 0.0) if norms == 0 else float(ref @ cand) / norms
