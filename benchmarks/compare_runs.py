"""Are two runs' gates the same? Round by round: every gate number, then training losses and the
candidate's canary transcripts. For a refactor that must not change behaviour: run a preset
before and after (`pipeline run --preset tiny --run-dir A`, then B) and compare.

    python benchmarks/compare_runs.py RUN_A RUN_B [RUN_C RUN_D ...] [--markdown F --note TEXT]

Gate numbers are the report's decision, its rules (name, passed, detail) and per canary the
item hash, n, MDE, baseline and candidate metrics, and every paired comparison; paths and times
are left out. Exit status 1 when any gate number differs, 0 otherwise (losses, weight digests and
transcripts are reported, not judged: training on another machine may round differently, and
vLLM's batching can flip a near-tie token between two runs of the same weights). Several pairs are
compared in turn; `--markdown` writes every pair's printout with the command and the date.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import shlex
import sys
from contextlib import redirect_stdout
from pathlib import Path


def gate_numbers(round_dir: Path) -> dict:
    report = json.loads((round_dir / "gate" / "report.json").read_text())
    canaries = {name: {k: c.get(k) for k in ("hash", "n_items", "mde", "primary", "baseline",
                                              "candidate", "comparisons", "verdict")}
                for name, c in report["canaries"].items()}
    return {"decision": report["decision"], "passed": report["passed"],
            "target": report["target"], "thresholds": report["thresholds"],
            "rules": [(r["name"], r["passed"], r["detail"]) for r in report["rules"]],
            "canaries": canaries}


def losses(round_dir: Path) -> list[float]:
    out = []
    for name in ("train_log.jsonl", "grpo_log.jsonl"):
        path = round_dir / name
        if path.exists():
            out += [json.loads(line).get("loss") for line in path.read_text().splitlines()
                    if line.strip()]
    return [x for x in out if x is not None]


def transcripts(round_dir: Path) -> dict[str, list]:
    """The candidate's canary conversations (messages only), by item id."""
    path = round_dir / "gate" / "candidate" / "rollouts.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["id"]: r["messages"] for r in rows}


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


def weights(round_dir: Path) -> str:
    """A digest of the trained model's weight files: equal digests mean byte-identical weights,
    so any transcript difference then comes from serving, not from training."""
    h = hashlib.sha256()
    files = sorted((round_dir / "model").glob("*.safetensors"))
    for f in files:
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                h.update(block)
    return h.hexdigest()[:12] if files else ""


def transcript_note(ta: dict, tb: dict) -> str:
    if ta == tb:
        return f"identical ({digest(ta)})"
    differ = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
    return (f"different in {len(differ)} of {len(set(ta) | set(tb))} items "
            f"({', '.join(differ[:3])}{', ...' if len(differ) > 3 else ''})")


def compare(a: Path, b: Path) -> int:
    rounds_a = sorted(p.name for p in a.glob("round-*") if (p / "gate" / "report.json").exists())
    rounds_b = sorted(p.name for p in b.glob("round-*") if (p / "gate" / "report.json").exists())
    if rounds_a != rounds_b:
        print(f"rounds differ: {rounds_a} against {rounds_b}")
        return 1
    differ = 0
    for name in rounds_a:
        ga, gb = gate_numbers(a / name), gate_numbers(b / name)
        same = ga == gb
        differ += not same
        la, lb = losses(a / name), losses(b / name)
        loss_note = ("identical" if la == lb else
                     f"max |diff| {max((abs(x - y) for x, y in zip(la, lb)), default=0):.2e}"
                     if len(la) == len(lb) else f"{len(la)} against {len(lb)} steps")
        wa, wb = weights(a / name), weights(b / name)
        weight_note = ("identical" if wa == wb else "different") + f" ({wa or 'none'})"
        print(f"{name:<22} gate {'identical' if same else 'DIFFERENT'} ({ga['decision']}); "
              f"losses {loss_note} ({', '.join(f'{x:.4f}' for x in la)}); "
              f"model weights {weight_note}; candidate transcripts "
              f"{transcript_note(transcripts(a / name), transcripts(b / name))}")
        if not same:
            for key in ga:
                if ga[key] != gb[key]:
                    print(f"  {key}: {json.dumps(ga[key])[:300]}\n  against {json.dumps(gb[key])[:300]}")
        for canary, c in sorted(ga["canaries"].items()):
            comp = c["comparisons"].get(c["primary"], {})
            print(f"  {canary:<14} n={c['n_items']:<3} {c['primary']}: {comp.get('baseline')} -> "
                  f"{comp.get('candidate')} ({comp.get('wins')} W / {comp.get('losses')} L) "
                  f"{c['verdict']}")
    print("gate numbers identical" if not differ else f"gate numbers differ in {differ} round(s)")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="RUN_A RUN_B, then more pairs")
    ap.add_argument("--markdown", help="also write the printout here, with command and date")
    ap.add_argument("--note", default="", help="a line for the page (what each pair is)")
    args = ap.parse_args(argv)
    if len(args.runs) % 2:
        ap.error(f"runs come in pairs (A B [C D ...]); got {len(args.runs)}")
    status, pages = 0, []
    for a, b in zip(args.runs[::2], args.runs[1::2]):
        out = io.StringIO()
        with redirect_stdout(out):
            rc = compare(a, b)
        print(f"== {a} against {b}\n{out.getvalue()}", end="")
        status |= rc
        pages.append(f"## {a.name} against {b.name}: "
                     f"{'identical gate numbers' if rc == 0 else 'DIFFERENT'}\n\n"
                     f"```\n{out.getvalue()}```\n")
    if args.markdown:
        shown = ["python", "benchmarks/compare_runs.py"] + (argv if argv is not None
                                                             else sys.argv[1:])
        day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        verdict = "every pair identical" if not status else "a pair differs"
        Path(args.markdown).write_text(
            f"# Gate numbers, run against run\n\n{args.note}\n\nCommand: `{shlex.join(shown)}` "
            f"({day}). Exit status {status}: {verdict}.\n\n" + "\n".join(pages))
    return status


if __name__ == "__main__":
    sys.exit(main())
