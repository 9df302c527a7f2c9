"""Filter throughput at scale: rejection, dedup, decontamination and distribution matching over
1,000,000 synthetic trajectories, with rows per second and peak memory (`pipeline bench filters`)."""
from __future__ import annotations

import argparse
import json
import resource
import time

from data import filters, tasks
from data.trajectory import Trajectory, Verification


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic(n: int, seed_tasks: int = 2000) -> list[Trajectory]:
    """n trajectories over `seed_tasks` real tasks: shared message bodies, varied ids/outcomes,
    a few percent exact duplicates (what dedup must find)."""
    base = tasks.generate({"single": seed_tasks // 4, "parallel": seed_tasks // 4,
                           "chained": seed_tasks // 4, "recovery": seed_tasks // 4},
                          namespace="bench-filters")
    ok = Verification(score=1.0, success=True)
    bad = Verification(score=0.5, success=False, reasons=["final answer does not match"])
    rows = []
    for i in range(n):
        t = base[i % len(base)]
        variant = i // len(base) % 50  # 50 distinct variants per task, the rest duplicates
        msgs = t.messages() + t.oracle[:-1] + [
            {"role": "assistant", "content": t.oracle[-1]["content"] + f" (v{variant})"}]
        rows.append(Trajectory.model_construct(
            id=f"{t.id}#{i}", task_id=t.id, domain=t.domain, kind=t.kind, round=1, sample=i,
            seed=i, source="policy", messages=msgs, tools=t.tools, turn_token_ids=[],
            finish="answer", parse_errors=[], prompt_tokens=0, completion_tokens=40 + variant,
            turns=len(t.oracle) // 2 + 1, sampler={}, verification=ok if i % 3 else bad))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pipeline bench filters", description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    before = _peak_mib()
    t0 = time.perf_counter()
    rows = synthetic(args.rows)
    built = time.perf_counter() - t0
    canary = [t.prompt for t in tasks.generate({"single": 200, "chained": 200}, split="canary",
                                               namespace="canary-v1")]
    protect = filters.Decontaminator(canary)
    stages, current = [], rows
    for name, fn in [("rejection", filters.rejection), ("dedup", filters.dedup),
                     ("decontaminate", lambda r: filters.decontaminate(r, protect)),
                     ("distribution_match", lambda r: filters.distribution_match(
                         r, cap_per_task=4, max_rows=50_000))]:
        t = time.perf_counter()
        current, rep = fn(current)
        dt = time.perf_counter() - t
        stages.append({"filter": name, "in": rep.seen, "out": rep.kept, "seconds": round(dt, 2),
                       "rows_per_s": round(rep.seen / dt) if dt else None,
                       "dropped": dict(rep.dropped)})
    peak = _peak_mib()
    print(f"{args.rows:,} synthetic trajectories built in {built:.1f} s")
    print(f"{'filter':<20}{'in':>11}{'out':>11}{'seconds':>9}{'rows/s':>12}")
    for s in stages:
        print(f"{s['filter']:<20}{s['in']:>11,}{s['out']:>11,}{s['seconds']:>9.2f}"
              f"{s['rows_per_s'] or 0:>12,}")
    print(f"peak memory: {peak:,.0f} MiB (process; {before:,.0f} MiB before building rows)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "stages": stages, "peak_mib": round(peak)}, f, indent=2)
    return 0
