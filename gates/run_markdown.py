"""`pipeline report RUN --markdown FILE`: a run's results as a file under docs/results/, with
the command that wrote it, when, on which machine, and how the CPU was shared. The tables are
the ones `pipeline report` prints, plus the per-side metrics of canaries that score each item
on one side only (many_tools: `calls` over items with a fitting tool, `abstentions` over the
others), which the summary's primary metric folds together, and the same two sides per
request domain (a model that decides by the request's domain, not by the offered tools, shows
here: every request of one domain called, every one of another declined)."""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from data import jsonl
from data.chatformat import parse
from data.trajectory import Trajectory
from engine.training.loss_summary import logged_losses, tenth_means

from .evaluate import EVAL_FILE, load_eval
from .report import (columns, detail_table, final_vs_base_table, machine_lines, round_reports,
                     summary_table)


def sides_table(run_dir: str | Path) -> str:
    """Per gated round and canary, each metric computed over part of the canary's items:
    baseline -> candidate, delta, paired SE, wins/losses/ties."""
    table = [["round", "canary", "metric", "n", "baseline", "candidate", "delta", "SE",
              "W/L/T"]]
    for n, d, rep in round_reports(run_dir):
        for name, c in rep.get("canaries", {}).items():
            for metric, cmp_ in c.get("comparisons", {}).items():
                if cmp_.get("n", c.get("n_items")) == c.get("n_items"):
                    continue                       # over every item: the summary has it
                table.append([f"{n} {d.name.split('-', 2)[-1]}", name, metric, str(cmp_["n"]),
                              f"{cmp_['baseline']:.3f}", f"{cmp_['candidate']:.3f}",
                              f"{cmp_['delta']:+.3f}", f"{cmp_['se']:.3f}",
                              f"{cmp_['wins']}/{cmp_['losses']}/{cmp_['ties']}"])
    return "\n".join(columns(table)) if len(table) > 1 else ""


def domain_table(run_dir: str | Path, canary: str = "many_tools") -> str:
    """Per gated round and request domain, the candidate's `canary` items, scored as the gate
    scored them (eval.json: `calls` on items with a fitting tool, `abstentions` on the
    others), with the domain and the first turn from the gate's rollouts: call items, right
    calls, first turns with no call; no-call items, right abstentions (means over k samples,
    summed)."""
    table = [["round", "domain", "call items", "right call", "no call", "no-call items",
              "declined"]]
    for n, d, _ in round_reports(run_dir):
        cand = d / "gate" / "candidate"
        if not (cand / "rollouts.jsonl").exists() or not (cand / EVAL_FILE).exists():
            continue
        items = load_eval(cand).get("suites", {}).get(canary, {}).get("items", {})
        domain, no_call = {}, defaultdict(list)
        for t in jsonl.read(cand / "rollouts.jsonl", Trajectory):
            if t.task_id in items:
                domain[t.task_id] = t.domain
                first = next((m for m in t.messages if m["role"] == "assistant"), None)
                no_call[t.task_id].append(not (first and parse(first.get("content") or "").calls))
        counts: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0, 0.0])
        for tid, dom in domain.items():
            c, score = counts[dom], items[tid]
            if "calls" in score:
                c[0] += 1
                c[1] += score["calls"]
                c[2] += sum(no_call[tid]) / len(no_call[tid])
            else:
                c[3] += 1
                c[4] += score.get("abstentions", 0.0)
        for dom, c in sorted(counts.items()):
            table.append([f"{n} {d.name.split('-', 2)[-1]}", dom, *(f"{v:g}" for v in c)])
    return "\n".join(columns(table)) if len(table) > 1 else ""


def training_table(run_dir: str | Path) -> str:
    """Per gated round, each training log under the round's directory: logged steps, the mean
    loss over the first and the last tenth of them (one step is noise), and the trainer's own
    tokens per second."""
    table = [["round", "log", "steps", "loss, first tenth", "loss, last tenth", "tok/s"]]
    for n, d, _ in round_reports(run_dir):
        for path in sorted(d.rglob("train_log.jsonl")):
            rows = list(jsonl.read(path))
            losses = logged_losses(rows)
            ends = tenth_means(losses)
            if ends is None:
                continue
            speed = next((r["train_tokens_per_second"] for r in reversed(rows)
                          if "train_tokens_per_second" in r), None)
            table.append([f"{n} {d.name.split('-', 2)[-1]}", str(path.relative_to(d)),
                          str(len(losses)), f"{ends[0]:.4f}", f"{ends[1]:.4f}",
                          f"{speed:.1f}" if speed else "-"])
    return "\n".join(columns(table)) if len(table) > 1 else ""


def run_markdown(run_dir: str | Path, command: str, title: str | None = None,
                 note: str | None = None) -> str:
    run = Path(run_dir)
    lines = [f"# {title or 'Run ' + run.name}", "", f"- command: `{command}`",
             f"- written: {time.strftime('%Y-%m-%d %H:%M')}",
             *[f"- {m}" for m in machine_lines(run)], *([f"- note: {note}"] if note else []),
             "", "```text", summary_table(run), "```"]
    for heading, text in (("Gates in detail", detail_table(run)),
                          ("One side each (metrics over part of a canary's items)",
                           sides_table(run)),
                          ("Training", training_table(run)),
                          ("many_tools by the request's domain (candidates)", domain_table(run)),
                          ("The shipped model against the base", final_vs_base_table(run))):
        if text:
            lines += ["", f"## {heading}", "", "```text", text, "```"]
    # the run's own absolute path (promoted.json records one) reads as the run given, so the
    # page names no machine's folders
    return "\n".join(lines).replace(str(run.resolve()), str(run_dir)) + "\n"
