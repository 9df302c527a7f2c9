"""Round 3, long context: many distractor tools, long tool outputs and histories, in length
buckets (`context_tokens`); the plan + finish filter applied per bucket; packed SFT."""
from pipeline.recipes import LongContextSettings
from rounds.common import Candidate, RoundContext, accept, make_tasks, oracle_trajectories, \
    sample, train

SETTINGS = LongContextSettings


def run(ctx: RoundContext) -> Candidate:
    tasks = make_tasks(ctx)                                  # long_context tasks per length bucket
    rows = sample(ctx, tasks, ctx.start_model)        # plans required (require_plan)
    if ctx.settings.oracle:
        rows += oracle_trajectories(tasks, ctx.number)
    accepted = accept(ctx, rows, balance=["length_bucket", "kind"])
    return Candidate(train(ctx, accepted, ctx.start_model), ctx.stats)
