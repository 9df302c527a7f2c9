"""GPU check: run the project's training paths on a CUDA device and report what happened.

Each check runs in its own fresh process (its peak GPU memory is its own, a crash or hang of
one does not take the others down) under a time limit; the parent prints a compact table and
writes every figure to $OUT/gpu_check.json (or --json PATH).

Checks (in order):
  sft          engine.training.sft.train_sft (TRL SFTTrainer + PEFT LoRA, adapter saved,
               merged, curve plotted), tiny random Llama (width 64) with the SmolLM2 tokenizer
  grpo         engine.training.grpo.train_grpo (TRL GRPOTrainer, multi-turn rollouts,
               transformers generation; use_vllm false)
  launch       accelerate launch --num_processes 1 -m engine.training sft ...
  qlora        train_sft with lora.qlora true (bitsandbytes 4-bit NF4 base)
  sft_135m     sft_trainer on a random-weight model of SmolLM2-135M's shape (from its config;
               no weights travel): throughput of a realistic width, losses meaningless
  launch_fsdp  accelerate launch with engine/training/accelerate/fsdp.yaml, one process

    PYTHONPATH=. TOOLSMITH_CACHE=/tmp/tscache python benchmarks/gpu_check.py
    python benchmarks/gpu_check.py --dry-run          # CPU, 1-2 steps: imports and APIs only
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ["sft", "grpo", "launch", "qlora", "sft_135m", "launch_fsdp"]
KINDS = ["single", "parallel", "chained", "recovery", "irrelevance", "reasoning"]
CONFIG_135M = ROOT / ".gpu" / "smollm2-135m-config.json"


# ------------------------------------------------------------------------------ helpers

def versions() -> dict:
    import importlib.metadata as md
    out = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "pydantic",
                 "jsonschema", "huggingface_hub", "pyarrow", "bitsandbytes", "vllm"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    try:
        import torch
        out["cuda"] = torch.version.cuda
        out["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception as e:  # noqa: BLE001
        out["device"] = f"torch error: {e}"
    return out


def cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def reset_peak():
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_mib() -> float | None:
    import torch
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def oracle_rows(n: int):
    """`n` oracle trajectories, kinds spread evenly (as `pipeline bench train` makes them)."""
    from pipeline.bench.train import oracle_rows as rows, spread
    return rows(spread(n, KINDS))


def tiny_dir(width: int = 64) -> Path:
    from engine.models import tiny_model_dir
    return tiny_model_dir(width)


def model_device(trainer) -> str:
    return str(next(trainer.model.parameters()).device)


def sft_settings(a, **kw):
    from engine.training.settings import SFTSettings
    base = dict(max_steps=a.sft_steps, batch_size=4, max_length=1024, save_steps=10_000,
                logging_steps=1, lr=2e-4)
    base.update(kw)
    return SFTSettings(**base)


def losses_of(trainer) -> list[float]:
    return [round(r["loss"], 4) for r in trainer.state.log_history if "loss" in r]


def timed_train(trainer) -> dict:
    """Train a configured trainer; steps, tokens/s, losses, runtime."""
    from transformers.trainer_callback import PrinterCallback
    trainer.remove_callback(PrinterCallback)
    result = trainer.train()
    runtime = result.metrics["train_runtime"]
    seen = int(trainer.state.num_input_tokens_seen or 0)
    losses = losses_of(trainer)
    return {"steps": trainer.state.global_step, "tokens_seen": seen,
            "train_seconds": round(runtime, 2),
            "tokens_per_s": round(seen / runtime, 1) if runtime else None,
            "first_loss": losses[0] if losses else None,
            "final_loss": losses[-1] if losses else None, "losses": losses,
            "model_device": model_device(trainer)}


# ------------------------------------------------------------------------------ checks

def check_sft(a, tmp: Path) -> dict:
    """The project's own SFT entry point, end to end (train, save adapter, merge, plot)."""
    from engine.training.sft import train_sft
    rows = oracle_rows(a.rows)
    settings = sft_settings(a)
    model = tiny_dir(64)
    reset_peak()
    stats = train_sft(rows, model, tmp / "sft", settings, progress=False)
    out = tmp / "sft"
    return {"model": "tiny-llama w64 l2", "bf16": settings.bf16,
            "padding_free": settings.padding_free, "rows_used": stats["rows_used"],
            "steps": stats["steps"], "tokens_seen": stats["tokens_seen"],
            "train_seconds": stats["train_seconds"], "tokens_per_s": stats["tokens_per_s"],
            "first_loss": stats["first_loss"], "final_loss": stats["final_loss"],
            "peak_gpu_mib": peak_mib(),
            "adapter_saved": (out / "adapter" / "adapter_config.json").exists(),
            "merged_model_saved": (out / "model" / "config.json").exists(),
            "loss_png": (out / "loss.png").exists()}


