"""`pipeline bench train`: SFT tokens/s of every batching mode on the same rows, and GRPO s/step.

The same oracle rows go through TRL's default padded batching (random order), padding-free batching
(with TRL's fused LM head scoring every position, as shipped, `pf-full-head`, and only labelled
positions: `engine.training.fused_head`; rows attending one by one, `pf-rows`, and with a
bfloat16 base, `pf-rows-bf16`, what rounds train with) and best-fit-decreasing packing. Each
measurement runs in its own fresh process, so the peak RSS printed is that mode's own; `--repeats
R` runs every mode R times back to back and prints medians (ratios are taken within a repeat,
which shares the machine's load). Tokens/s counts real (non-padding) row tokens over the
trainer's runtime; CPU seconds (all threads) are printed beside it, since on a shared machine
they move less with other jobs' load than wall time. `--threads N` sets torch's threads in every
mode. Every mode's first losses are compared with those of the mode that sees the same batches
(`SAME_BATCHES`). `--mix grounding` trains on a round's task mix and SFT settings from the
default preset, its tasks made as the round makes them (domains cycled). `--json PATH` writes the
same figures; `--from-json PATH` prints their table again.

    python -m pipeline.bench.train --model tiny:64 --rows 16 --max-length 1024
    pipeline bench train --mix grounding --steps 20 --grpo-steps 0 --threads 1 --repeats 2
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

from data.jsonl import write_text_atomic
from data.tasks import KINDS, domain_cycle, generate, make
from data.trajectory import Trajectory
from engine import machine
from engine.models import EMBEDDED, resolve
from pipeline.bench import capability

# Every mode but `pf-rows-bf16` keeps a float32 base, so figures stay comparable with older runs.
F32 = {"base_dtype": "float32"}
# Batching of each mode (SFTSettings fields); `pf-full-head` also changes what the trainer does.
MODES = {"padded": {"padding_free": False, "packing": False, **F32},
         # TRL's fused LM head as shipped: every position through the vocabulary on CPU
         "pf-full-head": {"padding_free": True, "packing": False, **F32},
         # random padding-free batches, each row's attention on its own
         "pf-rows": {"padding_free": True, "packing": False, **F32},
         # and the frozen base in bfloat16 under autocast (sft.base_dtype auto): the default
         "pf-rows-bf16": {"padding_free": True, "packing": False, "base_dtype": "auto"},
         "packing": {"padding_free": True, "packing": True, **F32}}
BASELINE = "padded"
# each mode's reference on the same batches in the same order: their first losses must agree
SAME_BATCHES = {"pf-full-head": "padded", "pf-rows": "padded", "pf-rows-bf16": "padded"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="pipeline bench train", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=EMBEDDED, help="model reference or HF directory")
    ap.add_argument("--mix", default=None,
                    help="a round of the default preset (e.g. grounding): its task mix and its "
                         "SFT settings (flags below still override)")
    ap.add_argument("--rows", type=int, default=None,
                    help="oracle trajectories (default 16; with --mix the round's count, "
                         "scaled to this when given)")
    ap.add_argument("--kinds", default="reasoning,single,parallel,chained,recovery,irrelevance",
                    help=f"comma list from {','.join(KINDS)} (without --mix)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of SFT modes")
    ap.add_argument("--max-length", type=int, default=None, help="row / packed block limit "
                                                                 "(default 1024)")
    ap.add_argument("--batch-size", type=int, default=None, help="rows per step (default 4)")
    ap.add_argument("--lr", type=float, default=None, help="learning rate")
    ap.add_argument("--lora-r", type=int, default=None, help="LoRA rank")
    ap.add_argument("--lora-alpha", type=int, default=None, help="LoRA alpha")
    ap.add_argument("--lora-dropout", type=float, default=None, help="LoRA dropout")
    ap.add_argument("--steps", type=int, default=-1, help="cap on SFT steps (-1: one epoch)")
    ap.add_argument("--loss-steps", type=int, default=10,
                    help="first logged steps whose losses are compared")
    ap.add_argument("--repeats", type=int, default=1, help="runs of every mode (medians)")
    ap.add_argument("--bf16", choices=("auto", "on", "off"), default="auto",
                    help="bf16 autocast in every SFT mode (auto: the round's setting, on where "
                         "the CPU computes bf16 natively); off compares losses in fp32")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads in every SFT mode (0: torch's default)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds one mode's run may take; a slower one is stopped and "
                         "recorded as not finished in that time (the other modes still run)")
    ap.add_argument("--grpo-steps", type=int, default=2, help="GRPO steps (0 skips GRPO)")
    ap.add_argument("--group-size", type=int, default=4, help="GRPO rollouts per task")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="GRPO tokens per turn")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--from-json", type=Path, action="append", default=None,
                    help="print the table of results written by --json (nothing is measured); "
                         "repeat it with --markdown for the dtype table across capabilities")
    ap.add_argument("--markdown", type=Path, default=None,
                    help="with --from-json: write the per-capability dtype table "
                         "(docs/results/train-capability.md) here")
    ap.add_argument("--note", default=None, help="with --markdown: a line on how the runs "
                                                 "were made (shared CPU, emulation)")
    return ap.parse_args(argv)


def oracle_rows(per_kind: dict[str, int], domains: list[str] | None = None,
                offer_for: Callable[[str], int] | None = None) -> list[Trajectory]:
    """Oracle demonstrations of the tasks, domains cycled task by task and tools offered
    (`offer_for`: kind -> most tools, a round's `offer_for`) as a round does."""
    tasks = [make(kind, i, split="train", namespace="bench",
                  domains=domain_cycle(kind, i, domains),
                  **({"offered_tools": offer_for(kind)} if offer_for else {}))
             for kind, n in per_kind.items() for i in range(n)]
    return [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in tasks]


def spread(n: int, kinds: list[str]) -> dict[str, int]:
    return {k: n // len(kinds) + (i < n % len(kinds)) for i, k in enumerate(kinds)}


def scaled(counts: dict[str, int], n: int) -> dict[str, int]:
    """`counts` scaled to about `n` in all, every kind kept with at least one row."""
    total = sum(counts.values())
    return {k: max(1, round(c * n / total)) for k, c in counts.items() if c}


def round_offers(args: argparse.Namespace) -> Callable[[str], int] | None:
    """With `--mix`: that round's tools-offered-per-kind (as its tasks are made)."""
    if not args.mix:
        return None
    from pipeline import config
    return config.load(preset="default").rounds[args.mix].offer_for


def workload(args: argparse.Namespace) -> tuple[dict[str, int], list[str] | None, dict]:
    """Task counts, their domains and the SFT settings (as a dict) every mode starts from."""
    from engine.training.settings import LoraSettings, SFTSettings
    if args.mix:
        from pipeline import config
        rounds = config.load(preset="default").rounds
        sft_rounds = [name for name, r in rounds.items() if hasattr(r, "sft")]
        if args.mix not in sft_rounds:
            raise SystemExit(f"--mix: {args.mix!r} is not an SFT round of the default preset; "
                             f"choose from {', '.join(sft_rounds)}")
        counts = dict(rounds[args.mix].tasks)
        counts = scaled(counts, args.rows) if args.rows else counts
        domains, base = rounds[args.mix].domains or None, rounds[args.mix].sft
    else:
        kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            raise SystemExit(f"--kinds: unknown {bad}; choose from {', '.join(KINDS)}")
        counts, domains = spread(args.rows or 16, kinds), None
        base = SFTSettings(max_length=1024, batch_size=4)
    lora = base.lora.model_dump()
    for flag, key in (("lora_r", "r"), ("lora_alpha", "alpha"), ("lora_dropout", "dropout")):
        if getattr(args, flag) is not None:
            lora[key] = getattr(args, flag)
    sft = {"lora": LoraSettings(**lora).model_dump(), "lr": args.lr or base.lr,
           "batch_size": args.batch_size or base.batch_size,
           "max_length": args.max_length or base.max_length,
           "bf16": base.bf16 if args.bf16 == "auto" else args.bf16 == "on",
           "seed": base.seed, "max_steps": args.steps, "epochs": 1, "save_steps": 10_000,
           "logging_steps": 1}
    return counts, domains, sft


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def _sft_child(mode: str, model_dir: str, rows: list[Trajectory], sft: dict,
               threads: int) -> dict:
    """One SFT measurement (runs in a fresh process)."""
    import torch

    from engine.training import sft as sft_module
    from engine.training.settings import SFTSettings
    from engine.training.sft import sft_trainer
    if mode == "pf-full-head":  # a fresh process: TRL's own switch stays untouched
        sft_module.score_labelled_positions_only = lambda: False
    if threads:
        torch.set_num_threads(threads)
    settings = SFTSettings(**sft, **MODES[mode])
    with tempfile.TemporaryDirectory() as tmp:
        trainer, info = sft_trainer(rows, Path(model_dir), Path(tmp), settings, progress=False)
        cpu0 = time.process_time()
        result = trainer.train()
        cpu = time.process_time() - cpu0
    runtime = result.metrics["train_runtime"]
    seen = int(trainer.state.num_input_tokens_seen)
    return {"mode": mode, "rows": info["rows_used"], "steps": trainer.state.global_step,
            "tokens": seen, "seconds": round(runtime, 2),
            "tokens_per_s": round(seen / runtime, 1), "cpu_seconds": round(cpu, 1),
            "tokens_per_cpu_s": round(seen / cpu, 1), "threads": torch.get_num_threads(),
            "peak_rss_mib": peak_rss_mib(),
            "losses": [r["loss"] for r in trainer.state.log_history if "loss" in r]}


def _grpo_child(model_dir: str, args: dict) -> dict:
    """GRPO seconds per step (rollout generation, tool execution, rewards and update)."""
    from engine.training.grpo import train_grpo
    from engine.training.settings import GRPOSettings
    tasks = generate({"single": 2, "reasoning": 2}, namespace="bench")
    settings = GRPOSettings(group_size=args["group_size"], tasks_per_step=1,
                            max_steps=args["grpo_steps"], max_new_tokens=args["max_new_tokens"],
                            max_turns=2, save_steps=10_000)
    with tempfile.TemporaryDirectory() as tmp:
        stats = train_grpo(tasks, Path(model_dir), Path(tmp), settings, progress=False)
    return {"steps": stats["steps"], "seconds_per_step": stats["seconds_per_step"],
            "group_size": settings.group_size, "max_new_tokens": settings.max_new_tokens,
            "reward": stats["reward"], "kl": stats["kl"], "peak_rss_mib": peak_rss_mib()}


def _in_fresh_process(fn, *a, timeout: float | None = None):
    pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
    try:
        return pool.submit(fn, *a).result(timeout=timeout)
    except TimeoutError:
        for proc in list(pool._processes.values()):   # the one child still computing
            proc.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _measure(mode: str, *a, timeout: float | None = None) -> dict:
    """One mode's result, or why it has none: on a shared machine the kernel's OOM killer may
    end one mode's process, or it outlasts `timeout`; the other modes still run."""
    try:
        return _in_fresh_process(_sft_child, mode, *a, timeout=timeout)
    except BrokenProcessPool:
        return {"mode": mode, "failed": "its process was killed (out of memory?)"}
    except TimeoutError:
        return {"mode": mode, "failed": f"did not finish in {timeout:g} s",
                "timeout_s": timeout}


def summarise(runs: list[dict[str, dict]], loss_steps: int) -> dict:
    """Per mode: the median run (by tokens/s), the median of its per-repeat ratio to the
    baseline, every repeat's tokens/s, and its first losses against its same-batch reference.
    Ratios and loss differences come only from repeats where both modes finished."""
    def done(run, *modes):
        return all(m in run and "failed" not in run[m] for m in modes)

    def loss_diffs(a, b):
        """|loss a - loss b| over the first steps of every repeat where both finished."""
        return [abs(x - y) for r in runs if done(r, a, b)
                for x, y in zip(r[a]["losses"][:loss_steps], r[b]["losses"][:loss_steps])]
    out = {}
    for mode in runs[0]:
        per = [r[mode] for r in runs if done(r, mode)]
        if not per:
            out[mode] = runs[0][mode]
            continue
        med = sorted(per, key=lambda r: r["tokens_per_s"])[(len(per) - 1) // 2]
        out[mode] = {**med, "repeats_tokens_per_s": [r["tokens_per_s"] for r in per]}
        for key, ratio, ref in (("tokens_per_s", "vs_baseline", BASELINE),
                                ("tokens_per_cpu_s", "cpu_vs_baseline", BASELINE)):
            ratios = [r[mode][key] / r[ref][key] for r in runs if done(r, mode, ref)]
            out[mode][key] = statistics.median(r[key] for r in per)
            out[mode][ratio] = round(statistics.median(ratios), 3) if ratios else None
        diffs = loss_diffs(mode, SAME_BATCHES[mode]) if mode in SAME_BATCHES else []
        out[mode]["loss_max_diff"] = max(diffs) if diffs else None
    return {"sft": out}


def table_machine(m: dict) -> str:
    """What the CPU computes with: the `auto` dtype choices follow it (bf16 only where torch
    dispatches AVX-512 kernels; `ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2` emulates an
    AVX2-only CPU on a newer one)."""
    libs = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    return (f"machine: {m['cpu']}, CPU capability {m['capability']} "
            f"(torch.backends.cpu.get_cpu_capability()), {m['cores']} cores; {libs}")


def table(results: dict) -> str:
    sft, args = results["sft"], results["args"]
    first = next(r for r in [*sft.values(), {"rows": 0, "threads": 0}] if "failed" not in r)
    m = results.get("machine")
    lines = [table_machine(m)] if m else []
    lines += [f"SFT on {results['model']}: {first['rows']} rows, max_length {args['max_length']}, "
             f"batch {args['batch_size']}, lr {args['lr']}, LoRA r {args['lora']['r']} alpha "
             f"{args['lora']['alpha']} dropout {args['lora']['dropout']}, "
             f"{first['threads']} thread(s), {'bf16 autocast' if args['bf16'] else 'fp32'}, "
             f"{results['repeats']} repeat(s), medians",
             f"{'mode':<16}{'steps':>6}{'tokens':>8}{'seconds':>9}{'tokens/s':>10}"
             f"{'vs ' + BASELINE:>11}{'CPU s':>8}{'tok/CPU-s':>10}{'vs ' + BASELINE:>11}"
             f"{'peak RSS MiB':>14}  max |loss diff| vs same batches "
             f"(first {results['loss_steps']} steps)"]

    def ratio(x):
        return f"{x:>10.2f}x" if x is not None else f"{'-':>11}"
    for mode, r in sft.items():
        if "failed" in r:
            lines.append(f"{mode:<16}failed: {r['failed']}")
            continue
        lines.append(f"{mode:<16}{r['steps']:>6}{r['tokens']:>8}{r['seconds']:>9.1f}"
                     f"{r['tokens_per_s']:>10.1f}{ratio(r['vs_baseline'])}"
                     f"{r['cpu_seconds']:>8.0f}{r['tokens_per_cpu_s']:>10.1f}"
                     f"{ratio(r['cpu_vs_baseline'])}{r['peak_rss_mib']:>14.0f}"
                     + (f"  {r['loss_max_diff']:.2e} vs {SAME_BATCHES[mode]}"
                        if r.get("loss_max_diff") is not None else ""))
    g = results.get("grpo")
    if g:
        lines.append(f"GRPO: {g['seconds_per_step']} s/step over {g['steps']} steps (group "
                     f"{g['group_size']}, 1 task/step, <= {g['max_new_tokens']} tokens/turn, "
                     f"2 turns), peak RSS {g['peak_rss_mib']:.0f} MiB, reward {g['reward']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown and not args.from_json:
        raise SystemExit("--markdown writes the table of saved runs: give --from-json too")
    missing = [str(p) for p in args.from_json or [] if not p.is_file()]
    if missing:
        raise SystemExit(f"--from-json: no such file {', '.join(missing)}: give the files that "
                         "`pipeline bench train --json` wrote")
    if args.from_json:
        if args.markdown:
            print(capability.write(args.markdown, args.from_json, capability.auto_settings(), args.note))
            return 0
        for path in args.from_json:
            saved = json.loads(path.read_text())
            print(table(saved | summarise(saved["runs"], saved["loss_steps"])))
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise SystemExit(f"--modes: unknown {bad}; choose from {', '.join(MODES)}")
    counts, domains, sft = workload(args)
    model_dir = str(resolve(args.model))
    rows = oracle_rows(counts, domains, round_offers(args))
    results = {"model": args.model, "tasks": counts, "domains": domains, "args": sft,
               "repeats": args.repeats, "loss_steps": args.loss_steps,
               "machine": machine.describe(), "load_before": round(os.getloadavg()[0], 2)}
    print(table_machine(results["machine"]), flush=True)  # before minutes of training
    t0 = time.perf_counter()
    runs = []
    for _ in range(args.repeats):
        runs.append({})
        for mode in modes:
            runs[-1][mode] = _measure(mode, model_dir, rows, sft, args.threads,
                                      timeout=args.timeout)
            if args.json:   # what is done so far survives a killed run
                write_text_atomic(args.json, json.dumps(results | {"runs": runs}, indent=2))
    results |= summarise(runs, args.loss_steps) | {"runs": runs}
    if args.grpo_steps > 0:
        results["grpo"] = _in_fresh_process(_grpo_child, model_dir, vars(args) | {"json": None})
    results["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print(table(results))
    if args.json:
        write_text_atomic(args.json, json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
