"""Round 5, RL polish: GRPO + LoRA over on-policy rollouts in the same environments, rewarded by
the verifier (the very function the gates use) plus a small format reward."""
from pipeline.recipes import RLSettings
from rounds.common import Candidate, RoundContext, make_tasks, training_step

SETTINGS = RLSettings


def run(ctx: RoundContext) -> Candidate:
    from pipeline.training.grpo import train_grpo
    tasks = make_tasks(ctx)
    model_dir = ctx.dir / "model"
    if not ctx.step_done("train"):
        with training_step():
            stats = train_grpo(tasks, ctx.start_model, ctx.dir, ctx.settings.grpo,
                               progress=ctx.progress)
        ctx.stats.setdefault("training", {})["grpo"] = stats
        ctx.mark("train", **{k: v for k, v in stats.items() if isinstance(v, (int, float, str))})
    return Candidate(model_dir, ctx.stats)
