"""BFCL in the loop: play BFCL entries with a sampler backend, score them with BFCL's checkers.

Multi-turn (`play_multi_turn`). Each entry's user turns are played in order. Within a user
turn the model takes steps; every step goes through the project's one turn rule
(`data.turns.take_turn`), whose calls run in BFCL's own classes (`data.bfcl.BfclEnvironment`)
and whose results come back as tool messages. A step ends the user turn when it
  - answers without a call ("answer"): the next user turn starts, as in BFCL's runner;
  - fails to parse ("parse_error": malformed JSON, unknown or withheld function, arguments
    invalid against the declared schema) or is cut at its token budget or the context window
    ("token_limit"): it counts as a step with no calls and the next user turn starts. BFCL
    does the same with an output it cannot decode ("proceed to next turn"); the turn rule is
    stricter than BFCL's decoder (which skips a bad `<tool_call>` block and runs the rest):
    here a turn with any bad call runs none.
A user turn allows `STEP_LIMIT` (20) steps with calls; a 21st ends the rollout
("turn_limit"), which then has fewer turns than the entry and fails as `force_terminated`
(unless it was the last turn: BFCL's runner has the same quirk). A held-out turn of
miss_func offers its functions and sends BFCL's "I have updated some more functions" text.
The steps' executed call strings, empty steps dropped, go to BFCL's `multi_turn_checker`.

Single-turn (`play_single_turn`): the project's rollout driver with one assistant turn per
item; the calls of that turn are scored by BFCL's `ast_checker` (and, for comparison, by the
project's own `gates.ast_check`).

All live rollouts of a batch generate in one backend call per step. Seeds derive from
(seed, entry id, sample, turn, step).
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from data.bfcl import (ADDED_FUNCTIONS_PROMPT, CATEGORIES, MULTI_TURN, SINGLE_TURN, STEP_LIMIT,
                       BfclEnvironment, MultiTurnEntry, load_multi_turn, load_single, version)
from data.chatformat import parse, render
from data.envs.base import stable_int
from data.jsonl import write_text_atomic
from data.loaders import BfclItem, bfcl_task
from data.tasks import SYSTEM
from data.turns import Conversation, Step, take_turn
from engine.rollout import progress_bar, rollout
from engine.sampling.base import Backend, SamplingParams

from .ast_check import check
from .bfcl_report import format_report, summarise
from .bfcl_score import Score, score_multi_turn, score_single

MAX_CALLS_PER_STEP = 64  # BFCL sets none; a ground-truth turn holds up to 34 calls
STOP = ["<|im_end|>", "<tool_response>"]  # one request per step; a step may hold many calls
CONTEXT_FULL = "context_full"  # recorded finish of a step whose prompt filled the context


def params_for(max_tokens: int = 256, temperature: float = 0.0) -> SamplingParams:
    """Sampling settings for BFCL (greedy by default, as BFCL runs models)."""
    return SamplingParams(temperature=temperature, top_p=1.0 if temperature == 0 else 0.95,
                          max_tokens=max_tokens, stop=list(STOP))


def select(n: int, limit: int | None, seed: int | str, category: str) -> list[int]:
    """Indices of a seeded sample of `limit` items out of `n` (all of them without a limit),
    in file order."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(random.Random(f"{seed}:{category}").sample(range(n), limit))


# --------------------------------------------------------------------------- multi-turn

@dataclass
class Play:
    """One rollout of one multi-turn entry."""
    entry: MultiTurnEntry
    sample: int
    seed: int
    env: BfclEnvironment
    conv: Conversation
    turn: int = -1
    steps: list[list[list[str]]] = field(default_factory=list)   # per turn, per step: calls run
    finishes: list[list[str]] = field(default_factory=list)      # per turn, per step: why
    forced: bool = False
    completion_tokens: int = 0
    requests: int = 0

    @property
    def done(self) -> bool:
        return self.forced or self.turn >= len(self.entry.turns)

    def decoded(self) -> list[list[list[str]]]:
        """What BFCL's checker reads: per turn played, the steps that made calls."""
        return [[s for s in turn if s] for turn in self.steps]


