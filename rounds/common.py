"""Steps every round recipe is made of: tasks, samples, oracle/teacher traces, accept, train.

Each step checks the run store first and records itself done only after its output file was
renamed into place, so a recipe re-run after a kill skips straight to the unfinished step.
The work of each step is timed (`engine.timing`: tasks, sampling, filtering, training) after
that check, so a skipped step keeps the time it recorded when it ran.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from data import filters, jsonl, tasks as taskgen
from data.taskfile import load_task_files
from data.teacher import TeacherTraces, load_teacher
from data.trajectory import Task, Trajectory
from data.verify import verify
from engine import timing
from .settings import RoundSettings

RunConfig = Any  # the run config (pipeline.config.RunConfig): sampler, canaries, seed
from engine.runstore import RunStore
from engine.sampling import release_engine
from engine.sampling.base import SamplingParams

log = logging.getLogger("toolsmith")


class NothingAccepted(RuntimeError):
    """No trajectory passed the filters: the round has nothing to train on."""


@dataclass
class Candidate:
    """What a round hands to the uniform tail: the trained model and the round's numbers."""
    model_dir: Path
    stats: dict = field(default_factory=dict)


@dataclass
class RoundContext:
    cfg: RunConfig
    settings: RoundSettings
    store: RunStore
    number: int
    name: str
    start_model: Path                        # the promoted model this round starts from
    decontaminator: filters.Decontaminator
    open_backend: Callable                   # (model_dir) -> context manager yielding a Backend
    progress: bool = True
    stats: dict = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return self.store.round_dir(self.number, self.name)

    def step_done(self, step: str) -> bool:
        return self.store.done(self.number, step)

    def mark(self, step: str, **info) -> None:
        self.store.mark(self.number, step, info)
        self.stats.setdefault("steps", {})[step] = info


def make_tasks(ctx: RoundContext, step: str = "tasks", namespace: str | None = None,
               kinds: dict[str, int] | None = None,
               context_tokens: list[int] | None = None) -> list[Task]:
    """Generate the round's tasks and read its task files (`task_files`), all
    decontaminated against every evaluation prompt (built-in canaries, canary files, BFCL;
    drops counted per source in the step's `decontaminated_by`). Long-context tasks are
    split over `context_tokens` (default: the settings' `context_tokens`).

    Domains cycle task by task (`domain_cycle`). Generators draw more items than asked when
    some collide with a canary, so the round gets the count it was configured for; a task
    file's row is used as written, or dropped when it collides."""
    path = ctx.dir / f"{step}.jsonl"
    if ctx.step_done(step):
        return jsonl.read_all(path, Task)
    with timing.section("tasks"):
        out, dropped, info = _generate_tasks(ctx, namespace, kinds, context_tokens)
    jsonl.write_atomic(path, out)
    ctx.mark(step, tasks=len(out), decontaminated=dropped, **info)
    log.info("%s: %d tasks (%d dropped by decontamination: %s)", step, len(out), dropped,
             info.get("decontaminated_by") or "none")
    return out


SLOT_TRIES = 20  # draws for one slot's domain before the slot passes to the next domain


def _generate_tasks(ctx: RoundContext, namespace: str | None, kinds: dict[str, int] | None,
                    context_tokens: list[int] | None) -> tuple[list[Task], int, dict]:
    """(tasks, how many decontamination dropped, counts from task files) for `make_tasks`."""
    s, ns = ctx.settings, namespace or f"round-{ctx.number}"
    out, dropped, by_source, short = [], 0, Counter(), Counter()
    lengths = context_tokens or getattr(s, "context_tokens", [2000])
    for kind, n in (kinds or s.tasks).items():
        buckets = lengths if kind == "long_context" else [None]
        for b, tokens in enumerate(buckets):
            want = n // len(buckets) + (1 if b < n % len(buckets) else 0)
            got, i, slot, tries = [], 0, 0, 0
            while len(got) < want and i < want * 20 + 50:
                # slot k draws from the k-th domain of the cycle until a clean task comes, so a
                # domain whose prompts collide keeps its share instead of ceding it to others
                domains = taskgen.domain_cycle(kind, slot, s.domains)
                t = taskgen.make(kind, i, split="train", namespace=f"{ns}-b{b}",
                                 domains=domains, context_tokens=tokens or 2000,
                                 offered_tools=s.offer_for(kind))
                i += 1
                hit = ctx.decontaminator.hit(t.prompt)
                if not hit:
                    got.append(t)
                    slot, tries = slot + 1, 0
                    continue
                dropped += 1
                by_source[hit.source] += 1
                tries += 1
                if tries == SLOT_TRIES:      # this domain's prompts are (nearly) all evaluated
                    short[f"{kind}@{t.domain}"] += 1
                    slot, tries = slot + 1, 0
            out += got
    info = {}
    if short:
        info["short"] = dict(short)
        log.warning("tasks: no clean task in %d draws for %s; other domains filled those "
                    "slots (a domain with few distinct requests: give it more wordings or "
                    "entities)", SLOT_TRIES,
                    ", ".join(f"{k} x{v}" for k, v in sorted(short.items())))
    files = getattr(s, "task_files", [])
    if files:  # validated when the config loaded; read again here, so an edit since fails now
        clean, report = filters.decontaminate(load_task_files(files), ctx.decontaminator,
                                              prompt_of=lambda t: t.prompt)
        out += clean
        dropped += report.seen - report.kept
        by_source.update(report.by_source)
        info["from_files"] = report.kept
    return out, dropped, {"decontaminated_by": dict(by_source), **info}


