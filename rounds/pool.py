"""Pass-rate-aware pools: how often the model solves each task, and what that makes the task.

A task solved by every sample teaches nothing new (its SFT loss is already near zero); one never
solved gives no on-policy success to keep. The frontier between them, solved sometimes but not
reliably (pass@1 below pass@k), is where on-policy rows teach.
"""
from __future__ import annotations

from typing import Iterable

from data.trajectory import Trajectory

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
