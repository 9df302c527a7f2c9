"""Round 2, plan + finish: on-policy samples of the promoted model that plan in <think> before
the first call, end the turn with a final answer and nothing after it, within the turn limit.
With `pool`, a pass-rate-aware pool (`rounds.pool`) trains on the tasks the model solves
sometimes but not reliably; a replay of earlier promoted rounds' rows (`rounds.replay`)
trains beside them."""
from pydantic import Field

from .settings import PooledPart, SampledRoundSettings
from rounds.common import Candidate, RoundContext, make_tasks, train
from rounds.pool import accepted_rows
from rounds.replay import replay_rows

class PlanFinishSettings(PooledPart, SampledRoundSettings):
    """Round 2's keys: a sampled round's and a pool's, a plan demanded by default."""
    require_plan: bool = Field(True, description="filter demands a <think> plan before calls")


SETTINGS = PlanFinishSettings


def run(ctx: RoundContext) -> Candidate:
    tasks = make_tasks(ctx)
    accepted = accepted_rows(ctx, tasks, ctx.start_model)   # plans required (require_plan)
    replayed = replay_rows(ctx, accepted)                   # earlier promoted rounds' rows
    return Candidate(train(ctx, accepted + replayed, ctx.start_model), ctx.stats)
