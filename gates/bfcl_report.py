"""What `pipeline eval --bfcl` reports per category: accuracy with a 95% interval, n, wall
time and seconds per 100 items, failure kinds, and the published leaderboard scores of small
models beside them, marked "published, not re-run here".

The published figures are copied from the BFCL v4 leaderboard as recorded (2026-04) in
`shared/reference/bfcl-multi-turn.md`; each is shown with the leaderboard column it comes
from, because most columns aggregate several categories (e.g. "live" is all live AST
categories together, "simple" is Python, Java and JavaScript together).
"""
from __future__ import annotations

import math
from collections import Counter

PUBLISHED_SOURCE = "BFCL v4 leaderboard, 2026-04 (shared/reference/bfcl-multi-turn.md)"
PUBLISHED_VERSION = "BFCL v4"
NOT_RERUN = "published, not re-run here"

# model -> leaderboard column -> accuracy in percent (None: not published separately)
_COLUMNS = ("overall", "simple", "multiple", "parallel", "parallel_multiple", "live",
            "multi_turn", "multi_turn_base", "irrelevance")
_ROWS = {
    "xLAM-2-1b-fc-r":             (30.44, 64.17, 82.5, 73.5, 56.0, 55.14, 36.00, 45.5, 64.47),
    "Qwen3-1.7B (FC)":            (28.41, 70.67, 92.5, 88.5, 80.0, 74.61, 11.00, 15.0, 76.54),
    "Hammer2.1-1.5b (FC)":        (27.88, 73.92, 92.0, 85.5, 80.5, 69.50, 15.62, 20.0, 79.40),
    "Qwen3-0.6B (FC)":            (23.93, 64.17, 86.0, 67.5, 69.5, 56.62, 3.62, None, 80.84),
    "Hammer2.1-0.5b (FC)":        (21.22, 62.42, 81.0, 69.0, 51.5, 54.63, 2.88, None, 80.79),
    "Granite-4.0-350m (FC)":      (18.98, 61.67, 84.5, 70.0, 55.5, 46.11, 2.50, None, 60.84),
    "Llama-3.2-1B-Instruct (FC)": (10.82, 44.0, 50.5, 44.0, 15.0, 11.77, 0.0, None, 51.57),
}
PUBLISHED: dict[str, dict[str, float | None]] = {m: dict(zip(_COLUMNS, v))
                                                 for m, v in _ROWS.items()}

# category -> (leaderboard column, what that column covers)
COLUMN_OF: dict[str, tuple[str, str]] = {
    "simple_python": ("simple", "non-live simple: python, java and javascript together"),
    "multiple": ("multiple", "multiple"),
    "parallel": ("parallel", "parallel"),
    "parallel_multiple": ("parallel_multiple", "parallel multiple"),
    "irrelevance": ("irrelevance", "irrelevance"),
    "live_simple": ("live", "live overall: all live AST categories together"),
    "live_multiple": ("live", "live overall: all live AST categories together"),
    "live_parallel": ("live", "live overall: all live AST categories together"),
    "live_parallel_multiple": ("live", "live overall: all live AST categories together"),
    "multi_turn_base": ("multi_turn_base", "multi-turn base"),
    "multi_turn_miss_func": ("multi_turn", "multi-turn overall: the four categories together"),
    "multi_turn_miss_param": ("multi_turn", "multi-turn overall: the four categories together"),
    "multi_turn_long_context": ("multi_turn", "multi-turn overall: the four categories together"),
}


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (sensible at 0 or n successes)."""
    if n == 0:
        return 0.0, 1.0
    p = correct / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def published(category: str) -> dict:
    """The leaderboard figures for a category's column, each labelled with where it is from."""
    column, covers = COLUMN_OF.get(category, (None, "no published column"))
    scores = {m: (row.get(column) if column else None) for m, row in PUBLISHED.items()}
    return {"column": column, "covers": covers, "source": PUBLISHED_SOURCE,
            "bfcl_version": PUBLISHED_VERSION, "note": NOT_RERUN, "scores": scores}


