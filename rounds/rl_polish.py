"""Round 5, RL polish: GRPO + LoRA over on-policy rollouts in the same environments, rewarded by
the verifier (the very function the gates use) plus a small format reward.

GRPO learns only from groups whose rewards differ, so the round first probes every candidate
task k times with its start model (temperature and turn limits as GRPO's) and trains on the
frontier: tasks solved sometimes but not always. Groups that still come out all-equal are taken
out of the loss by the trainer (`grpo.drop_zero_variance`).
"""
from __future__ import annotations

import json
import logging

from pydantic import Field, model_validator

from data.jsonl import write_text_atomic
from data.trajectory import Task
from engine.sampling.base import SamplingParams
from engine.settings import Strict
from engine.training.settings import GRPOSettings
from rounds.common import Candidate, RoundContext, make_tasks, sample, training_step
from rounds.pool import (any_pass_rate, count_difficulties, difficulty, mean_pass_rate,
                         pass_rates)
from rounds.settings import RoundSettings

class FrontierSettings(Strict):
    """Which tasks round 5 trains on: every candidate (the round's `tasks`) is probed with the
    start model, and GRPO gets those it solves sometimes but not always (0 < pass rate < 1):
    a group there has rewards that differ, so an advantage and a gradient."""
    enabled: bool = Field(True, description="probe and select; false: GRPO on every candidate")
    probe_k: int | None = Field(None, ge=2, description="samples per candidate task (default: "
                                                        "grpo.group_size); at least 2, so a "
                                                        "task can be solved sometimes")
    min_tasks: int | None = Field(None, ge=1, description="fewest tasks GRPO gets: when fewer "
                                                          "are at the frontier, the candidates "
                                                          "with pass rate nearest 0.5 fill up "
                                                          "(on a tie: varied probe scores "
                                                          "first, then the harder task). "
                                                          "Default: grpo.tasks_per_step")


class RLSettings(RoundSettings):
    """Round 5's keys: GRPO and the frontier probe (it samples as GRPO rolls out)."""
    grpo: GRPOSettings = Field(default_factory=GRPOSettings, description="GRPO on the "
                                                                         "frontier tasks")
    frontier: FrontierSettings = Field(default_factory=FrontierSettings,
                                       description="which tasks GRPO trains on (a probe of the "
                                                   "start model)")

    @model_validator(mode="after")
    def _check_frontier(self):
        want = self.frontier.min_tasks
        if want is not None and want < self.grpo.tasks_per_step:
            raise ValueError(f"frontier.min_tasks={want} is below grpo.tasks_per_step="
                             f"{self.grpo.tasks_per_step}: a GRPO step needs that many tasks; "
                             "raise min_tasks or lower tasks_per_step")
        return self


SETTINGS = RLSettings
log = logging.getLogger("toolsmith")


def run(ctx: RoundContext) -> Candidate:
    from engine.training.grpo import train_grpo
    s = ctx.settings
    tasks = [capped(t, s.grpo.max_turns) for t in make_tasks(ctx)]
    if s.frontier.enabled:
        tasks = frontier(ctx, tasks)
    model_dir = ctx.dir / "model"
    if not ctx.step_done("train"):
        with training_step():
            stats = train_grpo(tasks, ctx.start_model, ctx.dir, s.grpo, progress=ctx.progress)
        rewards = stats.get("reward") or []
        log.info(f"train: GRPO on {stats['tasks']} tasks, {stats['steps']} steps, mean reward "
                 f"{sum(rewards) / len(rewards) if rewards else 0:.3f}, "
                 f"{stats['seconds_per_step']} s/step")
        ctx.stats.setdefault("training", {})["grpo"] = stats
        ctx.mark("train", **{k: v for k, v in stats.items() if isinstance(v, (int, float, str))})
    return Candidate(model_dir, ctx.stats)


def capped(task: Task, max_turns: int) -> Task:
    """The task as GRPO plays it (turns capped at grpo.max_turns), so the probe measures the
    pass rate GRPO will see."""
    return task if task.max_turns <= max_turns else task.model_copy(update={"max_turns":
                                                                             max_turns})


