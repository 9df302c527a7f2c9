"""The five built-in round recipes. Each module has `SETTINGS` (the config keys it reads)
and `run(ctx) -> Candidate`, which reads top to bottom; `pipeline.recipes` finds them by name."""
from rounds import grounding, long_context, plan_finish, rl_polish, self_improve  # TEMPORARY shim

RECIPES = {"grounding": grounding.run, "plan_finish": plan_finish.run,
           "long_context": long_context.run, "self_improve": self_improve.run,
           "rl_polish": rl_polish.run}
