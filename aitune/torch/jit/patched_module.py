"""A JIT-patched module (its state, its place in the hierarchy, how its forward is routed) and the session of
them: the two name each other, so they live in one file.

A session owns what the patched modules share: the config, the stack of patched modules executing
now (per thread), the hierarchy's topmost modules, the names taken and the history. Modules get
their session passed in; nothing lives on classes.

Only the module's ``forward`` changes (an instance attribute), so ``nn.Module.__call__`` still runs
the user's hooks exactly once in every state. The router sends each call by state: ``init`` finds
the module's place and becomes ``recording`` or ``skipped``; ``recording`` records the call then runs
the original forward; ``tuned`` runs the tuned graphs; ``eager`` and ``skipped`` run the original;
``detached`` runs the original and nothing else. Tuning goes top down: a module waits while an
ancestor is still recording; if it tunes, its descendants are detached (its backend runs their code);
if it fails, its children become candidates in turn.
"""

from __future__ import annotations

import copy
import random
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

from aitune.errors import TuningError
from aitune.markers import JIT_REGION_KIND
from aitune.torch.jit.config import JitConfig
from aitune.torch.jit.hierarchy import fq_name, local_name, unique_name
from aitune.torch.jit.router import ForwardRouter, install, uninstall
from aitune.torch.jit.rules import skip_reason
from aitune.torch.jit.state import JitState
from aitune.torch.jit.tuning import tune_patched
from aitune.torch.registry import ManagedModule, ModuleRegistry
from aitune.torch.tuning.outcome import RegionOutcome
from aitune.torch.tuning.recording import Recording, run_tuned
from aitune.torch.tuning.tuner import GraphRunner
from aitune.torch.tuning.verify import Switch

_PENDING = (JitState.INIT, JitState.RECORDING)


