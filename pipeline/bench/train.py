"""`pipeline bench train`: SFT tokens/s, padded against padding-free and packed, and GRPO s/step.

The same oracle rows go through TRL's default padded batching, padding-free batching (with
TRL's fused LM head scoring every position, as shipped, and only labelled positions, as the
pipeline trains: `pipeline.training.fused_head`) and best-fit-decreasing packing, one epoch each (or `--steps` steps), in one run. Each measurement
runs in its own fresh process, so the peak RSS printed is that mode's own. Tokens/s counts real
(non-padding) tokens over the trainer's runtime. `--json PATH` writes the same figures.

    python -m pipeline.bench.train --model tiny:64 --rows 16 --max-length 1024
"""
from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from data.jsonl import write_text_atomic
from data.tasks import KINDS, generate
from data.trajectory import Trajectory
from pipeline.models import EMBEDDED, resolve

MODES = {"padded": {"padding_free": False, "packing": False},
         # TRL's fused LM head as shipped: every position through the vocabulary on CPU
         "pf-full-head": {"padding_free": True, "packing": False},
         "padding-free": {"padding_free": True, "packing": False},
         "packing": {"padding_free": True, "packing": True}}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="pipeline bench train", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=EMBEDDED, help="model reference or HF directory")
    ap.add_argument("--rows", type=int, default=16, help="oracle trajectories to train on")
    ap.add_argument("--kinds", default="reasoning,single,parallel,chained,recovery,irrelevance",
                    help=f"comma list from {','.join(KINDS)} (mixed lengths, as in a round)")
    ap.add_argument("--max-length", type=int, default=1024, help="row / packed block limit")
    ap.add_argument("--batch-size", type=int, default=4, help="rows (or packed blocks) per step")
    ap.add_argument("--steps", type=int, default=-1, help="cap on SFT steps (-1: one epoch)")
    ap.add_argument("--grpo-steps", type=int, default=2, help="GRPO steps (0 skips GRPO)")
    ap.add_argument("--group-size", type=int, default=4, help="GRPO rollouts per task")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="GRPO tokens per turn")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    return ap.parse_args(argv)


def oracle_rows(n: int, kinds: list[str]) -> list[Trajectory]:
    per = {k: n // len(kinds) + (i < n % len(kinds)) for i, k in enumerate(kinds)}
    tasks = generate({k: c for k, c in per.items() if c}, namespace="bench")
    return [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in tasks]


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def _sft_child(mode: str, model_dir: str, rows: list[Trajectory], args: dict) -> dict:
    """One SFT measurement (runs in a fresh process)."""
    from pipeline.training import sft
    from pipeline.training.settings import SFTSettings
    from pipeline.training.sft import sft_trainer
    if mode == "pf-full-head":  # a fresh process: TRL's own switch stays untouched
        sft.score_labelled_positions_only = lambda: False
    settings = SFTSettings(max_length=args["max_length"], batch_size=args["batch_size"],
                           max_steps=args["steps"], epochs=1, save_steps=10_000,
                           logging_steps=10_000, **MODES[mode])
    with tempfile.TemporaryDirectory() as tmp:
        trainer, info = sft_trainer(rows, Path(model_dir), Path(tmp), settings, progress=False)
        result = trainer.train()
    runtime = result.metrics["train_runtime"]
    seen = int(trainer.state.num_input_tokens_seen)
    return {"mode": mode, "rows": info["rows_used"], "steps": trainer.state.global_step,
            "tokens": seen, "seconds": round(runtime, 2),
            "tokens_per_s": round(seen / runtime, 1), "peak_rss_mib": peak_rss_mib()}


def _grpo_child(model_dir: str, args: dict) -> dict:
    """GRPO seconds per step (rollout generation, tool execution, rewards and update)."""
    from pipeline.training.grpo import train_grpo
    from pipeline.training.settings import GRPOSettings
    tasks = generate({"single": 2, "reasoning": 2}, namespace="bench")
    settings = GRPOSettings(group_size=args["group_size"], tasks_per_step=1,
                            max_steps=args["grpo_steps"], max_new_tokens=args["max_new_tokens"],
                            max_turns=2, save_steps=10_000)
    with tempfile.TemporaryDirectory() as tmp:
        stats = train_grpo(tasks, Path(model_dir), Path(tmp), settings, progress=False)
    return {"steps": stats["steps"], "seconds_per_step": stats["seconds_per_step"],
            "group_size": settings.group_size, "max_new_tokens": settings.max_new_tokens,
            "reward": stats["reward"], "kl": stats["kl"], "peak_rss_mib": peak_rss_mib()}


def _in_fresh_process(fn, *a):
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *a).result()


def table(results: dict) -> str:
    sft = results["sft"]
    base = sft["padded"]["tokens_per_s"]
    lines = [f"SFT on {results['model']}: {sft['padded']['rows']} rows, max_length "
             f"{results['args']['max_length']}, batch {results['args']['batch_size']}",
             f"{'mode':<14}{'steps':>6}{'tokens':>9}{'seconds':>9}{'tokens/s':>10}"
             f"{'vs padded':>11}{'peak RSS MiB':>14}"]
    for mode, r in sft.items():
        lines.append(f"{mode:<14}{r['steps']:>6}{r['tokens']:>9}{r['seconds']:>9.1f}"
                     f"{r['tokens_per_s']:>10.1f}{r['tokens_per_s'] / base:>10.2f}x"
                     f"{r['peak_rss_mib']:>14.0f}")
    g = results.get("grpo")
    if g:
        lines.append(f"GRPO: {g['seconds_per_step']} s/step over {g['steps']} steps (group "
                     f"{g['group_size']}, 1 task/step, <= {g['max_new_tokens']} tokens/turn, "
                     f"2 turns), peak RSS {g['peak_rss_mib']:.0f} MiB, reward {g['reward']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise SystemExit(f"--kinds: unknown {bad}; choose from {', '.join(KINDS)}")
    model_dir = str(resolve(args.model))
    rows = oracle_rows(args.rows, kinds)
    opts = vars(args) | {"json": None}
    results = {"model": args.model, "args": {k: v for k, v in opts.items() if k != "json"},
               "sft": {}}
    t0 = time.perf_counter()
    for mode in MODES:
        results["sft"][mode] = _in_fresh_process(_sft_child, mode, model_dir, rows, opts)
    if args.grpo_steps > 0:
        results["grpo"] = _in_fresh_process(_grpo_child, model_dir, opts)
    results["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print(table(results))
    if args.json:
        write_text_atomic(args.json, json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
