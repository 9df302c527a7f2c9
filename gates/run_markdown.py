"""`pipeline report RUN --markdown FILE`: a run's results as a file under docs/results/, with
the command that wrote it, when, on which machine, and how the CPU was shared. The tables are
the ones `pipeline report` prints, plus the per-side metrics of canaries that score each item
on one side only (many_tools: `calls` over items with a fitting tool, `abstentions` over the
others), which the summary's primary metric folds together, and the same two sides per
request domain (a model that decides by the request's domain, not by the offered tools, shows
here: every request of one domain called, every one of another declined)."""
from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

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
    """Per gated round and request domain, the candidate's `canary` items from the gate's
    rollouts: items with a fitting tool, how many got the right call and how many no call;
    items with none, how many were rightly declined."""
    table = [["round", "domain", "call items", "right call", "no call", "no-call items",
              "declined"]]
    for n, d, _ in round_reports(run_dir):
        path = d / "gate" / "candidate" / "rollouts.jsonl"
        if not path.exists():
            continue
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
        with path.open() as f:
            for line in f:
                r = json.loads(line) if line.strip() else {}
                if f"-{canary}-" not in r.get("task_id", ""):
                    continue
                c = counts[r["domain"]]
                called = any(m.get("role") == "tool" for m in r["messages"])
                ok = bool((r.get("verification") or {}).get("success"))
                if r["kind"] == "irrelevance":             # no tool fits: declining is right
                    c[3] += 1
                    c[4] += ok
                else:
                    c[0] += 1
                    c[1] += ok
                    c[2] += not called
        for dom, c in sorted(counts.items()):
            table.append([f"{n} {d.name.split('-', 2)[-1]}", dom, *map(str, c)])
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
                          ("many_tools by the request's domain (candidates)", domain_table(run)),
                          ("The shipped model against the base", final_vs_base_table(run))):
        if text:
            lines += ["", f"## {heading}", "", "```text", text, "```"]
    # the run's own absolute path (promoted.json records one) reads as the run given, so the
    # page names no machine's folders
    return "\n".join(lines).replace(str(run.resolve()), str(run_dir)) + "\n"
