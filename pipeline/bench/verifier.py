"""Verifier throughput on one core: trajectories per second, cold and with repeated samples.

`pipeline bench verify` -- cold: every trajectory distinct (the first time a call is seen);
warm: k samples per task repeat calls, as in a round with k > 1 (schema checks memoised).
"""
from __future__ import annotations

import argparse
import json
import os
import time

from data import tasks, verify


def _pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return f"core {core}"
    return "unpinned"


def _rate(pairs, repeats: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeats):
        for task, messages in pairs:
            verify.verify(task, messages)
    return repeats * len(pairs) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pipeline bench verify", description=__doc__)
    ap.add_argument("--per-kind", type=int, default=300, help="tasks per kind")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    where = _pin_one_core()
    kinds = [k for k in tasks.KINDS if k != "long_context"]
    ts = tasks.generate({k: args.per_kind for k in kinds}, namespace="bench-verify")
    pairs = [(t, t.messages() + t.oracle) for t in ts]
    cold = _rate(pairs)
    warm = _rate(pairs, repeats=3)
    long = tasks.generate({"long_context": 100}, namespace="bench-verify", context_tokens=4000)
    long_rate = _rate([(t, t.messages() + t.oracle) for t in long])
    out = {"pinned": where, "trajectories": len(pairs), "cold_per_s": round(cold),
           "warm_per_s": round(warm), "long_context_per_s": round(long_rate), "goal_per_s": 20000}
    print(f"verifier on one core ({where}), {len(pairs)} trajectories of {len(kinds)} kinds")
    print(f"  cold (every call new)       {cold:>9,.0f} traj/s")
    print(f"  warm (k samples repeat)     {warm:>9,.0f} traj/s   goal >= 20,000")
    print(f"  long-context (4k tokens)    {long_rate:>9,.0f} traj/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0