@dataclass
class Result:
    id: str
    category: str
    sample: int
    score: Score
    calls: list = field(default_factory=list)   # multi-turn: decoded steps; single: the calls
    finishes: list = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    completion_tokens: int = 0
    project_valid: bool | None = None            # single-turn: the project's AST checker

    def to_dict(self) -> dict:
        return {"id": self.id, "category": self.category, "sample": self.sample,
                **self.score.to_dict(), "project_valid": self.project_valid,
                "calls": self.calls, "finishes": self.finishes,
                "completion_tokens": self.completion_tokens, "messages": self.messages}


def start(entry: MultiTurnEntry, sample: int = 0, seed: int = 0) -> Play:
    env = BfclEnvironment(entry)
    conv = Conversation([{"role": "system", "content": SYSTEM}], env.tools,
                        max_turns=STEP_LIMIT + 1, max_calls_per_turn=MAX_CALLS_PER_STEP)
    play = Play(entry, sample, stable_int(seed, entry.id, sample), env, conv)
    _next_turn(play)
    return play


def _next_turn(p: Play) -> None:
    """Open the next user turn (held-out functions first), or finish the entry."""
    p.turn += 1
    if p.done:
        return
    messages = p.entry.turns[p.turn]
    if p.turn in p.entry.held_out:
        p.env.offer(p.entry.held_out[p.turn])
        p.conv.tools = p.env.tools
        messages = [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
    if not any(m["role"] == "user" for m in messages):
        raise ValueError(f"{p.entry.id}: turn {p.turn} has no user message")
    for m in messages:
        if m["role"] == "user":
            p.conv.user(m["content"])
        else:
            p.conv.messages.append({"role": m["role"], "content": m["content"]})
    p.steps.append([])
    p.finishes.append([])


def advance_play(p: Play, text: str, *, cut: bool = False, why: str | None = None) -> Step:
    """One model step of `p`: the turn rule, BFCL execution, the user-turn bookkeeping.
    `why` overrides the recorded finish (a step that found the context full)."""
    n = len(p.env.calls)
    step = take_turn(p.conv, p.env, text, cut=cut)
    p.steps[-1].append(p.env.calls[n:])
    p.finishes[-1].append(why or step.finish or "call")
    if step.finish == "turn_limit":
        p.forced = True
    elif step.finish is not None:
        _next_turn(p)
    return step


def _generate(plays: list[Play], backend: Backend, params: SamplingParams,
              max_context: int, tokenizer) -> None:
    """One step of every play still going: one backend call for all of them."""
    asked, prompts, seeds, budgets = [], [], [], []
    for p in plays:
        prompt = render(p.conv.messages, p.conv.tools, add_generation_prompt=True)
        budget = params.max_tokens
        if tokenizer is not None:
            room = max_context - len(tokenizer.encode(prompt, add_special_tokens=False))
            if room <= 0:  # the context is full: a cut step
                advance_play(p, "", cut=True, why=CONTEXT_FULL)
                continue
            budget = min(budget, room)
        asked.append(p)
        prompts.append(prompt)
        seeds.append(stable_int(p.seed, p.turn, len(p.steps[-1]), mod=2**31 - 1))
        budgets.append(budget)
    if not asked:
        return
    req = SamplingParams(temperature=params.temperature, top_p=params.top_p,
                         max_tokens=max(budgets), stop=list(params.stop))
    outs = backend.generate(prompts, req, seeds,
                            conversations=[(p.conv.messages, p.conv.tools) for p in asked])
    for p, c, budget in zip(asked, outs, budgets):
        ids, text, cut = list(c.token_ids), c.text, c.finish_reason == "length"
        if len(ids) > budget:  # this row had less room than the shared request
            ids, cut = ids[:budget], True
            if tokenizer is not None:
                text = tokenizer.decode(ids, skip_special_tokens=True)
        p.completion_tokens += len(ids)
        p.requests += 1
        advance_play(p, text, cut=cut)


def finish(p: Play, keep_messages: bool = True) -> Result:
    """Release the play's BFCL instances and score it with BFCL's checker."""
    p.env.close()
    score = score_multi_turn(p.entry, p.decoded())
    return Result(p.entry.id, p.entry.category, p.sample, score, p.decoded(), p.finishes,
                  p.conv.messages if keep_messages else [], p.completion_tokens)


def play_multi_turn(entries: list[MultiTurnEntry], backend: Backend, *, k: int = 1,
                    seed: int = 0, params: SamplingParams | None = None,
                    max_context_tokens: int = 8192, batch_size: int = 32, tokenizer=None,
                    keep_messages: bool = True, progress: bool = False) -> list[Result]:
    """k rollouts of every entry, scored; at most `batch_size` hold BFCL instances at once.
    `progress`: a bar that counts finished rollouts (an entry takes minutes on a CPU)."""
    params = params or params_for()
    tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
    todo = [(e, s) for e in entries for s in range(k)]
    results: list[Result] = []
    bar = progress_bar(len(todo), progress, f"bfcl[{entries[0].category if entries else ''}]")
    try:
        for b in range(0, len(todo), batch_size):
            plays = [start(e, s, seed) for e, s in todo[b:b + batch_size]]
            try:
                active = [p for p in plays if not p.done]
                while active:
                    _generate(active, backend, params, max_context_tokens, tokenizer)
                    still = [p for p in active if not p.done]
                    if bar is not None:
                        bar.update(len(active) - len(still))
                    active = still
            finally:
                results += [finish(p, keep_messages) for p in plays]
    finally:
        if bar is not None:
            bar.close()
    return results


# -------------------------------------------------------------------------- single-turn

def play_single_turn(items: list[BfclItem], backend: Backend, *, k: int = 1, seed: int = 0,
                     params: SamplingParams | None = None, max_context_tokens: int = 8192,
                     tokenizer=None, progress: bool = False) -> list[Result]:
    """k samples of every item through the project's rollout driver (one assistant turn),
    scored by BFCL's `ast_checker`."""
    params = params or params_for()
    tasks = [bfcl_task(it) for it in items]
    trajs, _ = rollout(tasks, backend, k=k, round=seed, params=params,
                       max_context_tokens=max_context_tokens, progress=progress,
                       tokenizer=tokenizer, max_calls_per_turn=MAX_CALLS_PER_STEP)
    by_task = {(t.task_id, t.sample): t for t in trajs}
    results = []
    for it, task in zip(items, tasks):
        for s in range(k):
            traj = by_task[(task.id, s)]
            first = next((m for m in traj.messages if m["role"] == "assistant"), None)
            calls = parse(first.get("content") or "", None).calls if first else []
            score = score_single(it, calls)
            mine = (not calls) if it.ground_truth is None else \
                check(calls, it.ground_truth, task.tools).valid
            results.append(Result(it.id, it.category, s, score,
                                  [{"name": c.name, "arguments": c.arguments} for c in calls],
                                  [traj.finish], traj.messages, traj.completion_tokens, mine))
    return results


# ---------------------------------------------------------------------------- evaluation

def parse_categories(spec: str | list[str]) -> list[str]:
    """`"all"`, `"single_turn"`, `"multi_turn"` or a comma list of category names."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for name in (n.strip() for n in names if n.strip()):
        group = {"all": CATEGORIES, "single_turn": SINGLE_TURN, "multi_turn": MULTI_TURN}
        for c in group.get(name, (name,)):
            if c not in CATEGORIES:
                raise ValueError(f"unknown BFCL category {c!r}; choose from "
                                 f"{', '.join(CATEGORIES)} (or all, single_turn, multi_turn)")
            if c not in out:
                out.append(c)
    return out


def run_category(category: str, backend: Backend, *, limit: int | None = None, seed: int = 0,
                 k: int = 1, params: SamplingParams | None = None,
                 max_context_tokens: int = 8192,
                 progress: bool = False) -> tuple[list[Result], float, int]:
    """One category's seeded selection, played and scored: (results, wall s, n items)."""
    t0 = time.perf_counter()
    if category in MULTI_TURN:
        entries = load_multi_turn(category)
        chosen = [entries[i] for i in select(len(entries), limit, seed, category)]
        results = play_multi_turn(chosen, backend, k=k, seed=seed, params=params,
                                  max_context_tokens=max_context_tokens, progress=progress)
    else:
        items = load_single(category)
        chosen = [items[i] for i in select(len(items), limit, seed, category)]
        results = play_single_turn(chosen, backend, k=k, seed=seed, params=params,
                                   max_context_tokens=max_context_tokens, progress=progress)
    return results, time.perf_counter() - t0, len(chosen)


def evaluate_bfcl(backend: Backend, categories: list[str], *, model: str = "?",
                  limit: int | None = None, seed: int = 0, k: int = 1,
                  params: SamplingParams | None = None, max_context_tokens: int = 8192,
                  out_dir: str | Path | None = None, progress: bool = False) -> dict:
    """Every category in turn; writes `<category>.jsonl` (one scored rollout a line),
    `report.json` and `report.md` to `out_dir` when given, after each category. Returns the
    report."""
    params = params or params_for()
    report = {"bfcl_eval": version(), "model": model, "backend": getattr(backend, "name", "?"),
              "k": k, "seed": seed, "limit": limit, "max_tokens": params.max_tokens,
              "temperature": params.temperature, "max_context_tokens": max_context_tokens,
              "categories": []}
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for category in categories:
        results, wall, n_items = run_category(category, backend, limit=limit, seed=seed, k=k,
                                              params=params,
                                              max_context_tokens=max_context_tokens,
                                              progress=progress)
        report["categories"].append(summarise(category, results, wall, n_items))
        if out is not None:  # after every category: a kill keeps the categories done
            write_text_atomic(out / f"{category}.jsonl", "".join(
                json.dumps(r.to_dict(), ensure_ascii=False, default=str) + "\n"
                for r in results))
            write_text_atomic(out / "report.json", json.dumps(report, indent=1))
            write_text_atomic(out / "report.md", "```\n" + format_report(report) + "\n```\n")
    return report


def evaluate_model_bfcl(cfg, model_dir: str | Path, categories: str | list[str], *,
                        limit: int | None = None, seed: int = 0,
                        out_dir: str | Path | None = None) -> dict:
    """`pipeline eval MODEL --bfcl ...`: open the configured sampler backend on `model_dir`,
    evaluate, close. Greedy, `canaries.max_new_tokens` per step, `sampler.max_context_tokens`
    of context (passed on as vLLM's `max_model_len` / llama.cpp's `n_ctx` unless set)."""
    from engine.settings import ConfigError
    from engine.sampling import default_backend, make_backend
    try:
        names = parse_categories(categories)
    except ValueError as err:
        raise ConfigError(f"--bfcl: {err}") from None
    context = cfg.sampler.max_context_tokens
    name = default_backend() if cfg.sampler.backend == "auto" else cfg.sampler.backend
    options = dict(cfg.sampler.options)
    if name == "vllm":
        options.setdefault("max_model_len", context)
    elif name == "llama_cpp":
        options.setdefault("n_ctx", context)
    backend = make_backend(name, model_dir, **options)
    try:
        return evaluate_bfcl(backend, names, model=str(model_dir), limit=limit, seed=seed,
                             params=params_for(cfg.canaries.max_new_tokens),
                             max_context_tokens=context, out_dir=out_dir, progress=True)
    finally:
        backend.close()
