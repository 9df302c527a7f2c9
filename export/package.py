"""Export a merged model for laptops: f16 GGUF -> quantized GGUF -> Modelfile -> load check.

    report = export_model(run_dir / "round-1-grounding/model", run_dir / "round-1-grounding/export")

writes, each under a temporary name and renamed into place:
  out_dir/model-f16.gguf      (deleted after quantization unless keep_f16)
  out_dir/model-<QUANT>.gguf
  out_dir/Modelfile           (FROM ./model-<QUANT>.gguf, ChatML + tools TEMPLATE)
  out_dir/check.json          (tensor types, size, metadata read back, lint, load check)
and raises `ExportError` (after writing check.json) when the export must not ship.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from data.chatformat import chat_template
from data.jsonl import write_text_atomic
from engine import timing

from .convert import convert_to_f16
from .errors import ExportError
from .lint import lint_modelfile
from .modelfile import render_modelfile
from .quantize import check_quant, quantize
from .readback import quant_summary, read_gguf


def export_model(model_dir: Path, out_dir: Path, quant: str = "Q6_K", *,
                 load_check: bool = True, check_items: int = 4, min_agreement: float = 0.75,
                 system: str | None = None, license_text: str | None = None,
                 keep_f16: bool = False, check_max_tokens: int = 96,
                 hf_dtype: str = "float32") -> dict:
    """Convert, quantize, write the Modelfile, check; returns the check.json content."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    check_quant(quant)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(".tmp*-model-*.gguf"):  # a killed export's, whatever its quant
        stale.unlink()
    f16, final = out_dir / "model-f16.gguf", out_dir / f"model-{quant}.gguf"
    timings, reasons = {}, []

    conv = convert_to_f16(model_dir, f16)
    timings["convert_s"] = conv["seconds"]
    quantized = quantize(f16, final, quant)
    timings["quantize_s"] = quantized["seconds"]

    info = read_gguf(final)
    tensors = {"total": info["tensors"], "types": info["tensor_types"],
               **quant_summary(info, quant), "llama_cpp_warning": quantized["fallback_warning"]}
    template = info["chat_template"]
    metadata = {"architecture": info["architecture"], "name": info["name"],
                "file_type": info["file_type"], "vocab_size": info["vocab_size"],
                "special_tokens": info["special_tokens"],
                "chatml_token_ids": info["chatml_token_ids"],
                "add_bos_token": info["add_bos_token"],
                "chat_template_is_project_template": template == chat_template(),
                "chat_template": template}
    missing = [t for t, i in info["chatml_token_ids"].items() if i is None]
    if missing:
        reasons.append(f"the GGUF vocabulary lacks {missing}: ChatML turns and the "
                       "<|im_end|> stop cannot work; export a model with the ChatML tokenizer")

    modelfile = out_dir / "Modelfile"
    write_text_atomic(modelfile, render_modelfile(f"./{final.name}", system, license_text))
    lint = lint_modelfile(modelfile)
    reasons += [f"Modelfile: {p}" for p in lint]

    check = None
    if load_check:
        start = time.perf_counter()
        from .loadcheck import load_check as run_load_check
        with timing.section("load_check"):  # its own step in a run's time breakdown
            check = run_load_check(final, model_dir, items=check_items,
                                   min_agreement=min_agreement, max_tokens=check_max_tokens,
                                   hf_dtype=hf_dtype)
        timings["load_check_s"] = round(time.perf_counter() - start, 2)
        reasons += [f"load check: {r}" for r in check["reasons"]]

    f16_bytes = f16.stat().st_size
    if not keep_f16:
        f16.unlink()
    report = {
        "passed": not reasons, "reasons": reasons, "quant": quant,
        "model_dir": str(model_dir),
        "files": {"gguf": final.name, "bytes": info["bytes"],
                  "mib": round(info["bytes"] / 2**20, 2), "f16_bytes": f16_bytes,
                  "f16_kept": keep_f16, "modelfile": modelfile.name},
        "tensors": tensors, "metadata": metadata, "modelfile_lint": lint,
        "load_check": check if check is not None else {"skipped": True},
        "timings": timings,
    }
    write_text_atomic(out_dir / "check.json", json.dumps(report, indent=2, ensure_ascii=False))
    if reasons:
        raise ExportError(f"export of {model_dir} to {final} failed (see {out_dir / 'check.json'}):"
                          "\n  " + "\n  ".join(reasons))
    return report