def summarise(category: str, results: list, wall_s: float, n_items: int) -> dict:
    """One category's line of the report from its scored results (`gates.bfcl.Result`)."""
    n = len(results)
    correct = sum(r.score.valid for r in results)
    lo, hi = wilson(correct, n)
    kinds = Counter(r.score.kind for r in results if not r.score.valid)
    steps = Counter(f for r in results for turn in r.finishes
                    for f in (turn if isinstance(turn, list) else [turn]))
    row = {"category": category, "n_items": n_items, "n": n, "correct": correct,
           "accuracy": correct / n if n else 0.0, "ci95": [lo, hi], "wall_s": round(wall_s, 3),
           "s_per_100": round(100 * wall_s / n_items, 3) if n_items else 0.0,
           "completion_tokens": sum(r.completion_tokens for r in results),
           "failures": dict(kinds.most_common()), "finishes": dict(steps),
           "published": published(category)}
    mine = [r for r in results if r.project_valid is not None]
    if mine:  # single-turn: does the project's fast checker give BFCL's verdicts?
        row["project_checker_agrees"] = sum(r.project_valid == r.score.valid for r in mine)
    return row


_SHORT = {"xLAM-2-1b-fc-r": "xLAM2-1b", "Qwen3-1.7B (FC)": "Qw3-1.7B",
          "Hammer2.1-1.5b (FC)": "Ham-1.5b", "Qwen3-0.6B (FC)": "Qw3-0.6B",
          "Hammer2.1-0.5b (FC)": "Ham-0.5b", "Granite-4.0-350m (FC)": "Gran-350m",
          "Llama-3.2-1B-Instruct (FC)": "Ll3.2-1B"}


def format_report(report: dict) -> str:
    """The plain-text table `pipeline eval --bfcl` prints (also written as report.md)."""
    lines = [f"BFCL categories (bfcl-eval {report['bfcl_eval']}, data read from the installed "
             f"package), model {report['model']}, backend {report['backend']}, "
             f"k={report['k']}, seed={report['seed']}, max_tokens={report['max_tokens']}",
             "",
             f"{'category':<24} {'n':>5} {'acc':>6}  {'95% CI':<15} {'wall s':>8} "
             f"{'s/100':>8}  failures"]
    for row in report["categories"]:
        lo, hi = row["ci95"]
        fails = ", ".join(f"{k}:{v}" for k, v in list(row["failures"].items())[:3]) or "-"
        agree = (f" [project checker agrees {row['project_checker_agrees']}/{row['n']}]"
                 if "project_checker_agrees" in row else "")
        lines.append(f"{row['category']:<24} {row['n']:>5} {row['accuracy']:>6.3f}  "
                     f"[{lo:.3f}, {hi:.3f}] {row['wall_s']:>8.1f} {row['s_per_100']:>8.1f}  "
                     f"{fails}{agree}")
    lines += ["", f"Published accuracy in % ({NOT_RERUN}): {PUBLISHED_SOURCE}, "
                  f"{PUBLISHED_VERSION}; column = the leaderboard column shown",
              f"{'category':<24} {'column':<18} " + " ".join(f"{s:>9}" for s in _SHORT.values())]
    for row in report["categories"]:
        pub = row["published"]
        vals = " ".join(f"{'-' if v is None else f'{v:.2f}':>9}" for v in pub["scores"].values())
        lines.append(f"{row['category']:<24} {pub['column'] or '-':<18} {vals}")
    lines.append("No published BFCL score was found for SmolLM2-135M.")
    full = sum(r["finishes"].get("context_full", 0) for r in report["categories"])
    if full:
        lines.append(f"note: {full} step(s) found the context full at "
                     f"{report['max_context_tokens']} tokens; BFCL's multi-turn prompts open "
                     f"with 2-5k tokens of tool docs: raise sampler.max_context_tokens")
    return "\n".join(lines)
