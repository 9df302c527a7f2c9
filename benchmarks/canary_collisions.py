"""How many generated training requests a preset's canaries already hold, per task kind and
built-in domain: those are dropped by decontamination, so a domain whose requests mostly
collide trains on few of its calls.

    python benchmarks/canary_collisions.py [--preset default] [--n 600]
"""
from __future__ import annotations

import argparse
from collections import Counter, defaultdict

from data import tasks as taskgen
from data.envs import BUILTIN
from gates.decontamination import decontaminator_for
from gates.gate import suites_for
from pipeline.config import load


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default")
    ap.add_argument("--n", type=int, default=600, help="draws per kind, cycling the domains")
    args = ap.parse_args(argv)
    cfg = load(preset=args.preset)
    guard = decontaminator_for(suites_for(cfg, cfg.canaries.largest_sizes(cfg.rounds.values())),
                               bfcl=False)
    for kind in ("single", "mismatch", "chained", "recovery", "parallel"):
        n, hit, distinct = Counter(), Counter(), defaultdict(set)
        for i in range(args.n):
            t = taskgen.make(kind, i, split="train", namespace="probe", offered_tools=12,
                             domains=taskgen.domain_cycle(kind, i, sorted(BUILTIN)))
            n[t.domain] += 1
            distinct[t.domain].add(t.prompt)
            hit[t.domain] += bool(guard.hit(t.prompt))
        print(f"{kind:9s}", "; ".join(f"{d} {hit[d]}/{n[d]} ({len(distinct[d])} distinct)"
                                       for d in sorted(n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
