"""The dtype table behind `sft.bf16` / `sft.base_dtype: auto`: `pipeline bench train` results
measured on several CPU capabilities (`--json` of each run), side by side as markdown.

Each run is one capability (the machine's own, or `ATEN_CPU_CAPABILITY=avx2
ONEDNN_MAX_CPU_ISA=AVX2` for an AVX2-only CPU on a newer one) and one `--bf16` setting; the
table lists every mode's median tokens/s, the fastest setting per capability and what `auto`
resolves to there, so a reader sees whether the default follows the measurement.

    pipeline bench train --from-json a.json --from-json b.json --markdown docs/results/x.md
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from data.jsonl import write_text_atomic
from engine import machine
from engine.training.settings import bf16_native

CAPABILITIES = ("AVX2", "AVX512")


def label(autocast: bool, bf16_base: bool) -> str:
    """A setting as the table names it: autocast on/off, and the base's dtype."""
    return (("bf16 autocast, " if autocast else "fp32, ")
            + ("bfloat16 base" if bf16_base else "float32 base"))


def setting(run: dict, mode: str) -> str:
    """What a mode of a run computes in."""
    return label(run["args"]["bf16"], mode.endswith("-bf16"))


def auto_settings() -> dict[str, str]:
    """Capability -> the setting `auto` picks there on this CPU's flags."""
    flags = machine.cpu_flags()
    out = {}
    for cap in CAPABILITIES:   # auto turns autocast and the bfloat16 base on together
        native = bf16_native(cap, flags)
        out[cap] = label(autocast=native, bf16_base=native)
    return out


def rows(runs: list[dict]) -> list[dict]:
    """One row per (run, mode) that finished: capability, setting, median tokens/s."""
    out = []
    for run in runs:
        for mode, r in run["sft"].items():
            row = {"capability": run["machine"]["capability"], "mode": mode,
                   "setting": setting(run, mode)}
            if "failed" in r:
                out.append(row | {"failed": r["failed"]})
                continue
            out.append(row | {"steps": r["steps"], "tokens": r["tokens"],
                              "tokens_per_s": r["tokens_per_s"],
                              "repeats": r.get("repeats_tokens_per_s", [r["tokens_per_s"]]),
                              "first_loss": r["losses"][0] if r.get("losses") else None})
    return out


def fastest(table: list[dict]) -> dict[str, dict]:
    """Capability -> its fastest row."""
    best: dict[str, dict] = {}
    for r in table:
        if "failed" in r:
            continue
        if r["capability"] not in best or r["tokens_per_s"] > best[r["capability"]]["tokens_per_s"]:
            best[r["capability"]] = r
    return best


def markdown(runs: list[dict], sources: list[Path], auto: dict[str, str],
             note: str | None = None) -> str:
    """The side-by-side table; `auto`: capability -> the setting `auto` picks there."""
    table = rows(runs)
    first = runs[0]
    a = first["args"]
    lines = ["# SFT dtype per CPU capability: what `sft.bf16` and `sft.base_dtype: auto` pick", "",
             f"- command: `pipeline bench train --from-json {' --from-json '.join(map(str, sources))}"
             f" --markdown PATH --note ...` over runs of `pipeline bench train --mix grounding --steps "
             f"{a.get('max_steps')} --grpo-steps 0 --modes ... --bf16 on|off --json ...`",
             f"- written: {time.strftime('%Y-%m-%d %H:%M')}",
             f"- machine: {first['machine']['cpu']}, {first['machine']['cores']} cores; "
             + ", ".join(f"{k} {v}" for k, v in first["machine"]["versions"].items() if v),
             f"- workload: the default round 1 mix, {a['batch_size']} rows per step, max_length "
             f"{a['max_length']}, LoRA r {a['lora']['r']}; tokens/s: medians over repeats",
             "- load average (1 min) before each run (a run started right after another "
             "inherits its decay): "
             + "; ".join(f"{s.name}: {r.get('load_before', 'not recorded')}"
                         for s, r in zip(sources, runs)),
             *([f"- note: {note}"] if note else []), "",
             "| capability | setting | mode | steps | tokens | tok/s (median) | repeats | "
             "first loss |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table:
        if "failed" in r:
            lines.append(f"| {r['capability']} | {r['setting']} | {r['mode']} | "
                         f"{a.get('max_steps')} | - | {r['failed']} | - | - |")
            continue
        loss = f"{r['first_loss']:.4f}" if r["first_loss"] is not None else "-"
        lines.append(f"| {r['capability']} | {r['setting']} | {r['mode']} | {r['steps']} | "
                     f"{r['tokens']} | {r['tokens_per_s']:.1f} | "
                     f"{', '.join(f'{x:.1f}' for x in r['repeats'])} | {loss} |")
    lines += ["", "| capability | fastest | `auto` picks | agrees |", "| --- | --- | --- | --- |"]
    for cap, r in sorted(fastest(table).items()):
        pick = auto.get(cap, "-")
        lines.append(f"| {cap} | {r['setting']} ({r['tokens_per_s']:.1f} tok/s) | {pick} | "
                     f"{'yes' if pick == r['setting'] else 'no'} |")
    lines += ["", "`auto`: bf16 autocast with a bfloat16 base where torch dispatches AVX-512 "
              "kernels and the CPU has AVX-512 BF16 or AMX; else fp32 "
              "(`engine.training.settings.bf16_supported`)."]
    return "\n".join(lines) + "\n"


def write(path: Path, sources: list[Path], auto: dict[str, str], note: str | None = None) -> str:
    runs = [json.loads(Path(s).read_text()) for s in sources]
    text = markdown(runs, sources, auto, note)
    write_text_atomic(path, text)
    return text
