"""Round 4, on-policy self-improvement (expert iteration): k samples per task from the current
model (or, with `pool`, a pass-rate-aware pool: `rounds.pool`), keep verified successes, match
the distribution (cap per task, balance domains / kinds / turn counts, shortest success first),
add a replay of earlier promoted rounds' rows (`rounds.replay`), train; with `iterations` > 1, each iteration samples new tasks from the model the one before
trained, and trains on top of it."""
from pydantic import Field

from .settings import PooledPart, SampledRoundSettings
from rounds.common import Candidate, RoundContext, make_tasks, train
from rounds.pool import accepted_rows
from rounds.replay import replay_rows

class SelfImproveSettings(PooledPart, SampledRoundSettings):
    """Round 4's keys: a sampled round's and a pool's, and how many iterations."""
    iterations: int = Field(1, ge=1, description="sample-filter-train iterations in the round")


SETTINGS = SelfImproveSettings


def run(ctx: RoundContext) -> Candidate:
    model = ctx.start_model
    for it in range(1, ctx.settings.iterations + 1):
        sfx = "" if ctx.settings.iterations == 1 else f"-{it}"
        tasks = make_tasks(ctx, step=f"tasks{sfx}", namespace=f"round-{ctx.number}-it{it}")
        accepted = accepted_rows(ctx, tasks, model, sfx=sfx)
        replayed = replay_rows(ctx, accepted, sfx=sfx)   # earlier promoted rounds' rows
        out = ctx.dir if not sfx else ctx.dir / f"iter-{it}"
        model = train(ctx, accepted + replayed, model, step=f"train{sfx}", out_dir=out)
    return Candidate(model, ctx.stats)