def oracle_trajectories(task_list: list[Task], round_no: int) -> list[Trajectory]:
    """Correct-by-construction demonstrations, verified like any other trajectory."""
    out = []
    for t in task_list:
        msgs = t.messages() + t.oracle
        out.append(Trajectory(
            id=f"{t.id}#oracle", task_id=t.id, domain=t.domain, kind=t.kind, round=round_no,
            source="oracle", messages=msgs, tools=t.tools, finish="answer",
            turns=sum(m["role"] == "assistant" for m in t.oracle),
            verification=verify(t, msgs, require_plan=True)))
    return out


def sample(ctx: RoundContext, task_list: list[Task], model_dir: Path, step: str = "rollouts",
           k: int | None = None, first_sample: int = 0, params: SamplingParams | None = None,
           require_plan: bool | None = None) -> list[Trajectory]:
    """k on-policy samples per task, streamed to `<step>.jsonl` (a kill loses one batch);
    numbered from `first_sample`, so a top-up of tasks sampled before draws new samples.
    `params` and `require_plan` default to the round's sampling keys."""
    from engine.rollout import rollout
    path = ctx.dir / f"{step}.jsonl"
    if ctx.step_done(step):
        return jsonl.read_all(path, Trajectory)
    s = ctx.settings
    params = params or SamplingParams(temperature=s.temperature, top_p=s.top_p,
                                      max_tokens=s.max_new_tokens)
    require_plan = s.require_plan if require_plan is None else require_plan
    with timing.section("sampling"):  # an engine start inside is timed as its own step
        with ctx.open_backend(model_dir) as backend:
            trajs, stats = rollout(task_list, backend, k=k or s.k, round=ctx.number,
                                   params=params,
                                   max_context_tokens=ctx.cfg.sampler.max_context_tokens,
                                   require_plan=require_plan, first_sample=first_sample,
                                   out=path, progress=ctx.progress)
    timing.add_tokens("sampling", stats.generated_tokens, stats.wall_s)
    info = stats.as_dict()
    ctx.mark(step, rollouts=len(trajs), successes=sum(t.success for t in trajs),
             generated_tokens=stats.generated_tokens,
             tokens_per_s=round(info.get("tokens_per_s", 0) or 0, 1))
    log.info("%s: %d rollouts, %d verified successes", step, len(trajs),
             sum(t.success for t in trajs))
    return trajs


def teacher_trajectories(ctx: RoundContext, task_list: list[Task]) -> list[Trajectory]:
    """Optional teacher traces: a Hermes / ShareGPT / OpenAI-messages file, every row checked
    as `teacher.verify` says (drops counted by reason, file and line, never raised), and/or
    an OpenAI-compatible endpoint (its rollouts are executed and verified like samples)."""
    t = ctx.settings.teacher
    if not (t.file or t.endpoint):
        return []
    with timing.section("teacher"):
        return _teacher_trajectories(ctx, task_list)


def _teacher_trajectories(ctx: RoundContext, task_list: list[Task]) -> list[Trajectory]:
    t = ctx.settings.teacher
    out: list[Trajectory] = []
    if t.file:
        traces = load_teacher(t.file, t.verify, task_list, round_no=ctx.number,
                              require_plan=ctx.settings.require_plan)
        record_teacher(ctx, traces)
        out += traces.kept
    if t.endpoint:
        from contextlib import closing

        from engine.rollout import rollout
        from engine.sampling import make_backend
        opts = {"base_url": t.endpoint, "mode": "chat"}
        if t.api_key_env:
            opts["api_key_env"] = t.api_key_env
        path = ctx.dir / "teacher.jsonl"
        with closing(make_backend("openai", t.model or "teacher", **opts)) as backend:
            trajs, _ = rollout(task_list, backend, k=t.k, round=ctx.number, out=path,
                               require_plan=ctx.settings.require_plan, progress=ctx.progress)
        for tr in trajs:
            tr.source = "teacher"
        out += trajs
    return out


