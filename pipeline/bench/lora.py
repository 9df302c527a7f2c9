"""`pipeline bench lora`: a round's new LoRA adapter served by vLLM, against merge + restart.

After training, a round merges its adapter into the base (`engine.training.merge`) and
starts a vLLM engine on the merged model for its gate. vLLM can instead serve the adapter on
top of the base weights (no merge; on CPU through its Punica CPU kernels). This runs both
paths on the same tasks, greedy, in one process, and prints per path the seconds to prepare
(merge), to start the engine and to sample, generated tokens/s, and the share of trajectories
whose tokens are identical on both paths.

    pipeline bench lora --adapter runs/default/round-1-grounding/adapter
"""
from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path

from data.jsonl import write_text_atomic
from data.tasks import generate

from engine.models import EMBEDDED, resolve
from engine.rollout import rollout
from engine.sampling import make_backend
from engine.sampling.base import SamplingParams

PATHS = ("merge+restart", "adapter")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="pipeline bench lora", description=__doc__.split("\n")[0])
    ap.add_argument("--adapter", type=Path, required=True, help="a PEFT adapter directory")
    ap.add_argument("--base", default=EMBEDDED, help="the model the adapter was trained on")
    ap.add_argument("--tasks", type=int, default=16, help="tasks (chained, recovery, single)")
    ap.add_argument("--max-tokens", type=int, default=96, help="max new tokens per turn")
    ap.add_argument("--kv-cache-gib", type=float, default=1.0, help="vLLM KV cache size")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    return ap.parse_args(argv)


def run_path(path: str, tasks: list, args, tmp: Path) -> tuple[dict, list]:
    """Prepare, start and sample one path; its figures and its trajectories' tokens."""
    t0 = time.perf_counter()
    if path == "merge+restart":
        from engine.training.merge import merge_adapter
        model, extra = merge_adapter(args.base, args.adapter, tmp / "merged"), {}
    else:
        model, extra = args.base, {"lora_adapter": args.adapter}
    prepared = time.perf_counter()
    backend = make_backend("vllm", model, kv_cache_gib=args.kv_cache_gib, **extra)
    started = time.perf_counter()
    try:
        params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
        trajs, stats = rollout(tasks, backend, k=1, params=params, progress=True)
    finally:
        backend.close()
        gc.collect()
    done = time.perf_counter()
    return ({"path": path, "prepare_s": round(prepared - t0, 2),
             "start_s": round(started - prepared, 2), "sampling_s": round(done - started, 2),
             "total_s": round(done - t0, 2), "tokens_per_s": round(stats.tokens_per_s, 2),
             "generated_tokens": stats.generated_tokens, "successes": stats.successes},
            [t.turn_token_ids for t in trajs])


def table(rows: list[dict], same: float) -> str:
    head = (f"{'path':<15}{'prepare s':>10}{'start s':>9}{'sampling s':>12}{'tok/s':>8}"
            f"{'total s':>9}{'successes':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['path']:<15}{r['prepare_s']:>10.1f}{r['start_s']:>9.1f}"
                     f"{r['sampling_s']:>12.1f}{r['tokens_per_s']:>8.1f}{r['total_s']:>9.1f}"
                     f"{r['successes']:>11}")
    lines.append(f"trajectories with identical tokens on both paths: {same:.0%}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.adapter / "adapter_config.json").exists():
        raise SystemExit(f"--adapter {args.adapter}: no adapter_config.json")
    args.base = resolve(args.base)   # a reference such as embedded:smollm2-135m -> its directory
    n = args.tasks
    tasks = generate({"chained": n - 2 * (n // 3), "recovery": n // 3, "single": n // 3},
                     namespace="bench")
    rows, tokens = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for path in PATHS:
            row, toks = run_path(path, tasks, args, Path(tmp))
            rows.append(row)
            tokens.append(toks)
    same = sum(a == b for a, b in zip(*tokens)) / max(len(tasks), 1)
    print(f"\n{len(tasks)} tasks, greedy, max_tokens {args.max_tokens}, adapter {args.adapter}")
    print(table(rows, same))
    if args.json:
        write_text_atomic(args.json, json.dumps({"args": {k: str(v) for k, v in vars(args)
                                                          .items()}, "results": rows,
                                                 "identical_share": same}, indent=2))
    return 0


if __name__ == "__main__":  # vLLM on CPU starts workers with spawn
    raise SystemExit(main())
