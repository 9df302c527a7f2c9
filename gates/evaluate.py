"""Evaluate a model on canary suites: k rollouts per item, per-item metric values, aggregates.

Every metric is a per-item number in [0, 1] (an average over the item's k samples, or 0/1 for
pass@k), so the paired statistics of the gate treat all canaries alike. Rollouts always use
the same seed round (`SEED_ROUND`): baseline and candidate see the same sampling seeds per
item and sample, which makes their per-item differences less noisy.

Writes `out_dir/eval.json` (aggregates and the per-item table) and `out_dir/rollouts.jsonl`.
A finished eval.json for the same suites, k and sampling settings is reused as it is, so a
baseline evaluated once serves every later round. When the suites change but the sampling
settings do not (a round whose gate asks for a larger target canary), the trajectories of
every item already rolled out with those settings are reused from rollouts.jsonl (matched by
the item's content hash) and only the new items are sampled; with nothing new to sample no
engine starts at all (`missing_rollouts`). Suites scored outside the rollout driver (BFCL
categories, by BFCL's own checkers: `External`) join the same eval.json, played on the same
backend; their hashes count for reuse like the built-in ones, and a suite already in the old
eval.json with the same hash is carried over rather than played again.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from data.chatformat import CALL_OPEN, parse
from data.jsonl import read_all, repair_torn_tail, write_atomic, write_text_atomic
from data.trajectory import Task, Trajectory
from data.verify import first_call_metrics, replay
from engine.rollout import rollout
from engine.sampling.base import Backend, SamplingParams

from .ast_check import check
from .canaries import Suite

SEED_ROUND = 0
EVAL_FILE = "eval.json"


@dataclass(frozen=True)
class External:
    """Suites the rollout driver does not score (BFCL categories): their content hashes, known
    before any engine starts (for `finished`), and `run(backend, names)`, which evaluates the
    named ones on the open backend -> suite name -> suite table in `score_suite`'s shape."""
    hashes: dict[str, str]
    run: Callable[[Backend, list[str]], dict[str, dict]]


@dataclass
class EvalResult:
    data: dict               # what eval.json holds (see `to_dict`)
    path: Path

    def to_dict(self) -> dict:
        return self.data

    def metric(self, suite: str, metric: str | None = None) -> float:
        s = self.data["suites"][suite]
        return s["metrics"][metric or s["primary"]]


# ------------------------------------------------------------------------- per-item scores

def _first_calls(traj: Trajectory) -> tuple[list, bool]:
    """Calls of the first assistant turn (parsed without schema checks) and whether it had one."""
    first = next((m for m in traj.messages if m["role"] == "assistant"), None)
    if first is None:
        return [], False
    turn = parse(first.get("content") or "", None)
    return turn.calls, bool(turn.calls) or CALL_OPEN in (first.get("content") or "")


def _no_call(task: Task, traj: Trajectory) -> float:
    """Answered without any tool call: the turn ended by itself (not cut at max_tokens), no
    call markup anywhere, and a non-empty final text."""
    if traj.finish != "answer":
        return 0.0
    said = [m.get("content") or "" for m in traj.messages if m["role"] == "assistant"]
    if not said or any(CALL_OPEN in s for s in said):
        return 0.0
    r = replay(traj.messages, task.tools)
    return float(not r.calls and bool(r.final))


def _bfcl(task: Task, traj: Trajectory, truth: list) -> dict[str, float]:
    calls, has = _first_calls(traj)
    gt_names = sorted(next(iter(g)) for g in truth)
    return {"exact": float(check(calls, truth, task.tools).valid),
            "args": float(check(calls, truth, task.tools, check_name=False).valid),
            "name": float(sorted(c.name for c in calls) == gt_names),
            "has_call": float(has)}


def score_item(suite: Suite, task: Task, trajs: list[Trajectory]) -> dict[str, float]:
    """Metric values of one item from its k trajectories (each value in [0, 1])."""
    if not trajs:
        raise ValueError(f"{suite.name}: item {task.id} has no trajectories")
    k = len(trajs)
    if suite.scorer in ("reasoning", "recovery", "multi_turn", "long_context"):
        ok = [float(t.success and (t.verification.checks.get("no_loop", True))) for t in trajs]
        return {suite.primary: sum(ok) / k, "pass@k": max(ok)}
    if suite.scorer == "irrelevance":
        return {"no_call": sum(_no_call(task, t) for t in trajs) / k}
    if suite.scorer == "many_tools":  # one side of the choice per item
        if task.gold_calls:
            v = sum(first_call_metrics(task, t.messages)["exact"] for t in trajs) / k
            return {"correct": v, "calls": v}
        v = sum(_no_call(task, t) for t in trajs) / k
        return {"correct": v, "abstentions": v}
    if suite.scorer == "single_turn":
        rows = [first_call_metrics(task, t.messages) for t in trajs]
    elif suite.scorer == "bfcl":
        rows = [_bfcl(task, t, suite.truth[task.id]) for t in trajs]
    else:
        raise ValueError(f"suite {suite.name}: unknown scorer {suite.scorer!r}")
    return {m: sum(r[m] for r in rows) / k for m in suite.metrics}