class PatchedModule:
    """One intercepted or registered module; ``module.forward`` is its ``router`` until it is detached."""

    def __init__(self, module: nn.Module, session: JitSession, given_name: str | None = None) -> None:
        self.module = module
        self.given_name = given_name  # its path from the user's root, when registered by path
        self.session = session
        self.state = JitState.INIT
        self.fq_name = ""  # unique once the module has run
        self.parent: PatchedModule | None = None
        self.children: list[PatchedModule] = []
        self.depth = 0
        self.calls = 0  # recorded calls
        self.reason: str | None = None  # why it is skipped, eager or detached
        self.absorbed_by: PatchedModule | None = None  # the tuned ancestor whose backend runs this module's code
        self.report: RegionOutcome | None = None  # what its tuning gave, once it tried to tune
        self.recording = Recording()
        self.runners: dict[str, GraphRunner] = {}
        self.forward = module.forward  # the original: an instance override or the bound class method
        self.router = ForwardRouter(self.forward, self._route)
        self._had_own_forward = "forward" in vars(module)
        self._region: str | None = None

    def __repr__(self) -> str:
        return f"PatchedModule({self.fq_name or type(self.module).__name__!r}, state={self.state.value})"

    @property
    def label(self) -> str:
        """The state, with the reason when there is one: ``skipped: in the skip list``."""
        return f"{self.state.value}: {self.reason}" if self.reason else self.state.value

    def install(self) -> None:
        if self.state is not JitState.DETACHED:
            install(self.module, self.router)

    def uninstall(self) -> None:
        uninstall(self.module, self.router, self._had_own_forward)

    def try_tune(self) -> None:
        """Tune now if the mode's condition is met and no ancestor is still recording."""
        if self.state is JitState.RECORDING and self._ready():
            self.tune()

    def tune(self) -> None:
        """Tune every recorded graph: ``tuned`` (descendants detached) or ``eager`` (children become candidates)."""
        if self.state is not JitState.RECORDING or not self.recording.samples:
            raise TuningError(
                f"module '{self.fq_name or type(self.module).__name__}' is {self.state.value} with no recorded calls"
                " to tune from; run it on representative inputs first."
            )
        session = self.session
        with originals_restored([self, *self.descendants()]), session.tuning_now(self):
            outcome = tune_patched(self.fq_name, self.module, self.forward, self.recording, session.config, session.rng)
        self.report = outcome.report
        self.recording.drop_samples()
        if outcome.tuned:
            self.runners = outcome.runners
            self._move(JitState.TUNED, outcome.reason)
            for descendant in self.descendants():
                descendant.detach(absorbed_by=self)
        else:
            self._move(JitState.EAGER, outcome.reason)
            self.offer_to_children()

    def offer_to_children(self) -> None:
        """Let the children tune (a skipped child passes the offer on to its own children)."""
        for child in list(self.children):
            if child.state is JitState.RECORDING:
                child.try_tune()
            elif child.state is JitState.SKIPPED:
                child.offer_to_children()

    def detach(self, absorbed_by: PatchedModule | None = None) -> None:
        """Free the tuned graphs and restore the original forward; a cached reference to it runs the original."""
        if self.state is JitState.DETACHED:
            return
        self.absorbed_by = absorbed_by
        for runner in self.runners.values():
            runner.close()
        self.runners = {}
        self.recording.clear()
        self.uninstall()
        self._unregister()
        self._move(JitState.DETACHED, f"runs inside tuned {absorbed_by.fq_name}" if absorbed_by else None)

    @property
    def outcome(self) -> RegionOutcome | None:
        """What its tuning gave, with its current state, or None before it tried to tune."""
        return self.report.with_state(self.state.value) if self.report is not None else None

    def report_entry(self) -> dict[str, Any] | None:
        """A fresh copy of its tuning report entry with its current state, or None before it tried to tune."""
        outcome = self.outcome
        return copy.deepcopy(outcome.to_dict()) if outcome is not None else None

    def _route(self, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        state = self.state
        if state is JitState.DETACHED:
            return self.forward(*args, **kwargs)
        if state is JitState.TUNED:
            return run_tuned(self.runners, self.forward, self.fq_name, args, kwargs)
        if state is JitState.INIT:
            self._place()
        if self.state is JitState.RECORDING:
            self.recording.record(args, kwargs)
            self.calls += 1
        with self.session.executing(self):
            output = self.forward(*args, **kwargs)
        self.try_tune()
        return output

    def _place(self) -> None:
        self.parent, self.fq_name = self.session.place(self)
        self.depth = self.parent.depth + 1 if self.parent is not None else 0
        reason = skip_reason(self.module, self.fq_name, self.depth, self.session.config)
        if reason is not None:
            self._move(JitState.SKIPPED, reason)
            return
        self._region = self.session.registry.register(JIT_REGION_KIND, self.fq_name, self._describe)
        self._move(JitState.RECORDING, None)

    def _ready(self) -> bool:
        session, config = self.session, self.session.config
        if session.tuning is not None or self in session.stack or self._ancestor_pending():
            return False
        return session.armed if config.mode == "deferred" else self.calls >= config.tune_after

    def _ancestor_pending(self) -> bool:
        ancestor = self.parent
        while ancestor is not None:
            if ancestor.state in _PENDING:
                return True
            ancestor = ancestor.parent
        return False

    def descendants(self) -> list[PatchedModule]:
        """Patched modules it owns (called or not) and those that ran inside it, itself excluded."""
        found: dict[int, PatchedModule] = {}
        for module in self.module.modules():
            patched = self.session.find(module)
            if patched is not None and patched is not self:
                found[id(patched)] = patched
        pending = list(self.children)
        while pending:
            child = pending.pop()
            found[id(child)] = child
            pending += child.children
        return list(found.values())

    def _move(self, state: JitState, reason: str | None) -> None:
        because = f" ({reason})" if reason else ""
        name = self.fq_name or type(self.module).__name__
        self.session.note(f"{name}: {self.state.value} → {state.value}{because}")
        self.state, self.reason = state, reason

    def _unregister(self) -> None:
        if self._region is not None:
            self.session.registry.unregister(self._region)
            self._region = None

    def _describe(self) -> ManagedModule | None:
        return ManagedModule(JIT_REGION_KIND, self.fq_name, self.module, self.module, self.state.value)


class JitSession:
    """The patched modules of one JIT run and what they share."""

    def __init__(self, config: JitConfig, registry: ModuleRegistry) -> None:
        self.config = config
        self.registry = registry
        self.heads: list[PatchedModule] = []
        self.history: list[str] = []
        self.armed = False
        self.tuning: PatchedModule | None = (
            None  # the module tuning now; nothing else tunes or is intercepted meanwhile
        )
        self.rng = random.Random(config.seed)
        self._patched: weakref.WeakValueDictionary[int, PatchedModule] = weakref.WeakValueDictionary()
        self._names: set[str] = set()
        self._local = threading.local()

    @property
    def stack(self) -> list[PatchedModule]:
        """The patched modules executing now in this thread, outermost first."""
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    @contextmanager
    def executing(self, patched: PatchedModule) -> Iterator[None]:
        stack = self.stack
        stack.append(patched)
        try:
            yield
        finally:
            stack.pop()

    @contextmanager
    def tuning_now(self, patched: PatchedModule) -> Iterator[None]:
        self.tuning = patched
        try:
            yield
        finally:
            self.tuning = None

    def adopt(self, module: nn.Module, name: str | None = None) -> PatchedModule:
        """Patch ``module``'s forward with a router; its place in the hierarchy is found on its first call.

        ``name`` (a path from the user's root, ``unet``) names it when it runs topmost, instead of its class.
        """
        patched = PatchedModule(module, self, name)
        patched.install()
        self._patched[id(module)] = patched
        return patched

    def find(self, module: nn.Module) -> PatchedModule | None:
        return self._patched.get(id(module))

    def patched(self) -> list[PatchedModule]:
        """Every live patched module, in adoption order."""
        return list(self._patched.values())

    def place(self, patched: PatchedModule) -> tuple[PatchedModule | None, str]:
        """The module's parent (the innermost executing patched module) and its unique fully qualified name."""
        parent = self.stack[-1] if self.stack else None
        owner = parent.module if parent is not None else None
        local = patched.given_name if owner is None and patched.given_name else local_name(patched.module, owner)
        name = unique_name(fq_name(parent.fq_name if parent is not None else None, local), self._names)
        self._names.add(name)
        (parent.children if parent is not None else self.heads).append(patched)
        return parent, name

    def note(self, entry: str) -> None:
        self.history.append(entry)

    def detach_all(self) -> None:
        """Restore every patched module's forward; cached references to it run the original from now on."""
        for patched in self.patched():
            patched.detach()


@contextmanager
def originals_restored(patched: list[PatchedModule]) -> Iterator[None]:
    """Their original forwards back for a while (a backend traces plain modules; a verification runs eager)."""
    for each in patched:
        each.uninstall()
    try:
        yield
    finally:
        for each in patched:
            each.install()


def jit_switch(patched: PatchedModule) -> Switch:
    """A JIT-tuned module's switch: its forward uninstalled for a while, detached for good."""
    return Switch(lambda: originals_restored([patched]), patched.detach)
