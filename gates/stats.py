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


# ------------------------------------------------------------- minimum detectable effect

Z_POWER = 0.8416  # one-sided normal quantile of the 80% power the effect sizes below assume


def detectable(n: int, se_mult: float, power_z: float = Z_POWER) -> float:
    """Smallest true change of a canary's metric that a rule "the change is at least se_mult x
    SE" sees with 80% power on `n` items: d = c^2 / (n + c^2), c = se_mult + 0.8416.

    Assumption: the change comes as wins with no losses (each item's paired difference is 1
    with probability d, else 0), so the per-item variance is d(1-d) and SE = sqrt(d(1-d)/n).
    With k samples per item, an item is taken to win in all its samples (samples of one item
    fully correlated): k then does not shrink the SE, the cautious case; independent samples
    would give c^2 / (nk + c^2). Power 80%: d - se_mult x SE >= 0.8416 x SE, i.e.
    d >= c sqrt(d(1-d)/n) -> d n >= c^2 (1-d) -> d = c^2 / (n + c^2).

    A normal approximation with the SE at its true value: a guide, not an exact power. Under
    exactly this assumption the rule's own SE shrinks with the wins (at 2 SE it passes from 4
    wins on), and the binomial power at d is 78% for n=12, 91% for n=30, 95% for n=100; real
    changes also bring losses, which widen the SE and take power away."""
    c = se_mult + power_z
    return c * c / (max(n, 0) + c * c)


def items_for(effect: float, se_mult: float, power_z: float = Z_POWER) -> int:
    """Items a canary needs for `detectable(n, se_mult) <= effect` (the inverse:
    n = c^2 (1-d) / d, rounded up)."""
    if not 0 < effect < 1:
        raise ValueError(f"effect must be in (0, 1), got {effect}")
    c = se_mult + power_z
    return math.ceil(c * c * (1 - effect) / effect - 1e-9)


def keep_mde(n: int, keep_se: float) -> float:
    """Smallest improvement of the target canary that passes the keep rule (80% power)."""
    return detectable(n, keep_se)


def drop_mde(n: int, drop_se: float, drop_abs: float) -> float:
    """Smallest drop the drop rule flags (80% power): never below the absolute tolerance."""
    return max(drop_abs, detectable(n, drop_se))
