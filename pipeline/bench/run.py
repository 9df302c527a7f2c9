"""`pipeline bench run`: where a whole run's time went, from its run directory.

Prints seconds per step and round (with each step's share of the run), the run's total, the
sampler engine starts and their seconds, and sampling and training tokens/s, all read from
the `timing` each round recorded in state.json. With a config (`--preset` / a YAML) it first
runs the pipeline into the run directory, so the figures come from one rerunnable command:

    pipeline bench run runs/default                       # a finished run
    pipeline bench run --preset tiny --run-dir /tmp/tiny  # run the tiny preset, then print
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from data.jsonl import write_text_atomic

from engine import timing
from pipeline.status import round_names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="pipeline bench run", description=__doc__.split("\n")[0])
    ap.add_argument("run", nargs="?", help="run directory (default: --run-dir, or the config's)")
    ap.add_argument("--preset", help="run this shipped config first (default, tiny)")
    ap.add_argument("--config", help="run this config YAML first")
    ap.add_argument("--run-dir", help="run directory to run into")
    ap.add_argument("-o", "--set", dest="overrides", action="append", metavar="KEY=VALUE",
                    help="config override for the run, e.g. -o sampler.backend=vllm")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    return ap.parse_args(argv)


def run_figures(run_dir: Path) -> dict:
    """The run's time per round and step, totals, engine starts and token rates."""
    state_path = run_dir / "state.json"
    if not state_path.exists():
        raise SystemExit(f"{run_dir}: no state.json; pass a run directory (or --preset to "
                         "run one first)")
    state = json.loads(state_path.read_text())
    names = round_names(run_dir)
    rounds = []
    for n, r in sorted(state.get("rounds", {}).items(), key=lambda kv: int(kv[0])):
        if not r.get("timing"):
            continue
        i = int(n)
        rounds.append({"round": i, "name": names[i - 1] if i <= len(names) else f"round-{i}",
                       "status": r.get("status", "running"), "wall_s": r.get("wall_s"),
                       "steps": dict(timing.breakdown(r["timing"], r.get("wall_s"))),
                       "timing": r["timing"]})
    if not rounds:
        raise SystemExit(f"{state_path}: no round recorded a time breakdown (`timing`); it "
                         "was run before timing was recorded, or no round ran yet")
    total = timing.combine([r["timing"] for r in rounds])
    steps: dict[str, float] = {}
    for r in rounds:
        for k, v in r["steps"].items():
            steps[k] = steps.get(k, 0.0) + v
    n, secs, reused = timing.engine_starts(total)
    return {"run": str(run_dir), "rounds": rounds, "steps": steps,
            "total_s": round(sum(steps.values()), 2),
            "engine_starts": {"count": n, "seconds": round(secs, 2), "reused": reused,
                              "each": [e for e in total["events"]
                                       if e.get("step") == "engine_start"]},
            "tokens_per_s": {k: v["tokens_per_s"] for k, v in total["throughput"].items()},
            "throughput": total["throughput"]}


def table(fig: dict) -> str:
    """Steps down, rounds across: seconds per cell; the run's total and share per step."""
    rounds = fig["rounds"]
    order = [s for s in timing.STEP_ORDER if s in fig["steps"]]
    order += [s for s in fig["steps"] if s not in order]
    heads = [f"{r['round']} {r['name']}" for r in rounds]
    width = max(12, *(len(h) for h in heads)) + 1
    lines = [f"{'step':<15}" + "".join(f"{h:>{width}}" for h in heads) + f"{'total':>10}{'%':>7}"]
    total = fig["total_s"] or 1.0
    for step in order:
        cells = "".join(f"{r['steps'].get(step, 0.0):>{width}.1f}" for r in rounds)
        lines.append(f"{step:<15}{cells}{fig['steps'][step]:>10.1f}"
                     f"{100 * fig['steps'][step] / total:>6.1f}%")
    sums = [sum(r["steps"].values()) for r in rounds]
    lines.append(f"{'total':<15}" + "".join(f"{s:>{width}.1f}" for s in sums)
                 + f"{fig['total_s']:>10.1f}{100.0:>6.1f}%")
    lines.append(f"{'% of run':<15}" + "".join(f"{100 * s / total:>{width - 1}.1f}%" for s in sums))
    e = fig["engine_starts"]
    lines.append(f"engine starts: {e['count']} ({e['seconds']:.1f} s), reused {e['reused']} times")
    for ev in e["each"]:
        lines.append(f"  {ev.get('backend', '?'):<13}{ev.get('model', '?'):<40}"
                     f"{ev['seconds']:>8.1f} s")
    for kind, t in fig["throughput"].items():
        lines.append(f"{kind}: {t['tokens']:,} tokens in {t['seconds']:.1f} s = "
                     f"{t['tokens_per_s']:.1f} tokens/s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run_dir = Path(args.run or args.run_dir) if (args.run or args.run_dir) else None
    wall = None
    if args.preset or args.config:
        from pipeline import config
        from pipeline.loop import GateFailed, run
        overrides = list(args.overrides or []) + ([f"run_dir={run_dir}"] if run_dir else [])
        cfg = config.load(args.config, args.preset, overrides)
        run_dir = cfg.directory()
        t0 = time.perf_counter()
        try:
            run(cfg, progress=False)
        except GateFailed as err:  # the rounds that ran still have their times
            print(f"stopped: {err}")
        wall = round(time.perf_counter() - t0, 1)
    if run_dir is None:
        raise SystemExit("pass a run directory, or --preset/--config (with --run-dir) to run "
                         "one first")
    fig = run_figures(run_dir)
    print(f"run {run_dir}: {len(fig['rounds'])} round(s), {fig['total_s']:.1f} s in steps"
          + (f", {wall:.1f} s wall for this command" if wall is not None else ""))
    print(table(fig))
    if args.json:
        write_text_atomic(args.json, json.dumps({**fig, "command_wall_s": wall}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
