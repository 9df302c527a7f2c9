"""Where a round's wall time goes: seconds per named step, engine starts, tokens per second.

    timer = StepTimer(on_change=save)        # one per round, loaded back from the run store
    with timer.running():                    # `section`s anywhere below count into this timer
        with section("sampling"):
            with section("engine_start", model="round-1/model"):   # nested: its seconds are
                ...                                                # taken out of "sampling"
    timer.seconds   # {"engine_start": 41.2, "sampling": 3.1}

A nested section's time is subtracted from the section around it, so the steps of a round
add up to the time they took together and never count a second twice. Code far down (the
engine keeper, the LoRA merge, the export's load check) opens `section(...)` without being
handed a timer; outside `running()` a section only runs its body.

Resume: a timer starts from what the run store recorded (`StepTimer.load`), `on_change`
saves it after every section, and steps already done are skipped before their section opens.
So a resumed run reports each finished step's recorded time plus what the resumed process
spent; the part of a step that a kill cut short is lost (it was never recorded).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable

# Display order of the steps a round records (unknown names follow, in recorded order).
STEP_ORDER = ("tasks", "teacher", "engine_start", "engine_stop", "sampling", "filtering",
              "training", "merge", "gate_baseline", "gate_candidate", "export", "load_check",
              "other")

_current: ContextVar["StepTimer | None"] = ContextVar("toolsmith_step_timer", default=None)


class StepTimer:
    """Exclusive wall seconds and entry counts per step name, plus token counts for rates
    (`throughput[kind] = {"tokens", "seconds"}`) and one event per engine start."""

    def __init__(self, on_change: Callable[[dict], None] | None = None):
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.throughput: dict[str, dict[str, float]] = {}
        self.events: list[dict] = []
        self.on_change = on_change
        self._stack: list[list[float]] = []   # per open section: [start, nested seconds]

    @classmethod
    def load(cls, recorded: dict | None, on_change: Callable[[dict], None] | None = None
             ) -> "StepTimer":
        """A timer that continues from `to_dict()`'s output (None: a fresh one)."""
        t = cls(on_change)
        recorded = recorded or {}
        t.seconds = {k: float(v) for k, v in recorded.get("steps", {}).items()}
        t.counts = dict(recorded.get("counts", {}))
        t.throughput = {k: {"tokens": v["tokens"], "seconds": v["seconds"]}
                        for k, v in recorded.get("throughput", {}).items()}
        t.events = list(recorded.get("events", []))
        return t

    @contextmanager
    def running(self):
        """Make this the timer that `section()` and `count()` record into."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    @contextmanager
    def step(self, name: str, **detail):
        """Time the body as step `name` (exclusive of nested steps); with `detail`, also
        append one event `{"step", "seconds", **detail}` (e.g. which model an engine ran)."""
        self._stack.append([time.perf_counter(), 0.0])
        try:
            yield
        finally:
            start, nested = self._stack.pop()
            elapsed = time.perf_counter() - start
            if self._stack:
                self._stack[-1][1] += elapsed
            self.seconds[name] = self.seconds.get(name, 0.0) + max(elapsed - nested, 0.0)
            self.counts[name] = self.counts.get(name, 0) + 1
            if detail:
                self.events.append({"step": name, "seconds": round(elapsed, 2), **detail})
            self._changed()

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n
        self._changed()

    def add_tokens(self, kind: str, tokens: int, seconds: float) -> None:
        """`tokens` processed in `seconds` by `kind` ("sampling", "training"): summed, so the
        rate over several steps is total tokens over total seconds."""
        t = self.throughput.setdefault(kind, {"tokens": 0, "seconds": 0.0})
        t["tokens"] += int(tokens)
        t["seconds"] += float(seconds)
        self._changed()

    def to_dict(self) -> dict:
        return {"steps": {k: round(v, 3) for k, v in self.seconds.items()},
                "counts": dict(self.counts),
                "throughput": {k: {"tokens": v["tokens"], "seconds": round(v["seconds"], 3),
                                   "tokens_per_s": rate(v)}
                               for k, v in self.throughput.items()},
                "events": list(self.events)}

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.to_dict())


@contextmanager
def section(name: str, **detail):
    """`StepTimer.step` on the running timer; just the body when none is running."""
    timer = _current.get()
    if timer is None:
        yield
        return
    with timer.step(name, **detail):
        yield


def count(name: str, n: int = 1) -> None:
    """Count an event (e.g. `engine_reuse`) on the running timer, if any."""
    timer = _current.get()
    if timer is not None:
        timer.count(name, n)


def add_tokens(kind: str, tokens: int, seconds: float) -> None:
    """`StepTimer.add_tokens` on the running timer, if any."""
    timer = _current.get()
    if timer is not None:
        timer.add_tokens(kind, tokens, seconds)


def rate(t: dict | None) -> float:
    """tokens / seconds of one throughput entry (0.0 when empty)."""
    return round(t["tokens"] / t["seconds"], 1) if t and t.get("seconds") else 0.0


def breakdown(timing: dict | None, wall_s: float | None = None) -> list[tuple[str, float]]:
    """A recorded timing's steps in display order as (step, seconds); with the round's wall
    time, the unattributed rest as `other` (omitted when under 0.05 s: a resumed process's
    wall time covers only its own part)."""
    steps = dict((timing or {}).get("steps", {}))
    if wall_s is not None:
        rest = wall_s - sum(steps.values())
        if rest >= 0.05:
            steps["other"] = steps.get("other", 0.0) + rest
    known = [s for s in STEP_ORDER if s in steps]
    return [(s, steps[s]) for s in known + [s for s in steps if s not in STEP_ORDER]]


def engine_starts(timing: dict | None) -> tuple[int, float, int]:
    """(engine starts, their seconds, engine reuses) of a recorded timing."""
    t = timing or {}
    return (t.get("counts", {}).get("engine_start", 0), t.get("steps", {}).get("engine_start", 0.0),
            t.get("counts", {}).get("engine_reuse", 0))


def combine(timings: list[dict | None]) -> dict:
    """Several recorded timings (a run's rounds) summed into one of the same shape."""
    total = StepTimer()
    for t in timings:
        one = StepTimer.load(t)
        for k, v in one.seconds.items():
            total.seconds[k] = total.seconds.get(k, 0.0) + v
        for k, v in one.counts.items():
            total.counts[k] = total.counts.get(k, 0) + v
        for k, v in one.throughput.items():
            total.add_tokens(k, v["tokens"], v["seconds"])
        total.events += one.events
    return total.to_dict()


def shares(rows: list[tuple[str, float]]) -> list[tuple[str, float, float]]:
    """(step, seconds, share of their sum in %) for `breakdown` rows."""
    whole = sum(s for _, s in rows)
    return [(k, s, 100.0 * s / whole if whole else 0.0) for k, s in rows]