def frontier(ctx: RoundContext, candidates: list[Task]) -> list[Task]:
    """Probe the candidates (the `probe` step, resumable) and return the tasks GRPO trains on;
    the pass rates, the difficulty counts and the choice go to the round's stats and to
    `frontier.json`."""
    s = ctx.settings
    k = s.frontier.probe_k or s.grpo.group_size
    # the probe samples as GRPO rolls out: its temperature and turn length, top_p 1 (TRL's
    # default), no plan demanded
    as_grpo = SamplingParams(temperature=s.grpo.temperature, top_p=1.0,
                             max_tokens=s.grpo.max_new_tokens)
    probe = sample(ctx, candidates, ctx.start_model, step="probe", k=k, params=as_grpo,
                   require_plan=False)
    rates = pass_rates(probe)
    rates = {t.id: rates.get(t.id, (0, 0)) for t in candidates}
    want = s.frontier.min_tasks or s.grpo.tasks_per_step  # validated: >= tasks_per_step
    chosen, filled = select_frontier(rates, want, score_spread(probe))
    used = count_difficulties(difficulty(*rates[i]) for i in chosen)
    stats = {"tasks": len(candidates), "probe_k": k, **pool_summary(rates), "used": len(chosen),
             "used_difficulty": used, "filled": filled, "min_tasks": want}
    ctx.stats["frontier"] = stats
    ctx.mark("frontier", **stats)
    write_text_atomic(ctx.dir / "frontier.json", json.dumps(
        {"summary": stats,
         "tasks": {i: {"successes": w, "samples": n, "difficulty": difficulty(w, n),
                       "used": i in chosen} for i, (w, n) in rates.items()}}, indent=1) + "\n")
    log.info("frontier: %d of %d candidate tasks solved sometimes (probe k=%d: pass@1 %.3f, "
             "pass@k %.3f; %s); GRPO on %d", stats["difficulty"]["frontier"], len(candidates),
             k, stats["pass@1"], stats["pass@k"], stats["difficulty"], len(chosen))
    if filled:
        log.warning("frontier: only %d task(s) at the frontier, below the %d GRPO needs; %d "
                    "filled up with the pass rates nearest 0.5 (their groups often tie and are "
                    "dropped: more candidates or a larger probe_k widen the frontier)",
                    len(chosen) - filled, want, filled)
    by_id = {t.id: t for t in candidates}
    return [by_id[i] for i in chosen]


def select_frontier(rates: dict[str, tuple[int, int]], min_tasks: int,
                    spread: dict[str, float] | None = None) -> tuple[list[str], int]:
    """(chosen task ids, how many of them filled up): every task with 0 < pass rate < 1, in the
    table's order; when fewer than `min_tasks`, the others nearest pass rate 0.5 fill up. Ties
    go to the larger probe score `spread` (rewards that differed will likely differ again in
    a GRPO group), then to the harder task (lower rate: the round trains where the model
    fails), then to table order. With one k for all tasks every non-frontier task is 0.5 away,
    so the tie-breaks decide the fill."""
    spread = spread or {}
    chosen = [i for i, (w, n) in rates.items() if difficulty(w, n) == "frontier"]
    if len(chosen) >= min_tasks:
        return chosen, 0
    rate = {i: (w / n if n else 0.0) for i, (w, n) in rates.items()}
    rest = sorted((i for i in rates if i not in set(chosen)),   # stable: table order last
                  key=lambda i: (abs(rate[i] - 0.5), -spread.get(i, 0.0), rate[i]))
    fill = rest[:min_tasks - len(chosen)]
    return chosen + fill, len(fill)


def score_spread(trajectories) -> dict[str, float]:
    """task_id -> max - min verifier score over its policy samples (GRPO's main reward)."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for t in trajectories:
        if t.source == "policy" and t.verification is not None:
            v = t.verification.score
            lo[t.task_id] = min(v, lo.get(t.task_id, v))
            hi[t.task_id] = max(v, hi.get(t.task_id, v))
    return {i: hi[i] - lo[i] for i in hi}


def pool_summary(rates: dict[str, tuple[int, int]]) -> dict:
    """pass@1 (mean per-task success rate) and pass@k (share of tasks solved at least once in
    their k samples) of the probed tasks, and tasks per difficulty, computed and named as
    rounds 2-4 report their pools (`rounds.pool`)."""
    probed = {i: r for i, r in rates.items() if r[1]}
    return {"pass@1": mean_pass_rate(probed), "pass@k": any_pass_rate(probed),
            "difficulty": count_difficulties(difficulty(*r) for r in rates.values())}
