"""`pipeline bench rollout`: the same task set through every installed backend, one process.

Prints trajectories/s, generated tokens/s, turns per trajectory, the driver's share of wall
time, and the ratio to the transformers backend; `--json PATH` writes the same figures.
Engine start-up is timed apart from sampling. The untrained SmolLM2 rarely calls a tool, so
its trajectories are mostly one turn; pass a model directory produced by training (and its
GGUF with `--gguf`) to measure real multi-turn rollouts.

`--background-load N` measures every backend (every vLLM `--cpu-binds` setting) twice: alone,
then beside N busy processes (Python spin loops the bench starts and kills around sampling),
and prints each one's loaded / unloaded tok/s beside its fair share of the CPUs
(cores / (cores + N)): a thread binding that loses more than its share under load is the one
that slowed the default run's evaluation beside other jobs. `--markdown PATH` writes that
table with the command, date and machine, for `docs/results/`.

    python -m pipeline.bench.rollout --tasks 16 --kinds single,chained --max-tokens 64
    pipeline bench rollout --backends vllm --cpu-binds all,auto,nobind --model RUN
    pipeline bench rollout --backends vllm --cpu-binds all,auto,nobind --background-load 1 \
        --markdown docs/results/cpu-bind-under-load.md
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from data.jsonl import write_text_atomic
from data.tasks import KINDS, generate

from engine import machine
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
    ap.add_argument("--background-load", type=int, default=0, metavar="N",
                    help="also measure each backend beside N busy processes (spin loops the "
                         "bench starts and kills) and print loaded / unloaded tok/s")
    ap.add_argument("--markdown", type=Path, default=None,
                    help="write the load table as markdown (with command, date, machine) here")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    if args.background_load < 0:
        ap.error("--background-load takes N >= 0 busy processes")
    if args.markdown and not args.background_load:
        ap.error("--markdown writes the load table: give --background-load N too")
    return args


@contextmanager
def background_load(n: int):
    """`n` busy processes (a Python spin loop each, nice 0) while inside; killed on exit
    however it ends. Yields their pids."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


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


def run_one(name: str, tasks: list, args, load: int = 0) -> dict:
    """One backend's engine start and rollout; with `load`, the rollout (not the start) runs
    beside that many busy processes."""
    t0 = time.perf_counter()
    backend = _build(name, args)
    startup = time.perf_counter() - t0
    try:
        params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens)
        if args.background_load:  # one untimed task first: first-call costs skew the pair
            rollout(tasks[:1], backend, k=1, params=params, progress=False,
                    batch_size=args.batch_size)
        with background_load(load):
            trajs, stats = rollout(tasks, backend, k=args.k, params=params, progress=True,
                                   batch_size=args.batch_size)
    finally:
        backend.close()
        gc.collect()
    n = max(stats.trajectories, 1)
    return {"backend": name, "load": load, "startup_s": round(startup, 2),
            "trajectories": stats.trajectories,
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


def fair_share(load: int, cores: int | None = None) -> float:
    """The share of the CPUs left to the engine beside `load` busy processes, were the CPUs
    shared evenly among busy processes: cores / (cores + load), at most 1."""
    cores = cores or len(os.sched_getaffinity(0))
    return min(1.0, cores / (cores + load)) if load else 1.0


def load_rows(rows: list[dict]) -> list[dict]:
    """Per backend: unloaded and loaded tok/s, their ratio and the fair share."""
    out = []
    for r in rows:
        if r.get("load") or "error" in r:
            continue
        loaded = next((x for x in rows if x["backend"] == r["backend"] and x.get("load")
                       and "error" not in x), None)
        if loaded is None:
            continue
        ratio = loaded["tokens_per_s"] / r["tokens_per_s"] if r["tokens_per_s"] else float("nan")
        out.append({"backend": r["backend"], "load": loaded["load"],
                    "unloaded": r["tokens_per_s"], "loaded": loaded["tokens_per_s"],
                    "ratio": round(ratio, 3), "fair": round(fair_share(loaded["load"]), 3)})
    return out


def load_table(rows: list[dict], markdown: bool = False) -> str:
    """Sampling tok/s per backend (vLLM per thread binding) alone and under load, side by
    side, with the loaded / unloaded ratio against the fair share."""
    head = ["backend", "tok/s alone", "tok/s loaded", "loaded / alone", "fair share",
            "verdict"]
    body = [[r["backend"], f"{r['unloaded']:.1f}", f"{r['loaded']:.1f}", f"{r['ratio']:.2f}",
             f"{r['fair']:.2f}", "within share" if r["ratio"] >= r["fair"] else
             "loses more than its share"] for r in rows]
    if markdown:
        return "\n".join("| " + " | ".join(c) + " |"
                         for c in [head, ["---"] * len(head), *body])
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(cells, widths))
                     for cells in [head, *body])


def write_markdown(path: Path, rows: list[dict], args, argv: list[str] | None) -> None:
    """The load table as a results file: command, date, machine and whether the CPU was
    shared (the 1-minute load average before the bench), then the table."""
    m = machine.describe()
    libs = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    text = "\n".join([
        "# Sampling under background load, per backend and vLLM-CPU thread binding", "",
        f"- command: `pipeline bench rollout {shlex.join(argv or [])}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}",
        f"- machine: {m['cpu']} ({m['capability']}), {m['cores']} cores; {libs}",
        f"- CPU shared: load average {args.load_before:.2f} before the bench (beside the "
        f"{args.background_load} busy process(es) it started itself)",
        f"- workload: {args.tasks} tasks x k={args.k}, kinds {args.kinds}, max_tokens "
        f"{args.max_tokens}, model {args.model}", "",
        load_table(rows, markdown=True), "",
        "fair share: cores / (cores + busy processes), the engine's share were the CPUs "
        "shared evenly.", ""])
    write_text_atomic(path, text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tasks = _tasks(args)
    names = ([b.strip() for b in args.backends.split(",")] if args.backends
             else [b for b in ORDER if b in available_backends()
                   and (b != "openai" or args.openai_url)])
    binds = [b.strip() for b in args.cpu_binds.split(",") if b.strip()]
    if len(binds) > 1:
        names = [x for n in names for x in ([f"vllm[{b}]" for b in binds] if n == "vllm" else [n])]
    args.load_before = os.getloadavg()[0]
    rows = []
    for name in names:
        for load in dict.fromkeys([0, args.background_load]):
            try:
                rows.append(run_one(name, tasks, args, load))
            except Exception as err:  # one failing backend must not hide the others' figures
                rows.append({"backend": name, "load": load,
                             "error": f"{type(err).__name__}: {err}"})
    print(f"\n{len(tasks)} tasks x k={args.k}, kinds {args.kinds}, max_tokens "
          f"{args.max_tokens}, temperature {args.temperature}, model {args.model}")
    print(table([r for r in rows if not r.get("load")]))
    if args.background_load:
        loaded = load_rows(rows)
        print(f"\nbeside {args.background_load} busy process(es) ({len(os.sched_getaffinity(0))}"
              f" cores; load average {args.load_before:.2f} before the bench):")
        print(load_table(loaded))
        if args.markdown:
            write_markdown(args.markdown, loaded, args,
                           sys.argv[1:] if argv is None else argv)
            print(f"written: {args.markdown}")
    vllm_rows = [r for r in rows if r["backend"].startswith("vllm[") and "error" not in r
                 and not r.get("load")]
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
