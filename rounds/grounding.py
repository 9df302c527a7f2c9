"""Round 1, grounding: teach the call format on demonstrations that are correct by construction.

Oracle demonstrations from the built-in environments, optional teacher traces (a file or an
endpoint), and samples of the base model; keep calls to declared tools with schema-valid
arguments and a verified final answer; LoRA SFT.
"""
from pydantic import Field

from .settings import SampledRoundSettings, Teacher
from rounds.common import Candidate, RoundContext, accept, make_tasks, oracle_trajectories, \
    sample, teacher_trajectories, train

class GroundingSettings(SampledRoundSettings):
    """Round 1's keys: a sampled round's, and teacher traces to mix in."""
    teacher: Teacher = Field(default_factory=Teacher, description="teacher traces mixed in: "
                                                                  "a file or an endpoint")


SETTINGS = GroundingSettings


def run(ctx: RoundContext) -> Candidate:
    tasks = make_tasks(ctx)
    # the base model's verified samples are its own direct answers to no-call tasks: without
    # them BFCL irrelevance fell 0.70 -> 0.50 (docs/results/round-1-oracle-rows-only.md)
    rows = sample(ctx, tasks, ctx.start_model)
    if ctx.settings.oracle:
        rows = oracle_trajectories(tasks, ctx.number) + rows
    rows += teacher_trajectories(ctx, tasks)
    accepted = accept(ctx, rows)
    return Candidate(train(ctx, accepted, ctx.start_model), ctx.stats)