def check_qlora(a, tmp: Path) -> dict:
    """train_sft with a 4-bit NF4 base (bitsandbytes)."""
    if not cuda():
        return {"status": "skipped", "reason": "no CUDA device (QLoRA is refused at config time)"}
    import bitsandbytes  # noqa: F401  (fail early with the import error if it cannot load)
    from engine.training.settings import LoraSettings
    from engine.training.sft import train_sft
    rows = oracle_rows(a.rows)
    settings = sft_settings(a, lora=LoraSettings(qlora=True))
    reset_peak()
    stats = train_sft(rows, tiny_dir(64), tmp / "qlora", settings, progress=False)
    out = tmp / "qlora"
    return {"model": "tiny-llama w64 l2 (4-bit NF4)", "bitsandbytes": versions()["bitsandbytes"],
            "steps": stats["steps"], "tokens_per_s": stats["tokens_per_s"],
            "train_seconds": stats["train_seconds"],
            "first_loss": stats["first_loss"], "final_loss": stats["final_loss"],
            "peak_gpu_mib": peak_mib(),
            "merged_model_saved": (out / "model" / "config.json").exists()}


def check_grpo(a, tmp: Path) -> dict:
    """train_grpo as `pipeline bench train` calls it (transformers generation)."""
    from data.tasks import generate
    from engine.training.grpo import train_grpo
    from engine.training.settings import GRPOSettings
    tasks = generate({"single": 2, "reasoning": 2}, namespace="bench")
    settings = GRPOSettings(group_size=4, tasks_per_step=1, max_steps=a.grpo_steps,
                            max_new_tokens=a.max_new_tokens, max_turns=2, save_steps=10_000)
    reset_peak()
    stats = train_grpo(tasks, tiny_dir(64), tmp / "grpo", settings, progress=False)
    return {"model": "tiny-llama w64 l2", "bf16": settings.bf16, "use_vllm": settings.use_vllm,
            "generation": stats["generation"], "group_size": settings.group_size,
            "max_new_tokens": settings.max_new_tokens, "steps": stats["steps"],
            "train_seconds": stats["train_seconds"],
            "seconds_per_step": stats["seconds_per_step"], "reward": stats["reward"],
            "kl": stats["kl"], "tool_calls_per_trajectory": stats["tool_calls_per_trajectory"],
            "unfinished_share": stats["unfinished_share"],
            "zero_variance_share": stats["zero_variance_share"], "peak_gpu_mib": peak_mib(),
            "merged_model_saved": (tmp / "grpo" / "model" / "config.json").exists()}