def record_teacher(ctx: RoundContext, traces: TeacherTraces) -> None:
    """The teacher file's counts into the round's stats and state; every dropped row, named
    by file and line, into `teacher_dropped.txt`."""
    stats = traces.stats()
    if traces.dropped:
        drops = ctx.dir / "teacher_dropped.txt"
        jsonl.write_text_atomic(drops, "".join(f"{line}\n" for _, line in traces.dropped))
        stats["dropped_list"] = str(drops)
    ctx.stats["teacher"] = stats
    ctx.mark("teacher", read=stats["read"], kept=stats["kept"], dropped=stats["dropped"],
             verify=traces.mode, why=stats["why"], answer_unchecked=stats["answer_unchecked"])
    log.info("teacher %s (verify: %s): %d read, %d kept (%s), %d dropped %s", traces.source,
             traces.mode, stats["read"], stats["kept"], stats["kept_as"], stats["dropped"],
             stats["why"])
    if traces.dropped:
        log.warning("teacher: %d row(s) dropped, e.g. %s (all of them: %s)",
                    len(traces.dropped), traces.dropped[0][1], stats["dropped_list"])


def accept(ctx: RoundContext, rows: list[Trajectory], step: str = "accepted",
           balance: list[str] | None = None) -> list[Trajectory]:
    """rejection -> dedup -> decontamination -> distribution matching; reports go to stats."""
    path = ctx.dir / f"{step}.jsonl"
    if ctx.step_done(step):
        return jsonl.read_all(path, Trajectory)
    f = ctx.settings.filter
    with timing.section("filtering"):
        kept, r1 = filters.rejection(rows)
        kept, r2 = filters.dedup(kept)
        kept, r3 = filters.decontaminate(kept, ctx.decontaminator)
        kept, r4 = filters.distribution_match(kept, cap_per_task=f.cap_per_task,
                                              balance=balance or f.balance, max_rows=f.max_rows)
        jsonl.write_atomic(path, kept)
    reports = [r.as_dict() for r in (r1, r2, r3, r4)]
    by_source: dict[str, int] = {}
    for t in kept:
        by_source[t.source] = by_source.get(t.source, 0) + 1
    ctx.stats.setdefault("filters", {})[step] = reports
    ctx.mark(step, accepted=len(kept), seen=len(rows), by_source=by_source)
    log.info("%s: %d of %d trajectories accepted %s", step, len(kept), len(rows), by_source)
    if not kept:
        raise NothingAccepted(f"round {ctx.number}: no trajectory passed the filters "
                           f"({json.dumps(reports)}); add oracle/teacher data or more tasks")
    return kept


def train(ctx: RoundContext, accepted: list[Trajectory], base: Path, step: str = "train",
          out_dir: Path | None = None) -> Path:
    """LoRA SFT on the accepted set; returns the merged model directory."""
    from engine.training.sft import train_sft
    out_dir = out_dir or ctx.dir
    model_dir = out_dir / "model"
    if ctx.step_done(step):
        return model_dir
    with training_step():
        stats = train_sft(accepted, base, out_dir, ctx.settings.sft, progress=ctx.progress)
    if stats.get("tokens_seen"):
        timing.add_tokens("training", stats["tokens_seen"], stats.get("train_seconds", 0.0))
    log.info(f"{step}: SFT on {stats['rows_used']} rows, {stats['steps']} steps, loss "
             f"{_num(stats.get('loss_first_tenth'))} -> {_num(stats.get('loss_last_tenth'))} "
             "(means of the first and last tenth of steps), "
             f"{stats.get('tokens_per_s')} tokens/s in {stats.get('train_seconds')} s")
    ctx.stats.setdefault("training", {})[step] = stats
    ctx.mark(step, **{k: v for k, v in stats.items() if isinstance(v, (int, float, str))})
    return model_dir


def _num(x) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) else "-"


@contextmanager
def training_step():
    """Time the body as the `training` step, with no sampler engine alive: a kept engine is
    closed first, since training needs the memory (on a GPU, and for GRPO's own engine).
    Afterwards the memory training freed goes back to the OS before the next engine starts
    (measured: the process still held 14.4 GB after round 5's GRPO when the gate's vLLM
    engine started, and the kernel's OOM killer stopped the run)."""
    release_engine()
    try:
        with timing.section("training"):
            yield
    finally:
        return_freed_memory()


def return_freed_memory() -> None:
    """Collect garbage and hand the C heap's free pages back to the OS (glibc `malloc_trim`;
    a no-op where there is no glibc)."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
