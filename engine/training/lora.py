"""What SFT and GRPO share: the LoRA adapter on its base, the training tokenizer, resuming from
a checkpoint, and the tail that turns a trained adapter into a round's outputs.

Both trainers train the same kind of adapter and leave the same outputs (adapter/, model/, a
step log and its plot), so these live once here and the trainers differ only in their trainer.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine import timing
from engine.models import load_model, load_tokenizer
from engine.training.consistency import training_template
from engine.training.curves import plot_curves, step_rows
from engine.training.merge import merge_adapter, save_adapter
from engine.training.settings import LoraSettings


def training_tokenizer(model_dir: Path):
    """The model's tokenizer with the training template, and a pad token distinct from
    `<|im_end|>` where the vocabulary has one (padding is then countable and never confused
    with a real end of turn)."""
    tok = load_tokenizer(model_dir)
    tok.chat_template = training_template()
    for cand in ("<|endoftext|>", "<|finetune_right_pad_id|>", "<pad>"):
        if cand in tok.get_vocab() and cand != tok.eos_token:
            tok.pad_token = cand
            break
    return tok


def lora_config(lora: LoraSettings):
    from peft import LoraConfig
    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=list(lora.target_modules), bias="none",
                      task_type="CAUSAL_LM")


def load_base(model_dir: Path, lora: LoraSettings, dtype: str = "float32"):
    """The frozen base in `dtype` (float32, or bfloat16 under bf16 autocast), or 4-bit NF4
    (QLoRA) on CUDA."""
    if not lora.qlora:
        return load_model(model_dir, dtype=dtype)
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    if not torch.cuda.is_available():
        raise RuntimeError("QLoRA needs a CUDA device (bitsandbytes 4-bit); set lora.qlora: false")
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                               bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
    device = {"": int(os.environ.get("LOCAL_RANK", "0"))}  # one full copy per GPU process
    return AutoModelForCausalLM.from_pretrained(str(model_dir), quantization_config=quant,
                                                dtype=torch.bfloat16, use_safetensors=True,
                                                device_map=device)


def last_checkpoint(ckpt_dir: Path) -> tuple[str | None, int]:
    """The newest complete checkpoint and its step. A kill during a save leaves a checkpoint
    without `trainer_state.json` (the trainer writes it last): such a one is deleted, and the
    run resumes from the one before."""
    if not ckpt_dir.is_dir():
        return None, 0
    done = []
    for d in ckpt_dir.glob("checkpoint-*"):
        if not d.name.split("-")[-1].isdigit():
            continue
        if (d / "trainer_state.json").exists():
            done.append(d)
        else:
            shutil.rmtree(d, ignore_errors=True)
    if not done:
        return None, 0
    last = max(done, key=lambda d: int(d.name.split("-")[-1]))
    state = json.loads((last / "trainer_state.json").read_text())
    return str(last), int(state.get("global_step", 0))


def finish(trainer, model_dir: Path, out_dir: Path, log_path: Path, png: Path,
           panels: list[tuple[str, str]], title: str) -> list[dict]:
    """After training: save out_dir/adapter atomically (every process takes part), merge it
    into out_dir/model and plot `panels` of the log to `png` (once, on the main process), wait
    for every process, and return the log's step rows."""
    save_adapter(trainer, out_dir / "adapter")
    if trainer.accelerator.is_main_process:
        with timing.section("merge"):  # its own step in the round's time breakdown
            merge_adapter(model_dir, out_dir / "adapter", out_dir / "model")
        plot_curves(log_path, png, panels, title)
    trainer.accelerator.wait_for_everyone()
    return step_rows(log_path, panels)
