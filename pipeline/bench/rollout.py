"""`pipeline bench rollout`: the same task set through every installed backend, one process.

Prints trajectories/s, generated tokens/s, turns per trajectory, the driver's share of wall
time, and the ratio to the transformers backend; `--json PATH` writes the same figures.
Engine start-up is timed apart from sampling. The untrained SmolLM2 rarely calls a tool, so
its trajectories are mostly one turn; pass a model directory produced by training (and its
GGUF with `--gguf`) to measure real multi-turn rollouts.

    python -m pipeline.bench.rollout --tasks 16 --kinds single,chained --max-tokens 64
    pipeline bench rollout --backends vllm --cpu-binds all,auto,nobind --model RUN
"""
from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from data.jsonl import write_text_atomic
from data.tasks import KINDS, generate

from engine.models import EMBEDDED
from engine.rollout import rollout
from engine.sampling import available_backends, make_backend
from engine.sampling.base import SamplingParams

ORDER = ["transformers", "vllm", "llama_cpp", "openai"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="pipeline bench rollout", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=EMBEDDED, help="model reference or HF directory")
    ap.add_argument("--gguf", default=None,
                    help="GGUF for llama_cpp (default: the shipped one for the embedded model)")
    ap.add_argument("--tasks", type=int, default=16, help="tasks per run (split across kinds)")
    ap.add_argument("--kinds", default="single,parallel,chained,recovery",
                    help=f"comma list from {','.join(KINDS)}")
    ap.add_argument("--k", type=int, default=2, help="samples per task")
    ap.add_argument("--max-tokens", type=int, default=64, help="max new tokens per turn")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--backends", default=None,
                    help="comma list (default: every installed one; openai needs --openai-url)")
    ap.add_argument("--openai-url", default=None, help="base URL of an OpenAI-compatible server")
    ap.add_argument("--openai-model", default="default", help="model name on that server")
    ap.add_argument("--kv-cache-gib", type=float, default=1.0, help="vLLM KV cache size")
    ap.add_argument("--cpu-binds", default="all",
                    help="vLLM-CPU thread bindings to run side by side, comma list of all, "
                         "auto, nobind or CPU lists (see engine.sampling.vllm_backend)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    return ap.parse_args(argv)


def _tasks(args) -> list:
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise SystemExit(f"--kinds: unknown {bad}; choose from {', '.join(KINDS)}")
    per = {k: args.tasks // len(kinds) + (i < args.tasks % len(kinds))
           for i, k in enumerate(kinds)}
    return generate({k: n for k, n in per.items() if n}, namespace="bench")


def _build(name: str, args):
    if name.startswith("vllm"):  # vllm or vllm[<cpu bind>]
        bind = name[5:-1] if "[" in name else "all"
        return make_backend("vllm", args.model, kv_cache_gib=args.kv_cache_gib, cpu_bind=bind)
    if name == "transformers":
        return make_backend("transformers", args.model, max_batch=args.batch_size)
    if name == "llama_cpp":
        gguf = args.gguf or (EMBEDDED if str(args.model) == EMBEDDED else None)
        if gguf is None:
            raise RuntimeError("llama_cpp needs --gguf for a model directory")
        return make_backend("llama_cpp", gguf)
    if name == "openai":
        if not args.openai_url:
            raise RuntimeError("openai needs --openai-url")
        return make_backend("openai", args.openai_model, base_url=args.openai_url,
                            tokenizer=args.model)
    raise RuntimeError(f"unknown backend {name}")


def run_one(name: str, tasks: list, args) -> dict:
    t0 = time.perf_counter()
    backend = _build(name, args)
    startup = time.perf_counter() - t0
    try:
        params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens)
        trajs, stats = rollout(tasks, backend, k=args.k, params=params, progress=True,
                               batch_size=args.batch_size)
    finally:
        backend.close()
        gc.collect()
    n = max(stats.trajectories, 1)
    return {"backend": name, "startup_s": round(startup, 2), "trajectories": stats.trajectories,
            "wall_s": round(stats.wall_s, 2), "backend_s": round(stats.backend_s, 2),
            "trajectories_per_s": round(stats.trajectories_per_s, 3),
            "tokens_per_s": round(stats.tokens_per_s, 2),
            "generated_tokens": stats.generated_tokens, "turns_per_trajectory":
                round(stats.turns / n, 2), "requests": stats.requests,
            "driver_overhead_share": round(stats.driver_overhead_share, 4),
            "successes": stats.successes, "finish": stats.finish}


def table(rows: list[dict]) -> str:
    base = next((r for r in rows if r["backend"] == "transformers" and "error" not in r), None)
    head = (f"{'backend':<13}{'traj/s':>8}{'tok/s':>9}{'x tf':>7}{'turns/traj':>11}"
            f"{'overhead':>10}{'wall s':>8}{'start s':>9}  finish")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['backend']:<13}skipped: {r['error']}")
            continue
        ratio = (r["tokens_per_s"] / base["tokens_per_s"]
                 if base and base["tokens_per_s"] else float("nan"))
        lines.append(f"{r['backend']:<13}{r['trajectories_per_s']:>8.3f}{r['tokens_per_s']:>9.1f}"
                     f"{ratio:>7.2f}{r['turns_per_trajectory']:>11.2f}"
                     f"{100 * r['driver_overhead_share']:>9.2f}%{r['wall_s']:>8.1f}"
                     f"{r['startup_s']:>9.1f}  {r['finish']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tasks = _tasks(args)
    names = ([b.strip() for b in args.backends.split(",")] if args.backends
             else [b for b in ORDER if b in available_backends()
                   and (b != "openai" or args.openai_url)])
    binds = [b.strip() for b in args.cpu_binds.split(",") if b.strip()]
    if len(binds) > 1:
        names = [x for n in names for x in ([f"vllm[{b}]" for b in binds] if n == "vllm" else [n])]
    rows = []
    for name in names:
        try:
            rows.append(run_one(name, tasks, args))
        except Exception as err:  # one failing backend must not hide the others' figures
            rows.append({"backend": name, "error": f"{type(err).__name__}: {err}"})
    print(f"\n{len(tasks)} tasks x k={args.k}, kinds {args.kinds}, max_tokens "
          f"{args.max_tokens}, temperature {args.temperature}, model {args.model}")
    print(table(rows))
    vllm_rows = [r for r in rows if r["backend"].startswith("vllm[") and "error" not in r]
    for r in vllm_rows[1:]:
        print(f"{r['backend']}: {r['tokens_per_s'] / vllm_rows[0]['tokens_per_s']:.2f}x the "
              f"generated tok/s of {vllm_rows[0]['backend']}")
    if args.json:
        write_text_atomic(args.json, json.dumps({"args": {k: str(v) for k, v in
                                                          vars(args).items()},
                                                 "results": rows}, indent=2))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":  # vLLM on CPU starts workers with spawn
    raise SystemExit(main())