def build_135m(tmp: Path) -> Path:
    """A random-weight model of SmolLM2-135M's shape from its config (nothing downloaded)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from engine.models import load_tokenizer, smollm2_tokenizer_dir
    conf = json.loads(CONFIG_135M.read_text())
    conf = {k: v for k, v in conf.items() if not k.startswith("_") and k != "transformers_version"}
    config = AutoConfig.for_model(**conf)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    target = tmp / "smollm2-135m-random"
    model.save_pretrained(target, safe_serialization=True)
    load_tokenizer(smollm2_tokenizer_dir()).save_pretrained(target)
    return target


def check_sft_135m(a, tmp: Path) -> dict:
    from engine.training.sft import sft_trainer
    model = build_135m(tmp)
    rows = oracle_rows(a.rows)
    settings = sft_settings(a, max_steps=a.sft_135m_steps)
    trainer, info = sft_trainer(rows, model, tmp / "sft135", settings, progress=False)
    reset_peak()
    res = timed_train(trainer)
    return {"model": "SmolLM2-135M shape, random weights", "bf16": settings.bf16,
            "padding_free": settings.padding_free, "rows_used": info["rows_used"], **res,
            "peak_gpu_mib": peak_mib()}


def _launch(a, tmp: Path, fsdp: bool) -> dict:
    import yaml
    from data.jsonl import write_atomic
    if fsdp and not cuda():
        return {"status": "skipped", "reason": "no CUDA device (FSDP config needs GPUs)"}
    work = tmp / ("launch_fsdp" if fsdp else "launch")
    work.mkdir(parents=True, exist_ok=True)
    write_atomic(work / "accepted.jsonl", oracle_rows(a.rows))
    (work / "sft.yaml").write_text(yaml.safe_dump(
        {"max_steps": a.sft_steps, "batch_size": 4, "max_length": 1024, "save_steps": 10_000}))
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if fsdp:
        cmd += ["--config_file", str(ROOT / "engine/training/accelerate/fsdp.yaml")]
    else:
        cmd += ["--num_machines", "1", "--dynamo_backend", "no",
                "--mixed_precision", "bf16" if cuda() else "no"]
    cmd += ["--num_processes", "1", "-m", "engine.training", "sft",
            "--trajectories", str(work / "accepted.jsonl"), "--model", str(tiny_dir(64)),
            "--out", str(work / "round"), "--settings", str(work / "sft.yaml")]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                       timeout=a.child_timeout - 20)
    wall = round(time.perf_counter() - t0, 1)
    stats = None
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            try:
                stats = json.loads(line)
                break
            except ValueError:
                pass
    out = {"command": " ".join(["accelerate launch"] + cmd[3:]), "rc": p.returncode,
           "wall_seconds": wall, "ran": p.returncode == 0 and stats is not None}
    if stats:
        out.update({k: stats.get(k) for k in ("steps", "tokens_per_s", "first_loss",
                                              "final_loss", "train_seconds")})
        out["merged_model_saved"] = (work / "round" / "model" / "config.json").exists()
    if p.returncode != 0:
        out["error"] = (p.stderr or p.stdout)[-1500:]
    return out


def check_launch(a, tmp: Path) -> dict:
    return _launch(a, tmp, fsdp=False)


def check_launch_fsdp(a, tmp: Path) -> dict:
    return _launch(a, tmp, fsdp=True)


# ------------------------------------------------------------------------------ driver

def child(a) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    fn = globals()[f"check_{a.child}"]
    t0 = time.perf_counter()
    res: dict
    try:
        with tempfile.TemporaryDirectory(prefix=f"gpucheck-{a.child}-") as tmp:
            res = fn(a, Path(tmp))
        res.setdefault("status", "ok")
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        res = {"status": "error", "error": f"{type(e).__name__}: {e}"[:1500],
               "traceback_tail": tb[-2000:]}
    if res.get("status") == "ok" and res.get("ran") is False:
        res["status"] = "error"
    res["check_seconds"] = round(time.perf_counter() - t0, 1)
    Path(a.result).write_text(json.dumps(res, default=str))
    return 0


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ",".join(fmt(x) for x in v[:6]) + ("..." if len(v) > 6 else "") + "]"
    return str(v)


def table(results: dict) -> str:
    cols = ["status", "steps", "tokens_per_s", "first_loss", "final_loss", "seconds_per_step",
            "reward", "peak_gpu_mib", "check_seconds"]
    rows = [["check"] + cols] + [[name] + [fmt(r.get(c)) for c in cols]
                                 for name, r in results.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    for name, r in results.items():
        if r.get("status") not in ("ok",):
            lines.append(f"{name}: {r.get('status')}: {r.get('error') or r.get('reason')}"[:400])
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checks", default=",".join(CHECKS))
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU-sized: 1-2 steps, few rows (finds import and API errors)")
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--sft-steps", type=int, default=20)
    ap.add_argument("--sft-135m-steps", type=int, default=30)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--child-timeout", type=int, default=150, help="seconds per check")
    ap.add_argument("--budget", type=int, default=0,
                    help="stop starting checks after this many seconds (0: no limit)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", choices=CHECKS, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.dry_run:
        a.rows, a.sft_steps, a.sft_135m_steps, a.grpo_steps, a.max_new_tokens = 8, 2, 1, 1, 8
    if a.child:
        return child(a)

    checks = [c.strip() for c in a.checks.split(",") if c.strip()]
    bad = [c for c in checks if c not in CHECKS]
    if bad:
        raise SystemExit(f"--checks: unknown {bad}; choose from {CHECKS}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    vers = versions()
    print("versions:", json.dumps(vers), flush=True)
    results: dict[str, dict] = {}
    t_all = time.perf_counter()
    for name in checks:
        if a.budget and time.perf_counter() - t_all > a.budget:
            results[name] = {"status": "skipped", "reason": f"over --budget {a.budget}s"}
            continue
        print(f"=== {name}", flush=True)
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            result_path = f.name
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name,
               "--result", result_path, "--rows", str(a.rows), "--sft-steps", str(a.sft_steps),
               "--sft-135m-steps", str(a.sft_135m_steps), "--grpo-steps", str(a.grpo_steps),
               "--max-new-tokens", str(a.max_new_tokens),
               "--child-timeout", str(a.child_timeout)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, env=env, cwd=ROOT, timeout=a.child_timeout)
            try:
                res = json.loads(Path(result_path).read_text())
            except (OSError, ValueError):
                res = {"status": "error", "error": f"child exited {p.returncode} with no result"}
        except subprocess.TimeoutExpired:
            res = {"status": "timeout", "error": f"over {a.child_timeout}s"}
        res.setdefault("wall_seconds", round(time.perf_counter() - t0, 1))
        Path(result_path).unlink(missing_ok=True)
        results[name] = res
        print(f"--- {name}: {json.dumps(res, default=str)[:1500]}", flush=True)

    report = {"dry_run": a.dry_run, "versions": vers,
              "settings": {"rows": a.rows, "sft_steps": a.sft_steps,
                           "sft_135m_steps": a.sft_135m_steps, "grpo_steps": a.grpo_steps,
                           "max_new_tokens": a.max_new_tokens},
              "total_seconds": round(time.perf_counter() - t_all, 1), "checks": results}
    print(table(results), flush=True)
    target = a.json or (Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT")
                        else None)
    if target:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=1, default=str))
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
