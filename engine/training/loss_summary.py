"""A training run's loss in two numbers: the mean over its first and its last tenth of logged
steps. One step's loss on a batch of four rows is noise (a round-1 run's last step read 0.89
where the nine before it averaged 0.32), so a curve's ends are quoted as means."""
from __future__ import annotations

import math
from collections.abc import Iterable


def tenth_means(losses: list[float]) -> tuple[float, float] | None:
    """(mean of the first tenth, mean of the last tenth) of `losses`, each at least one step;
    None for no losses."""
    if not losses:
        return None
    k = max(1, math.ceil(len(losses) / 10))
    return sum(losses[:k]) / k, sum(losses[-k:]) / k


def logged_losses(rows: Iterable[dict]) -> list[float]:
    """The per-step `loss` values of a trainer's JSONL log rows (engine.training.curves.JsonlLog);
    its closing summary row has `train_loss`, not `loss`, and is left out."""
    return [float(r["loss"]) for r in rows if isinstance(r.get("loss"), (int, float))]
