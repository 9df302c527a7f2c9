"""f16 GGUF -> quantized GGUF with llama.cpp's quantizer (`llama_model_quantize`).

llama.cpp quantizes rows in blocks of 256 for the K-quants; a tensor whose row length is
not a multiple of 256 (SmolLM2's width is 576) falls back to another type, mostly q8_0.
`engine.quants.QUANTS` records which tensor types count as "really" the requested
quantization.
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from engine.quants import QUANTS, Quant

from .convert import temp_path
from .errors import ExportError


def check_quant(quant: str) -> Quant:
    if quant not in QUANTS:
        raise ExportError(f"unknown quantization {quant!r}; choose one of {', '.join(QUANTS)}")
    return QUANTS[quant]


@contextmanager
def _captured_stderr(log: list):
    """llama.cpp's quantizer prints per-tensor lines straight to fd 2: keep them out of the
    pipeline's console and hand them back as text."""
    with tempfile.TemporaryFile(mode="w+b") as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            log.append(f.read().decode("utf-8", "replace"))


def quantize(src: Path, dst: Path, quant: str = "Q6_K", threads: int = 0,
             verbose: bool = False) -> dict:
    """Quantize `src` (f16 GGUF) to `dst`, written under a temporary name and renamed.

    Returns {"seconds", "bytes", "fallback_warning"} (llama.cpp's own count of tensors that
    needed a fallback type, when it printed one).
    """
    import llama_cpp
    spec = check_quant(quant)
    src, dst = Path(src), Path(dst)
    if not src.exists():
        raise ExportError(f"{src} does not exist; convert the model to f16 GGUF first")
    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.ERROR)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, spec.ftype)
    params.nthread = threads
    tmp = temp_path(dst)
    start = time.perf_counter()
    log: list[str] = []
    if verbose:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), params)
        log.append("")
    else:
        with _captured_stderr(log):
            rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), params)
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        tail = "\n".join(log[0].strip().splitlines()[-10:])
        raise ExportError(f"llama_model_quantize({src.name} -> {quant}) returned {rc}:\n{tail}")
    os.replace(tmp, dst)
    warning = re.search(r"(\d+) of (\d+) tensor\(s\) required fallback quantization", log[0])
    return {"seconds": round(time.perf_counter() - start, 2), "bytes": dst.stat().st_size,
            "fallback_warning": warning.group(0) if warning else None}
