"""Merge a LoRA adapter into its base: the full model every later step (gate, export) reads.

Directories are built under a temporary name and renamed when complete, so a kill never
leaves a half-written `model/` that a resumed run would mistake for a finished one.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from engine.models import atomic_dir, load_model, load_tokenizer


def save_adapter(trainer, target: Path) -> Path:
    """Save the trainer's adapter to `target` atomically. Every process takes part (FSDP and
    DeepSpeed gather the sharded weights); only the main process renames."""
    target = Path(target)
    tmp = target.with_name(target.name + ".tmp")
    acc = trainer.accelerator
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    acc.wait_for_everyone()
    trainer.save_model(str(tmp))
    acc.wait_for_everyone()
    if acc.is_main_process:
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    acc.wait_for_everyone()
    return target


def merge_adapter(base_dir: Path, adapter_dir: Path, out_dir: Path,
                  dtype: str = "float32") -> Path:
    """Load `base_dir` in full precision, apply `adapter_dir`, fold the LoRA deltas into the
    weights and save safetensors plus the tokenizer with the project's chat template."""
    from peft import PeftModel
    if not (Path(adapter_dir) / "adapter_config.json").exists():
        raise FileNotFoundError(f"{adapter_dir}: no adapter_config.json; train an adapter first")
    base = load_model(base_dir, dtype=dtype)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()

    def build(tmp: Path):
        merged.save_pretrained(tmp, safe_serialization=True)
        load_tokenizer(base_dir).save_pretrained(tmp)

    return atomic_dir(Path(out_dir), build)
