"""The multi-turn rollout driver: many trajectories at once, tools executed between turns.

Each step, every live trajectory of the batch generates in ONE backend call. A completion
that stops on `</tool_call>` continues the same assistant turn (prompt + text so far; prefix
caching makes that cheap) so parallel calls survive, up to `max_calls_per_turn`. A finished
turn goes to the one turn rule (`data.turns.take_turn`): it ends the trajectory ("answer",
"parse_error", "turn_limit") or runs the calls in the task's environment and continues. A
prompt over `max_context_tokens` or a turn cut by `max_tokens` is a cut turn ("token_limit").

Seeds derive from (round, task id, sample); a request's seed from (that seed, turn, piece), so
the same tasks give the same trajectories wherever the backend is deterministic. With `out`,
each batch's trajectories are appended as it finishes and a rerun skips what is on disk: a
killed run loses at most the batch in flight.

Per trajectory: `completion_tokens` = all sampled ids, `prompt_tokens` = the longest prompt sent
(the context reached before the last request), `sampler.requests` = backend requests made.

    trajectories, stats = rollout(tasks, make_backend("vllm", model), k=4, round=4,
                                  out=run_dir / "rollouts.jsonl")
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from data.chatformat import render
from data.environment import DomainEnvironment, Environment
from data.envs.base import stable_int
from data.jsonl import Appender, read_all, repair_torn_tail
from data.trajectory import Task, Trajectory
from data.turns import MAX_CALLS_PER_TURN, Conversation, take_turn
from data.verify import verify

from .sampling.base import CALL_STOP, Backend, SamplingParams


@dataclass
class RolloutStats:
    trajectories: int = 0            # generated in this call (resumed rows not counted)
    resumed: int = 0                 # read back from `out` and skipped
    generated_tokens: int = 0
    requests: int = 0
    wall_s: float = 0.0
    backend_s: float = 0.0           # time inside backend.generate
    driver_overhead_share: float = 0.0  # (wall - backend) / wall: parsing, tools, bookkeeping, IO
    turns: int = 0
    successes: int = 0
    finish: dict[str, int] = field(default_factory=dict)
    batches: list[dict] = field(default_factory=list)  # one per backend call

    @property
    def trajectories_per_s(self) -> float:
        return self.trajectories / self.wall_s if self.wall_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "trajectories_per_s": round(self.trajectories_per_s, 4),
                "tokens_per_s": round(self.tokens_per_s, 3)}


@dataclass
class _Live:
    """One trajectory in flight."""
    task: Task
    sample: int
    seed: int
    env: Environment
    conv: Conversation
    turn_text: str = ""
    turn_ids: list[int] = field(default_factory=list)
    turn_calls: int = 0
    pieces: int = 0
    turn_token_ids: list[list[int]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0

    @property
    def messages(self) -> list[dict]:
        return self.conv.messages

    @property
    def finish(self) -> str | None:
        return self.conv.finish

    @property
    def turns(self) -> int:
        return len(self.turn_token_ids)


def trajectory_id(task_id: str, round: int, sample: int) -> str:
    return f"{task_id}#{round}.{sample}"


def rollout(tasks: list[Task], backend: Backend, *, k: int = 1, round: int = 0,
            params: SamplingParams | None = None, max_context_tokens: int = 4096,
            require_plan: bool = False, out: Path | None = None, progress: bool = True,
            batch_size: int = 64, tokenizer=None, max_calls_per_turn: int = MAX_CALLS_PER_TURN,
            first_sample: int = 0) -> tuple[list[Trajectory], RolloutStats]:
    """Sample `k` trajectories per task; returns them (resumed + new) and the run's stats.

    Samples are numbered `first_sample` .. `first_sample + k - 1` (ids and seeds derive from
    the number), so a second call that tops up a task draws new samples, not the first ones.

    `tokenizer` (or the backend's own `.tokenizer`) lets the driver check the context limit
    before a request; without one the limit is checked on the prompt size the backend reports.
    """
    params = params or SamplingParams()
    tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
    stats = RolloutStats()
    old: list[Trajectory] = []
    if out is not None and Path(out).exists():
        repair_torn_tail(Path(out))
        old = read_all(out, Trajectory)
    done = {(t.task_id, t.sample) for t in old}
    stats.resumed = len(old)
    todo = [(t, s) for t in tasks for s in range(first_sample, first_sample + k)
            if (t.id, s) not in done]
    bar = progress_bar(len(todo), progress, f"rollout[{getattr(backend, 'name', 'backend')}]")
    new: list[Trajectory] = []
    start = time.perf_counter()
    writer = Appender(out) if out is not None else None
    try:
        for b in range(0, len(todo), batch_size):
            live = [_start(t, s, round, max_calls_per_turn) for t, s in todo[b:b + batch_size]]
            finished = _run_batch(live, backend, params, max_context_tokens, tokenizer,
                                  max_calls_per_turn, stats, bar)
            for lv in finished:
                traj = _trajectory(lv, round, params, backend, require_plan)
                if writer is not None:
                    writer.write(traj)
                new.append(traj)
    finally:
        if writer is not None:
            writer.close()
        if bar is not None:
            bar.close()
    stats.wall_s = time.perf_counter() - start
    stats.trajectories = len(new)
    stats.generated_tokens = sum(t.completion_tokens for t in new)
    stats.turns = sum(t.turns for t in new)
    stats.successes = sum(t.success for t in new)
    stats.finish = dict(Counter(t.finish for t in new))
    stats.driver_overhead_share = (max(stats.wall_s - stats.backend_s, 0.0) / stats.wall_s
                                   if stats.wall_s else 0.0)
    return old + new, stats


def progress_bar(total: int, on: bool, desc: str):
    """A tqdm bar over `total` rollouts, or None when off or empty."""
    if not on or total == 0:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="traj", dynamic_ncols=True)


def _start(task: Task, sample: int, round: int, max_calls: int) -> _Live:
    return _Live(task=task, sample=sample, seed=stable_int(round, task.id, sample),
                 env=DomainEnvironment.for_task(task),
                 conv=Conversation.for_task(task, max_calls_per_turn=max_calls))


def _run_batch(live: list[_Live], backend: Backend, params: SamplingParams,
               max_context: int, tokenizer, max_calls: int, stats: RolloutStats,
               bar) -> list[_Live]:
    """Step all trajectories of one batch until every one has finished."""
    active = list(live)
    while active:
        prompts, convs, seeds, step_params, asked = [], [], [], [], []
        for lv in active:
            prompt = render(lv.messages, lv.task.tools, add_generation_prompt=True) + lv.turn_text
            budget = params.max_tokens - len(lv.turn_ids)
            if budget <= 0:  # the turn used its whole budget and stopped cleanly on a call
                _end_turn(lv, cut=False)
                if lv.finish is None:
                    prompt = render(lv.messages, lv.task.tools, add_generation_prompt=True)
                    budget = params.max_tokens
                else:
                    continue
            if tokenizer is not None:
                room = max_context - len(tokenizer.encode(prompt, add_special_tokens=False))
                if room <= 0:
                    _end_turn(lv, cut=True)
                    continue
                budget = min(budget, room)
            prompts.append(prompt)
            convs.append((lv.messages, lv.task.tools))
            seeds.append(stable_int(lv.seed, lv.turns, lv.pieces, mod=2**31 - 1))
            step_params.append(budget)
            asked.append(lv)
        if asked:
            # One call per step; rows share one max_tokens (the largest budget) and each row
            # is cut back to its own budget below.
            p = SamplingParams(temperature=params.temperature, top_p=params.top_p,
                               max_tokens=max(step_params), stop=list(params.stop))
            t0 = time.perf_counter()
            completions = backend.generate(prompts, p, seeds, conversations=convs)
            dt = time.perf_counter() - t0
            stats.backend_s += dt
            stats.requests += len(prompts)
            n_tok = sum(len(c.token_ids) for c in completions)
            stats.batches.append({"prompts": len(prompts), "generated_tokens": n_tok,
                                  "seconds": round(dt, 4),
                                  "tokens_per_s": round(n_tok / dt, 2) if dt else 0.0})
            for lv, c, budget in zip(asked, completions, step_params):
                _advance(lv, c, budget, max_context, max_calls, tokenizer)
        still = []
        for lv in active:
            if lv.finish is None:
                still.append(lv)
            else:
                lv.env.close()
                if bar is not None:
                    bar.update(1)
        active = still
    return live


def _advance(lv: _Live, c, budget: int, max_context: int, max_calls: int,
             tokenizer) -> None:
    """Fold one completion into its trajectory; end or continue the turn."""
    ids, text, cut = list(c.token_ids), c.text, c.finish_reason == "length"
    if len(ids) > budget:  # this row had less room than the shared request: cut it back
        ids, cut = ids[:budget], True
        if tokenizer is not None:
            text = tokenizer.decode(ids, skip_special_tokens=True)
    lv.turn_text += text
    lv.turn_ids += ids
    lv.pieces += 1
    lv.requests += 1
    lv.completion_tokens += len(ids)
    lv.prompt_tokens = max(lv.prompt_tokens, c.prompt_tokens)
    if cut or (c.prompt_tokens and c.prompt_tokens + len(ids) > max_context):
        _end_turn(lv, cut=True)
        return
    if c.stop_reason == CALL_STOP and lv.turn_calls < max_calls:
        # keep generating the same assistant turn; one piece past the limit lets the rule
        # see a turn that makes too many calls, as a single-request generator would
        lv.turn_calls += 1
        return
    _end_turn(lv, cut=False)


def _end_turn(lv: _Live, cut: bool) -> None:
    """Hand the finished (or cut) turn to the turn rule; keep its sampled ids beside it."""
    text = lv.turn_text
    if text or not cut:  # the rule appends a cut turn only when it said something
        lv.turn_token_ids.append(lv.turn_ids)
    lv.turn_text, lv.turn_ids, lv.turn_calls, lv.pieces = "", [], 0, 0
    take_turn(lv.conv, lv.env, text, cut=cut)


def _trajectory(lv: _Live, round: int, params: SamplingParams, backend: Backend,
                require_plan: bool) -> Trajectory:
    task = lv.task
    v = verify(task, lv.messages, require_plan=require_plan, finish=lv.finish)
    return Trajectory(
        id=trajectory_id(task.id, round, lv.sample), task_id=task.id, domain=task.domain,
        kind=task.kind, round=round, sample=lv.sample, seed=lv.seed, source="policy",
        messages=lv.messages, tools=task.tools, turn_token_ids=lv.turn_token_ids,
        finish=lv.finish, parse_errors=lv.conv.parse_errors, prompt_tokens=lv.prompt_tokens,
        completion_tokens=lv.completion_tokens, turns=lv.turns,
        sampler={"backend": getattr(backend, "name", "?"), "temperature": params.temperature,
                 "top_p": params.top_p, "max_tokens": params.max_tokens,
                 "requests": lv.requests},
        verification=v)
