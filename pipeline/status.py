"""`pipeline status RUN`: each round's steps, counts, gate verdict, where its time went
(seconds and share per step, engine starts, tokens/s), and the promoted model."""
from __future__ import annotations

from pathlib import Path

import yaml

from gates.report import step_notes
from engine import timing
from pipeline.recipes import BUILTIN, ordered
from engine.runstore import STEPS, RunStore


def round_names(run: Path) -> list[str]:
    """The run's rounds in order, from the config it ran with (`run.yaml`)."""
    cfg = run / "run.yaml"
    rounds = (yaml.safe_load(cfg.read_text()) or {}).get("rounds") if cfg.exists() else None
    return ordered(list(rounds or {})) if rounds else list(BUILTIN)


def status_text(run: Path) -> str:
    if not (run / "state.json").exists():
        return f"{run}: no run here yet (no state.json)"
    store = RunStore(run)
    state = store.state()
    lines = [f"run {run}"]
    for n, name in enumerate(round_names(run), 1):
        r = state["rounds"].get(str(n))
        if not r:
            lines.append(f"  {n} {name:<13} pending")
            continue
        done = r.get("done", {})
        marks = " ".join(("x" if s in done else ".") + s for s in STEPS if s != "promote")
        counts = []
        for step, key in (("tasks", "tasks"), ("rollouts", "rollouts"), ("accepted", "accepted")):
            if step in done and key in done[step]:
                counts.append(f"{key}={done[step][key]}")
        verdict = r.get("status", "running")
        wall = f" {r['wall_s']:.0f}s" if "wall_s" in r else ""
        lines.append(f"  {n} {name:<13} {verdict:<9}{wall:>6}  {marks}  {' '.join(counts)}")
        t = done.get("teacher")
        if t:
            why = ", ".join(f"{k} {v}" for k, v in t.get("why", {}).items())
            unchecked = (f" ({t['answer_unchecked']} schema-checked and re-executed, answer "
                         "unchecked)" if t.get("answer_unchecked") else "")
            lines.append(f"      teacher ({t['verify']}): {t['read']} read, {t['kept']} kept"
                         f"{unchecked}, {t['dropped']} dropped" + (f" ({why})" if why else ""))
        lines += [f"      {step}: {note}" for step, note in step_notes(done)]
        if r.get("timing"):
            lines += time_lines(r["timing"], r.get("wall_s"))
        for why in r.get("reasons", [])[:3]:
            lines.append(f"      - {why}")
    timed = [r for r in state["rounds"].values() if r.get("timing")]
    if timed:
        total = sum(s for r in timed for _, s in timing.breakdown(r["timing"], r.get("wall_s")))
        lines.append(f"time:     {total:.1f}s in all rounds; "
                     + totals_text(timing.combine([r["timing"] for r in timed])))
    p = store.promoted()
    lines.append("promoted: " + (f"round {p['round']} ({p['name']}) {p['model']}" if p else
                                 "base model (nothing promoted yet)"))
    gguf = sorted((run / "export").glob("*.gguf")) if (run / "export").exists() else []
    if gguf:
        lines.append(f"export:   {gguf[0]}  (ollama create <name> -f {run / 'export' / 'Modelfile'})")
    return "\n".join(lines)


def time_lines(recorded: dict, wall_s: float | None = None) -> list[str]:
    """A round's time breakdown: `step seconds (share)` in step order, then engines and
    tokens/s, indented under the round's line."""
    rows = timing.shares(timing.breakdown(recorded, wall_s))
    total = sum(sec for _, sec, _ in rows)
    lines, line = [], f"      time {total:.1f}s:"
    for k, sec, pct in rows:  # wrapped between steps, never inside one
        item = f" {k} {sec:.1f}s {pct:.0f}%,"
        if len(line) + len(item) > 96:
            lines.append(line)
            line = " " * 7
        line += item
    return lines + [line.rstrip(","), " " * 6 + totals_text(recorded)]


def totals_text(recorded: dict) -> str:
    """`engines: N started (S s), M reused; sampling X tok/s; training Y tok/s`."""
    n, secs, reused = timing.engine_starts(recorded)
    out = [f"engines: {n} started ({secs:.1f}s), {reused} reused"]
    for kind in ("sampling", "training"):
        t = recorded.get("throughput", {}).get(kind)
        if t:
            out.append(f"{kind} {timing.rate(t):.1f} tok/s")
    return "; ".join(out)
