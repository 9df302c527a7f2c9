"""Round 4, on-policy self-improvement (expert iteration): k samples per task from the current
model, keep verified successes, match the distribution (cap per task, balance domains / kinds /
turn counts, shortest success first), train; optionally several iterations inside the round."""
from pipeline.recipes import SelfImproveSettings
from rounds.common import Candidate, RoundContext, accept, make_tasks, oracle_trajectories, \
    sample, train

SETTINGS = SelfImproveSettings


def run(ctx: RoundContext) -> Candidate:
    model = ctx.start_model
    for it in range(1, ctx.settings.iterations + 1):
        sfx = "" if ctx.settings.iterations == 1 else f"-{it}"
        tasks = make_tasks(ctx, step=f"tasks{sfx}", namespace=f"round-{ctx.number}-it{it}")
        rows = sample(ctx, tasks, model, step=f"rollouts{sfx}")
        if ctx.settings.oracle:
            rows += oracle_trajectories(tasks, ctx.number)
        accepted = accept(ctx, rows, step=f"accepted{sfx}")
        out = ctx.dir if not sfx else ctx.dir / f"iter-{it}"
        model = train(ctx, accepted, model, step=f"train{sfx}", out_dir=out)
    return Candidate(model, ctx.stats)
