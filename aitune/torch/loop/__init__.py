"""The closed loop: capture before → suggest → wrap and tune → capture after → compare, and a plan to apply later.

Every decision is made by the parts it joins: `aitune.suggest` ranks the regions, `aitune.torch.tune`
records and tunes them behind the correctness gate, `aitune.compare` measures the gain and
`aitune.compare.gains` sets it beside the forecast. A region whose tuning fails, loses or fails the gate is
put back as it was (its wrapper removed), so the after capture shows it untouched.

Before the after capture, the tuned regions are verified end to end (`aitune.torch.tuning.verify`):
whole runs with and without them, alternating in this process, and a region stays tuned only when
the run is faster with it beyond noise; the others are put back too. The plan holds only what
stayed, and a replayed plan is verified the same way.

At a reduced precision (``LoopConfig.precision``: bf16, int8; fp32 is the default and never left
implicitly), the level's backends are judged first on the task (`aitune.torch.tuning.task_gate`):
the workload's final output with them against the original's, by the output's kind, and what fails
is put back before any timing.

Its parts, each of which imports only those listed before it: `config.py` (the records), `record.py` (what a way of
tuning left), `ways.py` (AOT, JIT, a plan, the decoder recipe), `gates.py` (the task gate and the end-to-end
check), `search.py` (what to tune, the whole model weighed), `outputs.py` (the plan and the tuning report),
`driver.py` (`optimize`).
"""

from aitune.torch.loop.config import LoopConfig, LoopResult
from aitune.torch.loop.driver import optimize

__all__ = ["LoopConfig", "LoopResult", "optimize"]
