"""Pass-rate-aware pools: how often the model solves each task, and what that makes the task.

A task solved by every sample teaches nothing new (its SFT loss is already near zero); one never
solved gives no on-policy success to keep. The frontier between them, solved sometimes but not
reliably (pass@1 below pass@k), is where on-policy rows teach.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterable

from data.trajectory import Task, Trajectory
from rounds.common import NothingAccepted, RoundContext, accept, oracle_trajectories, sample

log = logging.getLogger("toolsmith")

DIFFICULTIES = ("solved", "frontier", "unsolved")


def pass_rates(trajectories: Iterable[Trajectory]) -> dict[str, tuple[int, int]]:
    """task_id -> (verified successes, samples), counting the policy's own samples only
    (oracle, teacher and dataset rows say nothing about what the model can do)."""
    out: dict[str, tuple[int, int]] = {}
    for t in trajectories:
        if t.source != "policy":
            continue
        wins, n = out.get(t.task_id, (0, 0))
        out[t.task_id] = (wins + bool(t.success), n + 1)
    return out


def difficulty(successes: int, n: int) -> str:
    """'solved' when every one of n samples succeeded, 'unsolved' when none did (or none
    were drawn), 'frontier' in between."""
    if n <= 0 or successes <= 0:
        return "unsolved"
    return "solved" if successes >= n else "frontier"


def allocate(rates: dict[str, tuple[int, int]], k_max: int, budget: int | None = None,
             unsolved_weight: float = 0.5) -> dict[str, int]:
    """Extra samples per task after a probe (task id -> (successes, samples)), difficulty-
    aware in the manner of DART-Math's Prop2Diff: a task's share grows with its probe fail
    rate; a solved task gets none; an unsolved one weighs `unsolved_weight` (1.0 is plain
    Prop2Diff; less keeps the spend on tasks that are hard but not hopeless).

    No task goes past `k_max` samples in all; `budget` caps the samples in all, probe
    included (None: every task with a share is filled to `k_max`). Integer shares by
    water-filling (a task at its cap hands the rest on) and largest remainder, ties in the
    order of `rates`: the same probe always gives the same allocation."""
    weight = {}
    for tid, (wins, n) in rates.items():
        d = difficulty(wins, n)
        w = (Fraction(0) if d == "solved" else
             Fraction(unsolved_weight) if d == "unsolved" else Fraction(n - wins, n))
        if w > 0 and n < k_max:
            weight[tid] = w
    room = {tid: k_max - rates[tid][1] for tid in weight}
    out = dict.fromkeys(rates, 0)
    left = (sum(room.values()) if budget is None else
            min(sum(room.values()), max(0, budget - sum(n for _, n in rates.values()))))
    active = list(weight)
    while left > 0 and active:
        total = sum(weight[t] for t in active)
        share = {t: left * weight[t] / total for t in active}
        full = [t for t in active if share[t] >= room[t]]
        if full:  # these reach their cap: fill them, share what is left among the others
            for t in full:
                out[t], left = room[t], left - room[t]
            active = [t for t in active if t not in full]
            continue
        for t in active:
            out[t] = int(share[t])
        rest = left - sum(out[t] for t in active)
        by_remainder = sorted(active, key=lambda t: -(share[t] - int(share[t])))  # stable
        for t in by_remainder[:rest]:
            out[t] += 1
        left = 0
    return out


@dataclass
class Pool:
    """Every policy sample a pool drew (probe, then top-ups) and what it says per task."""
    probe: list[Trajectory]
    rows: list[Trajectory]                     # probe + top-ups
    extra: dict[str, int]                      # task id -> top-up samples

    @property
    def rates(self) -> dict[str, tuple[int, int]]:
        return pass_rates(self.rows)

    def difficulties(self) -> dict[str, str]:
        return {tid: difficulty(*r) for tid, r in self.rates.items()}


def sample_pool(ctx: RoundContext, tasks: list[Task], model_dir: Path,
                step: str = "pool") -> Pool:
    """A probe of `pool.k_probe` samples per task (`<step>-probe`), then the top-ups
    `allocate` gives, one sampling step per top-up size (`<step>-topup<n>`), numbered after
    the probe's samples. Each is a run-store step; the allocation is a function of the probe
    on disk, so a resumed round asks for the same top-ups."""
    p = ctx.settings.pool
    probe = sample(ctx, tasks, model_dir, step=f"{step}-probe", k=p.k_probe)
    extra = allocate(pass_rates(probe), p.k_max, p.budget, p.unsolved_weight)
    rows = list(probe)
    for n in sorted({n for n in extra.values() if n}):
        group = [t for t in tasks if extra.get(t.id) == n]
        rows += sample(ctx, group, model_dir, step=f"{step}-topup{n}", k=n,
                       first_sample=p.k_probe)
    return Pool(probe, rows, extra)


def training_rows(pool: Pool, tasks: list[Task], train_on: list[str], oracle: bool,
                  round_no: int, always: Iterable[str] = ()) -> list[Trajectory]:
    """The rows of the tasks whose difficulty is in `train_on` or whose kind is in `always`
    (accept keeps their verified successes), plus, when `oracle` is on, the oracle
    demonstration of each unsolved task that `train_on` names or whose kind is in `always`
    (it has no success of its own)."""
    diff, always = pool.difficulties(), set(always)
    rows = [t for t in pool.rows if diff.get(t.task_id) in train_on or t.kind in always]
    if oracle:
        rows += oracle_trajectories(
            [t for t in tasks if diff.get(t.id) == "unsolved"
             and ("unsolved" in train_on or t.kind in always)], round_no)
    return rows


def pool_stats(pool: Pool, accepted: list[Trajectory], train_on: list[str]) -> dict:
    """pass@1 (mean per-task pass rate over all its samples), pass@k (share of tasks with a
    success), the same two for the probe alone (k_probe each: comparable across rounds),
    tasks per difficulty after the probe and after the top-ups, accepted rows per
    difficulty, samples spent, and how many were cut at the token budget or the context
    window (`token_limit`)."""
    rates, diff = pool.rates, pool.difficulties()
    probe = pass_rates(pool.probe)
    kept = Counter(diff.get(t.task_id, "unsolved") for t in accepted)
    return {
        "tasks": len(rates), "samples": sum(n for _, n in rates.values()),
        "probe_samples": len(pool.probe), "topup_samples": len(pool.rows) - len(pool.probe),
        "token_limit": sum(t.finish == "token_limit" for t in pool.rows),
        "pass@1": mean_pass_rate(rates), "pass@k": any_pass_rate(rates),
        "probe_pass@1": mean_pass_rate(probe), "probe_pass@k": any_pass_rate(probe),
        "probe_difficulty": count_difficulties(difficulty(*r) for r in probe.values()),
        "difficulty": count_difficulties(diff.values()),
        "kept": {d: kept[d] for d in DIFFICULTIES}, "train_on": list(train_on)}


def mean_pass_rate(rates: dict[str, tuple[int, int]]) -> float:
    """pass@1: the mean per-task success rate."""
    return round(sum(w / n for w, n in rates.values()) / len(rates), 4) if rates else 0.0


def any_pass_rate(rates: dict[str, tuple[int, int]]) -> float:
    """pass@k: the share of tasks solved by at least one of their samples."""
    return round(sum(w > 0 for w, _ in rates.values()) / len(rates), 4) if rates else 0.0


def count_difficulties(values: Iterable[str]) -> dict[str, int]:
    """How many of each difficulty, every difficulty named (0 when absent)."""
    c = Counter(values)
    return {d: c[d] for d in DIFFICULTIES}


def accepted_rows(ctx: RoundContext, tasks: list[Task], model_dir: Path, sfx: str = "",
                  balance: list[str] | None = None) -> list[Trajectory]:
    """The round's accepted on-policy rows. Without `pool` in the settings: k samples per
    task (`rollouts<sfx>`), plus oracle rows when `oracle` is on. With it: a pass-rate-aware
    pool (`pool<sfx>-*`), its `train_on` difficulties kept, the pool's numbers recorded in
    the round's stats (`pool` -> `pool<sfx>`) and the run store."""
    s = ctx.settings
    if getattr(s, "pool", None) is None:
        rows = sample(ctx, tasks, model_dir, step=f"rollouts{sfx}")
        if s.oracle:
            rows += oracle_trajectories(tasks, ctx.number)
        return accept(ctx, rows, step=f"accepted{sfx}", balance=balance)
    step = f"pool{sfx}"
    pool = sample_pool(ctx, tasks, model_dir, step=step)
    rows = training_rows(pool, tasks, s.pool.train_on, s.oracle, ctx.number,
                         s.pool.always_train)
    try:
        accepted = accept(ctx, rows, step=f"accepted{sfx}", balance=balance)
    except NothingAccepted:
        record(ctx, step, pool_stats(pool, [], s.pool.train_on))
        raise
    record(ctx, step, pool_stats(pool, accepted, s.pool.train_on))
    return accepted


def record(ctx: RoundContext, step: str, stats: dict) -> None:
    """The pool's numbers into the round's stats and the run store, and one log line."""
    ctx.stats.setdefault("pool", {})[step] = stats
    ctx.mark(step, **stats)
    log.info("%s: %d tasks, %d samples (%d probe), pass@1 %.3f pass@k %.3f; tasks %s; "
             "kept %s (training on %s)", step, stats["tasks"], stats["samples"],
             stats["probe_samples"], stats["pass@1"], stats["pass@k"], stats["difficulty"],
             stats["kept"], "+".join(stats["train_on"]))
