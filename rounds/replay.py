"""Replay across rounds: a sampled round trains on its new rows plus rows replayed from the
accepted sets that trained the rounds promoted before it.

Each round starts from the last promoted model; training it on its own rows alone wears down
what earlier rounds taught (measured: round 3 lost single_turn 0 W / 6 L). The replay is a
sample of the union of those accepted sets whose kind x domain mix matches the union's,
seeded from (round, run seed), with every row that today's decontamination filter would drop
left out first. Round 5 (GRPO) trains on prompts and rewards, not rows: it neither replays
nor is replayed.
"""
from __future__ import annotations

import logging
import random
from collections import Counter, defaultdict
from typing import Sequence

from data import filters, jsonl
from data.envs.base import stable_int
from data.trajectory import Trajectory
from engine.runstore import RunStore
from rounds.common import RoundContext

log = logging.getLogger("toolsmith")


def promoted_before(store: RunStore, round_no: int) -> list[tuple[int, str]]:
    """(number, name) of each round promoted before `round_no`, from promoted.json's
    history, in round order."""
    history = (store.promoted() or {}).get("history", [])
    seen = {h["round"]: h["name"] for h in history if 0 < h["round"] < round_no}
    return sorted(seen.items())


def training_sets(store: RunStore, rounds: Sequence[tuple[int, str]]
                  ) -> list[tuple[int, Trajectory]]:
    """(source round, row) of every row of the accepted sets (`accepted*.jsonl`, one per
    iteration) that trained each of `rounds`."""
    out = []
    for number, name in rounds:
        for path in sorted(store.round_dir(number, name).glob("accepted*.jsonl")):
            out += [(number, t) for t in jsonl.read_all(path, Trajectory)]
    return out


def group_of(t: Trajectory) -> tuple[str, str]:
    """The stratum a row is matched in: (kind, domain)."""
    return t.kind, t.domain


def allocate(sizes: dict[tuple, int], n: int) -> dict[tuple, int]:
    """Rows per group when `n` are drawn from groups of `sizes` in proportion to their sizes:
    floors, then the largest remainders (ties in group order); never more than a group has."""
    total = sum(sizes.values())
    n = min(n, total)
    if n <= 0:
        return dict.fromkeys(sizes, 0)
    exact = {g: n * c / total for g, c in sizes.items()}
    out = {g: int(v) for g, v in exact.items()}
    rest = n - sum(out.values())
    for g in sorted(sizes, key=lambda g: (-(exact[g] - out[g]), g))[:rest]:
        out[g] += 1
    return out


def match_mix(pool: Sequence[tuple[int, Trajectory]], n: int, seed: int
              ) -> list[tuple[int, Trajectory]]:
    """`n` rows of `pool` (all of it when it holds fewer) whose kind x domain mix matches the
    pool's, drawn with `seed`; the same pool and seed always give the same rows."""
    groups: dict[tuple, list] = defaultdict(list)
    for item in sorted(pool, key=lambda x: (x[0], x[1].id)):
        groups[group_of(item[1])].append(item)
    rng, out = random.Random(seed), []
    for g, k in sorted(allocate({g: len(v) for g, v in groups.items()}, n).items()):
        out += rng.sample(groups[g], k)
    return out


def replay_count(new: int, share: float) -> int:
    """Replayed rows that make `share` of new + replayed: share / (1 - share) x new."""
    return round(share / (1 - share) * new) if 0 < share < 1 else 0


def replay_rows(ctx: RoundContext, new: list[Trajectory], sfx: str = "") -> list[Trajectory]:
    """The `replay<sfx>` step: the rows replayed beside the round's `new` accepted rows,
    written to `replay<sfx>.jsonl`; counts per source round and kind go to the round's stats
    and the run store."""
    step = f"replay{sfx}"
    path = ctx.dir / f"{step}.jsonl"
    if ctx.step_done(step):
        return jsonl.read_all(path, Trajectory)
    share = ctx.settings.replay.share
    sources = promoted_before(ctx.store, ctx.number) if share > 0 else []
    pool = training_sets(ctx.store, sources)
    seen = {filters.trajectory_hash(t) for t in new}
    unique = []
    for r, t in pool:  # a row twice in the pool, or equal to a new row, is replayed at most once
        h = filters.trajectory_hash(t)
        if h not in seen:
            seen.add(h)
            unique.append((r, t))
    clean, report = filters.decontaminate(unique, ctx.decontaminator,
                                          prompt_of=lambda x: filters.user_turns(x[1]))
    want = replay_count(len(new), share)
    chosen = match_mix(clean, want, stable_int("replay", ctx.number, ctx.cfg.seed))
    rows = [t for _, t in chosen]
    jsonl.write_atomic(path, rows)
    info = {"share": share, "new": len(new), "replayed": len(rows), "wanted": want,
            "pool": len(clean), "decontaminated": report.seen - report.kept,
            "from_rounds": [r for r, _ in sources],
            "new_by_kind": dict(sorted(Counter(t.kind for t in new).items())),
            "by_round": counts_by_round(chosen)}
    ctx.stats.setdefault("replay", {})[step] = info
    ctx.mark(step, **info)
    log.info("%s: %d new rows + %d replayed (share %.2f; pool %d from rounds %s, %d dropped by "
             "decontamination): %s", step, len(new), len(rows), share, len(clean),
             info["from_rounds"] or "none", info["decontaminated"], info["by_round"] or "-")
    return rows


def counts_by_round(chosen: Sequence[tuple[int, Trajectory]]) -> dict[str, dict[str, int]]:
    """{source round: {kind: rows}} of replayed rows."""
    out: dict[str, Counter] = defaultdict(Counter)
    for r, t in chosen:
        out[str(r)][t.kind] += 1
    return {r: dict(sorted(c.items())) for r, c in sorted(out.items(), key=lambda x: int(x[0]))}

