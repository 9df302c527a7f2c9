"""Both sides of the call-or-abstain choice, on one model, outside the gate's own items:

    python benchmarks/tool_choice.py runs/default --markdown docs/results/tool-choice.md

- BFCL simple_python, multiple and irrelevance (`--limit` items each, drawn with `--seed`, a
  seed the gate's BFCL canaries do not use: theirs is "canary-<version>"), scored by BFCL's
  own checkers, as `pipeline eval --bfcl` does;
- the built-in many_tools canary (calls and abstentions apart);
- `pipeline chat` with every built-in domain offered at once, on the model's Q6_K export: a
  currency, a weather and a flights request and an off-topic one.
MODEL is a run directory (its promoted model and that round's export) or a model directory
with `--gguf`. Prints the tables; `--markdown` also writes them with the command, date and the
load average seen (a load above the core count means the CPU was shared).
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

CHAT = ["Convert 250 USD to JPY.", "What's the weather in Paris right now?",
        "Find flights from CDG to JFK on 2026-04-14.", "Write a two-line poem about autumn."]
SEED = 7


def _gguf(run: Path) -> Path | None:
    promoted = run / "promoted.json"
    if not promoted.exists():
        return None
    model = Path(json.loads(promoted.read_text())["model"])
    found = sorted((model.parent / "export").glob("*Q6_K*.gguf"))
    return found[0] if found else None


def _shown(path: str | Path) -> str:
    """A path as the results file names it: relative to here, else its last three parts (no
    machine paths in committed results)."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except ValueError:
        return "/".join(part for part in p.parts[-3:] if part != p.anchor)


def _no_calls(results: Path) -> int:
    """Items of one BFCL category's results file where the model called nothing."""
    from data import jsonl
    return sum(not row["calls"] for row in jsonl.read(results))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="run directory or model directory")
    ap.add_argument("--gguf", help="the GGUF to chat with (default: the run's promoted export)")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", default="runs/tool-choice")
    ap.add_argument("--markdown", help="write the tables here too")
    args = ap.parse_args(argv)

    from export.chat import chat
    from gates.bfcl import evaluate_model_bfcl
    from gates.canaries import builtin_suite
    from gates.gate import evaluate_model
    from engine import models
    from pipeline import config

    load0 = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.timezone.utc)
    cfg = config.load(None, args.preset, [])
    model = models.resolve(args.model)
    out = Path(args.out)
    bfcl = evaluate_model_bfcl(cfg, model, "simple_python,multiple,irrelevance",
                               limit=args.limit, seed=args.seed, out_dir=out / "bfcl")
    cfg.canaries.bfcl = {}
    suite = builtin_suite("many_tools", cfg.canaries.sizes.get("many_tools", 120),
                          cfg.canaries.version)
    many = evaluate_model(cfg, model, out / "many_tools", [suite])["suites"]["many_tools"]
    argv_shown = [_shown(a) if "/" in a else a for a in (argv or sys.argv[1:])]
    lines = [f"# Tool choice: {_shown(args.model)}", "",
             f"Command: `python benchmarks/tool_choice.py {' '.join(argv_shown)}`  ",
             f"Date: {started:%Y-%m-%d %H:%M} UTC; model {_shown(model)}", "",
             f"| BFCL v4 (limit {args.limit}, seed {args.seed}) | accuracy | correct / n | "
             "no call | failures |", "|---|---|---|---|---|"]
    for row in bfcl["categories"]:
        no_call = _no_calls(out / "bfcl" / f"{row['category']}.jsonl")
        lines.append(f"| {row['category']} | {row['accuracy']:.2f} | {row['correct']} / "
                     f"{row['n']} | {no_call} | {json.dumps(row['failures'])} |")
    m = many["metrics"]
    n_calls = sum("calls" in v for v in many["items"].values())
    lines += ["", "| many_tools (built-in) | calls | abstentions | correct | items |",
              "|---|---|---|---|---|",
              f"| {cfg.canaries.version} | {m['calls']:.2f} | {m['abstentions']:.2f} | "
              f"{m['correct']:.2f} | {n_calls} call + {len(many['items']) - n_calls} none |"]
    gguf = Path(args.gguf) if args.gguf else _gguf(Path(args.model))
    if gguf is not None:
        lines += ["", f"Chat on {gguf.name}, every built-in domain offered (greedy):", "", "```"]
        for prompt in CHAT:
            buf = io.StringIO()
            with redirect_stdout(buf):
                chat(gguf, prompt=prompt, max_tokens=160)
            lines += buf.getvalue().rstrip().splitlines() + [""]
        lines.append("```")
    load1 = os.getloadavg()[0]
    lines += ["", f"Load average (1 min) at start {load0:.1f}, at end {load1:.1f}, on "
                  f"{os.cpu_count()} cores."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
