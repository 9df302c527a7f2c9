"""The five round recipes, in order. Each `run(ctx) -> Candidate` reads top to bottom."""
from rounds import grounding, long_context, plan_finish, rl_polish, self_improve

RECIPES = {"grounding": grounding.run, "plan_finish": plan_finish.run,
           "long_context": long_context.run, "self_improve": self_improve.run,
           "rl_polish": rl_polish.run}