def score_suite(suite: Suite, trajectories: list[Trajectory], k: int) -> dict:
    """Per-item table and aggregates of one suite (the shape `gates.promote.decide` reads)."""
    by_task: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        by_task.setdefault(t.task_id, []).append(t)
    items, finish, tokens = {}, Counter(), 0
    for task in suite.items:
        trajs = sorted(by_task.get(task.id, []), key=lambda t: t.sample)[:k]
        if len(trajs) < k:
            raise ValueError(f"{suite.name}: item {task.id} has {len(trajs)} of {k} samples")
        items[task.id] = score_item(suite, task, trajs)
        finish.update(t.finish for t in trajs)
        tokens += sum(t.completion_tokens for t in trajs)
    metrics = {}
    for m in suite.metrics:  # over the items that carry the metric (many_tools: one side each)
        vals = [v[m] for v in items.values() if m in v]
        metrics[m] = sum(vals) / len(vals) if vals else 0.0
    return {**suite.describe(), "metrics": metrics, "items": items, "finish": dict(finish),
            "completion_tokens": tokens}


# ------------------------------------------------------------------------------ evaluation

def _sampling(k: int, params: SamplingParams, max_context: int) -> dict:
    """What decides an item's trajectories besides the item itself (JSON-normalised)."""
    return json.loads(json.dumps({"k": k, "params": asdict(params),
                                  "max_context_tokens": max_context, "seed_round": SEED_ROUND}))


def _settings(suites: list[Suite], k: int, params: SamplingParams, max_context: int,
              external: dict[str, str] | None = None) -> dict:
    return {**_sampling(k, params, max_context),
            "hashes": {**{s.name: s.hash for s in suites}, **(external or {})}}


def _task_hashes(suites: list[Suite]) -> dict[str, str]:
    """Task id -> sha256 of its content, over every item of `suites`; one id in two suites
    must be one task."""
    out: dict[str, str] = {}
    for s in suites:
        for t in s.items:
            h = hashlib.sha256(t.model_dump_json().encode()).hexdigest()
            if out.setdefault(t.id, h) != h:
                raise ValueError(f"task id {t.id} appears in two suites with different content")
    return out


def _reusable(out_dir: Path, k: int, params: SamplingParams, max_context: int,
              tasks: dict[str, str]) -> tuple[list[Trajectory], dict[str, str]]:
    """Trajectories in `out_dir/rollouts.jsonl` made with these sampling settings, and their
    items' content hashes: those of items in `tasks` (id -> content hash) whose content is
    unchanged, and those of other items (kept for a later, larger evaluation)."""
    marker, rollouts = out_dir / "settings.json", out_dir / "rollouts.jsonl"
    if not (rollouts.exists() and marker.exists()):
        return [], {}
    old = json.loads(marker.read_text())
    if {key: old.get(key) for key in ("k", "params", "max_context_tokens", "seed_round")} != \
            _sampling(k, params, max_context):
        return [], {}
    seen = old.get("tasks", {})
    repair_torn_tail(rollouts)
    keep = [t for t in read_all(rollouts, Trajectory)
            if t.task_id in seen and t.sample < k
            and tasks.get(t.task_id, seen[t.task_id]) == seen[t.task_id]]
    return keep, {t.task_id: seen[t.task_id] for t in keep}


def missing_rollouts(suites: list[Suite], *, k: int, params: SamplingParams,
                     out_dir: str | Path, max_context_tokens: int = 4096) -> int:
    """How many (item, sample) rollouts an evaluation of `suites` in `out_dir` still has to
    sample; 0 means it can be scored from disk, with no engine."""
    tasks = _task_hashes(suites)
    kept, _ = _reusable(Path(out_dir), k, params, max_context_tokens, tasks)
    have = {(t.task_id, t.sample) for t in kept}
    return sum((tid, s) not in have for tid in tasks for s in range(k))


def load_eval(path: str | Path) -> dict:
    """An eval.json (or the directory holding one) as a dict."""
    path = Path(path)
    path = path / EVAL_FILE if path.is_dir() else path
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no evaluation here; run the evaluation first") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg}); delete it to re-evaluate") from None


