"""Round 2, plan + finish: on-policy samples of the promoted model that plan in <think> before
the first call, end the turn with a final answer and nothing after it, within the turn limit."""
from pipeline.recipes import PlanFinishSettings
from rounds.common import Candidate, RoundContext, accept, make_tasks, oracle_trajectories, \
    sample, train

SETTINGS = PlanFinishSettings


def run(ctx: RoundContext) -> Candidate:
    tasks = make_tasks(ctx)
    rows = sample(ctx, tasks, ctx.start_model)        # plans required (require_plan)
    if ctx.settings.oracle:                                  # tiny preset: keeps the round non-empty
        rows += oracle_trajectories(tasks, ctx.number)
    accepted = accept(ctx, rows)
    return Candidate(train(ctx, accepted, ctx.start_model), ctx.stats)
