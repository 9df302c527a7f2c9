"""`pipeline status RUN`: each round's steps, counts, gate verdict, and the promoted model."""
from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.recipes import BUILTIN, ordered
from pipeline.runstore import STEPS, RunStore


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
            lines.append(f"      teacher ({t['verify']}): {t['read']} read, {t['kept']} kept, "
                         f"{t['dropped']} dropped" + (f" ({why})" if why else ""))
        for why in r.get("reasons", [])[:3]:
            lines.append(f"      - {why}")
    p = store.promoted()
    lines.append("promoted: " + (f"round {p['round']} ({p['name']}) {p['model']}" if p else
                                 "base model (nothing promoted yet)"))
    gguf = sorted((run / "export").glob("*.gguf")) if (run / "export").exists() else []
    if gguf:
        lines.append(f"export:   {gguf[0]}  (ollama create <name> -f {run / 'export' / 'Modelfile'})")
    return "\n".join(lines)
