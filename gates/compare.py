"""`pipeline compare RUN_A RUN_B [--round N]`: the candidates of one round in two runs (a seed
or recipe A/B, e.g. a run and its fork redone with `-o ...seed=1`), canary by canary, paired
over the items both evaluated: scores, B - A, wins / losses of B, and the 2 SE band.

Each round's candidate evaluation is its gate's `gate/candidate/eval.json`; B is read as
the candidate and A as the baseline of the paired statistics (`gates.stats.paired`).
"""
from __future__ import annotations

import time
from pathlib import Path

from .evaluate import EVAL_FILE, load_eval
from .promote import paired_common
from .report import ROUND_DIR, columns


class CompareError(ValueError):
    """The runs cannot be compared as asked; the message says why and what to do."""


def candidate_evals(run: Path) -> dict[int, Path]:
    """round number -> the round's candidate evaluation (`gate/candidate`), where one exists."""
    out = {}
    for d in Path(run).glob("round-*"):
        m = ROUND_DIR.match(d.name)
        if m and (d / "gate" / "candidate" / EVAL_FILE).exists():
            out[int(m.group(1))] = d / "gate" / "candidate"
    return out


def compare(run_a: Path, run_b: Path, round_no: int | None = None,
            se_mult: float = 2.0) -> dict:
    """{round, a, b, rows: [{canary, metric, n, a, b, delta, se, wins, losses, ties,
    verdict}]} over every canary both candidates evaluated (`round_no` None: the last round
    both have a gate evaluation for)."""
    ea, eb = candidate_evals(run_a), candidate_evals(run_b)
    both = sorted(set(ea) & set(eb))
    if round_no is None:
        if not both:
            raise CompareError(f"{run_a} and {run_b} have no round with a gate evaluation in "
                               f"common (rounds {sorted(ea)} and {sorted(eb)})")
        round_no = both[-1]
    elif round_no not in both:
        raise CompareError(f"round {round_no} has no gate evaluation in "
                           f"{run_a if round_no not in ea else run_b}; rounds with one in both: "
                           f"{both or 'none'}")
    sa, sb = load_eval(ea[round_no])["suites"], load_eval(eb[round_no])["suites"]
    rows = []
    for name in [n for n in sa if n in sb]:
        metric = sa[name].get("primary") or next(iter(sa[name]["metrics"]))
        p = paired_common(sb[name], sa[name], metric)
        if p is None:
            continue
        band = se_mult * p.se
        verdict = ("B better" if p.delta > band else "B worse" if p.delta < -band
                   else "within noise")
        rows.append({"canary": name, "metric": metric, "n": p.n, "a": p.baseline,
                     "b": p.candidate, "delta": p.delta, "se": p.se, "wins": p.wins,
                     "losses": p.losses, "ties": p.ties, "verdict": verdict})
    return {"round": round_no, "a": str(run_a), "b": str(run_b), "se_mult": se_mult,
            "rows": rows}


def table(result: dict) -> list[list[str]]:
    """Header and one row per canary: canary, n, A, B, delta, W/L, k SE, verdict."""
    k = result["se_mult"]
    out = [["canary", "n", "A", "B", "delta (B-A)", "W/L (B)", f"{k:g} SE", "verdict"]]
    for r in result["rows"]:
        out.append([f"{r['canary']}.{r['metric']}", str(r["n"]), f"{r['a']:.3f}",
                    f"{r['b']:.3f}", f"{r['delta']:+.3f}", f"{r['wins']}/{r['losses']}",
                    f"{k * r['se']:.3f}", r["verdict"]])
    return out


def text(result: dict) -> str:
    """The table as aligned text, under a line naming the round and the runs."""
    return "\n".join([f"round {result['round']} candidates: A = {result['a']}, "
                      f"B = {result['b']} (paired over common items)"]
                     + columns(table(result)))


def markdown(result: dict, command: str) -> str:
    """The table as a results file: what was compared, the command, the date."""
    rows = table(result)
    lines = [f"# Round {result['round']}: {result['b']} (B) vs {result['a']} (A)", "",
             f"Command: `{command}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}", "",
             "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"