def previous_eval(out_dir: str | Path) -> dict:
    """The eval.json already in `out_dir` as a dict; {} when there is none."""
    path = Path(out_dir) / EVAL_FILE
    return load_eval(path) if path.exists() else {}


def finished(suites: list[Suite], *, k: int, params: SamplingParams, out_dir: str | Path,
             max_context_tokens: int = 4096,
             external: dict[str, str] | None = None) -> EvalResult | None:
    """The finished evaluation in `out_dir` when it was made with these very suites (and
    `external` suites: name -> hash), k and sampling settings; None otherwise. Callers check
    this before starting an engine."""
    path = Path(out_dir) / EVAL_FILE
    if not path.exists():
        return None
    old = load_eval(path)
    settings = _settings(suites, k, params, max_context_tokens, external)
    return EvalResult(old, path) if old.get("settings") == json.loads(json.dumps(settings)) else None


def evaluate(backend: Backend, suites: list[Suite], *, k: int, params: SamplingParams,
             out_dir: str | Path, max_context_tokens: int = 4096, progress: bool = False,
             meta: dict | None = None, reuse: bool = True,
             external: External | None = None) -> EvalResult:
    """Run every suite item k times through the rollout driver and score it; then the
    `external` suites on the same backend. eval.json is written once all are scored."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    names = [s.name for s in suites] + list(external.hashes if external else [])
    if len(set(names)) != len(names):
        raise ValueError(f"suite names must be unique, got {names}")
    out_dir = Path(out_dir)
    hashes = external.hashes if external else None
    settings = _settings(suites, k, params, max_context_tokens, hashes)
    path = out_dir / EVAL_FILE
    if reuse:
        done = finished(suites, k=k, params=params, out_dir=out_dir,
                        max_context_tokens=max_context_tokens, external=hashes)
        if done is not None:
            return done

    hashes_by_id = _task_hashes(suites)
    tasks = {t.id: t for s in suites for t in s.items}  # one rollout over all suites
    # rollouts.jsonl resumes a killed evaluation and serves a later one with more items, but
    # only trajectories made with the same sampling settings of items with the same content
    marker, rollouts = out_dir / "settings.json", out_dir / "rollouts.jsonl"
    out_dir.mkdir(parents=True, exist_ok=True)
    keep, kept_hashes = _reusable(out_dir, k, params, max_context_tokens, hashes_by_id)
    old_eval = previous_eval(out_dir)
    write_atomic(rollouts, keep)
    write_text_atomic(marker, json.dumps({**settings, "tasks": {**kept_hashes, **hashes_by_id}},
                                         indent=1))
    start = time.perf_counter()
    trajs, stats = rollout(list(tasks.values()), backend, k=k, round=SEED_ROUND, params=params,
                           max_context_tokens=max_context_tokens, require_plan=False,
                           out=rollouts, progress=progress)
    scored = {s.name: score_suite(s, trajs, k) for s in suites}
    if external:
        scored.update(_external(external, backend, old_eval))
    wall = time.perf_counter() - start
    data = {"settings": settings, "meta": dict(meta or {}), "backend": getattr(backend, "name", "?"),
            "wall_s": round(wall, 3), "rollout": {"generated_tokens": stats.generated_tokens,
                                                  "resumed": stats.resumed,
                                                  "finish": stats.finish},
            "k": k, "suites": scored}
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False))
    return EvalResult(data, path)


def _external(external: External, backend: Backend, old_eval: dict) -> dict[str, dict]:
    """The external suites' tables: carried over from `old_eval` where the hash matches,
    played on `backend` otherwise."""
    todo = external_todo(external, old_eval)
    old = old_eval.get("suites", {})
    carried = {n: old[n] for n in external.hashes if n not in todo}
    more = external.run(backend, todo) if todo else {}
    wrong = [n for n, t in more.items() if external.hashes.get(n) != t.get("hash")]
    if wrong or set(more) != set(todo):
        raise ValueError(f"external suites differ from the ones announced: got "
                         f"{sorted(more)}, expected {sorted(todo)}"
                         + (f"; hashes differ for {wrong}" if wrong else ""))
    return {**carried, **more}


def external_todo(external: External | None, old_eval: dict) -> list[str]:
    """The external suites `old_eval` (an eval.json's dict, {} if none) does not hold with
    their announced hash: the ones an evaluation has to play."""
    if external is None:
        return []
    old = old_eval.get("suites", {})
    return [n for n, h in external.hashes.items() if old.get(n, {}).get("hash") != h]
