"""Paired statistics of two models on the same items: mean difference, its SE, wins and losses.

Every canary metric is a per-item number in [0, 1] (a k-sample average), so one paired test
serves all of them: d_i = candidate_i - baseline_i, mean(d), SE = sd(d) / sqrt(n) with the
n-1 denominator. Pairing by item removes the item difficulty from the noise, which is what
makes small canaries usable as a gate.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Paired:
    n: int
    baseline: float          # mean of the baseline's per-item values
    candidate: float         # mean of the candidate's per-item values
    delta: float             # mean paired difference (candidate - baseline)
    se: float                # standard error of `delta`; 0.0 when n < 2 (see `note`)
    wins: int                # items where the candidate is higher
    losses: int              # items where the candidate is lower
    ties: int
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def paired(candidate: dict[str, float], baseline: dict[str, float]) -> Paired:
    """Paired comparison over item ids. Both sides must hold exactly the same ids."""
    missing = sorted(set(baseline) ^ set(candidate))
    if missing:
        raise ValueError(f"paired statistics need the same items on both sides; "
                         f"{len(missing)} differ (e.g. {missing[:3]}): evaluate both models on "
                         f"the same suite version")
    ids = sorted(candidate)
    n = len(ids)
    if n == 0:
        return Paired(0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, note="no items")
    diffs = [float(candidate[i]) - float(baseline[i]) for i in ids]
    mean = sum(diffs) / n
    if n < 2:
        se, note = 0.0, "n < 2: standard error undefined, reported as 0"
    else:
        var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
        se, note = math.sqrt(var / n), ""
    eps = 1e-12
    return Paired(
        n=n,
        baseline=sum(float(baseline[i]) for i in ids) / n,
        candidate=sum(float(candidate[i]) for i in ids) / n,
        delta=mean, se=se,
        wins=sum(d > eps for d in diffs), losses=sum(d < -eps for d in diffs),
        ties=sum(abs(d) <= eps for d in diffs), note=note)
