"""Supervised fine-tuning on accepted trajectories: TRL SFTTrainer + PEFT LoRA.

Reads top to bottom: check token consistency, build rows (drop and count what cannot be
trained), configure TRL, train (resuming from the last checkpoint), save the adapter, merge.
Batches are random and padding-free (or packed); their rows attend one by one
(`engine/training/segment_attention.py`), and under bf16 autocast the frozen base is loaded in
bfloat16 (`engine/training/autocast_adapters.py`).

Loss falls only on assistant tokens of every assistant turn: TRL's `assistant_only_loss` reads
the `{% generation %}` markers of `data/chat_template_training.jinja` (content + `<|im_end|>`
of each assistant turn); system, user and tool-response tokens get label -100.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from data.trajectory import Trajectory
from engine.training.consistency import (TemplateRoundTripError, check_consistency,
                                           normalise_messages, tokenize_conversation)
from engine.training.curves import JsonlLog, bar_only
from engine.training.fused_head import score_labelled_positions_only
from engine.training.loss_summary import tenth_means
from engine.training.lora import (finish, last_checkpoint, load_base, lora_config,
                                    training_tokenizer)
from engine.training.panels import SFT_PANELS
from engine.training.settings import SFTSettings


def build_rows(trajectories: list[Trajectory], tokenizer, max_length: int) -> tuple[list, dict]:
    """Dataset rows `{"messages", "tools"}` (tools as JSON text: each task declares different
    schemas, which a columnar dataset would otherwise merge). Rows over `max_length` or with no
    assistant token are dropped and counted, never truncated mid-call."""
    rows, lengths, dropped_long, dropped_empty, assistant_tokens = [], [], 0, 0, 0
    for traj in trajectories:
        tok = tokenize_conversation(tokenizer, traj.messages, traj.tools)
        n, n_asst = len(tok["input_ids"]), sum(tok["assistant_masks"])
        if n > max_length:
            dropped_long += 1
            continue
        if n_asst == 0:
            dropped_empty += 1
            continue
        rows.append({"messages": normalise_messages(traj.messages),
                     "tools": json.dumps(traj.tools, ensure_ascii=False)})
        lengths.append(n)
        assistant_tokens += n_asst
    return rows, {"rows_dropped_over_length": dropped_long,
                  "rows_dropped_no_assistant": dropped_empty, "tokens": sum(lengths),
                  "assistant_tokens": assistant_tokens,
                  "max_row_tokens": max(lengths, default=0)}


def sft_config(settings: SFTSettings, ckpt_dir: Path, progress: bool):
    import torch
    from trl import SFTConfig
    # Padding-free without packing: TRL enforces no max_length itself, so rows over the limit
    # were dropped above and the limit is lifted here (nothing is ever truncated).
    max_length = settings.max_length if (settings.packing or not settings.padding_free) else None
    return SFTConfig(
        output_dir=str(ckpt_dir), assistant_only_loss=True, max_length=max_length,
        packing=settings.packing, packing_strategy="bfd", padding_free=settings.padding_free,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum, learning_rate=settings.lr,
        num_train_epochs=settings.epochs, max_steps=settings.max_steps, bf16=settings.bf16,
        gradient_checkpointing=settings.gradient_checkpointing, seed=settings.seed,
        data_seed=settings.seed, logging_steps=settings.logging_steps, save_strategy="steps",
        save_steps=settings.save_steps, save_total_limit=2, report_to="none",
        include_num_input_tokens_seen="non_padding", disable_tqdm=not progress,
        dataloader_num_workers=0, use_cpu=not torch.cuda.is_available())


def sft_trainer(trajectories: list[Trajectory], model_dir: Path, out_dir: Path,
                settings: SFTSettings, progress: bool = True):
    """The configured TRL SFTTrainer (LoRA adapter attached, rows prepared) and the row and
    consistency counts; `train_sft` runs it, the training benchmark times it."""
    from datasets import Dataset
    from transformers import set_seed

    from engine.training.autocast_adapters import AutocastAdaptersSFTTrainer
    from engine.training.segment_attention import use_segment_attention
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    set_seed(settings.seed)  # before the adapter is created: its init is random
    tokenizer = training_tokenizer(model_dir)

    # 1. The trainer must see the sampled tokens: drop rows that do not round-trip.
    consistency = check_consistency(trajectories, tokenizer)
    bad = set(consistency["bad_ids"])
    if not consistency["round_trips"] or (trajectories and len(bad) == len(trajectories)):
        raise TemplateRoundTripError(
            f"the training template (data/chat_template_training.jinja) does not round-trip: "
            f"{consistency['render_mismatches']} renders differ from chatformat.render and "
            f"{consistency['mismatched_trajectories']} of {len(trajectories)} trajectories "
            f"mismatch, e.g. {consistency['examples'][:2]}. The template and the sampler "
            "disagree; fix the template or the rollout driver.")
    kept = [t for t in trajectories if t.id not in bad]

    # 2. Rows.
    rows, row_stats = build_rows(kept, tokenizer, settings.max_length)
    if not rows:
        raise ValueError(f"no trainable rows: {len(trajectories)} trajectories, "
                         f"{row_stats['rows_dropped_over_length']} over max_length="
                         f"{settings.max_length}, {len(bad)} inconsistent; raise sft.max_length "
                         "or supply accepted trajectories")

    # 3. Trainer; the log callback cuts rows a resumed run will log again.
    resume, resume_step = last_checkpoint(out_dir / "checkpoints")
    score_labelled_positions_only()
    model = load_base(model_dir, settings.lora, settings.base_weights_dtype)
    row_attention = ((settings.padding_free or settings.packing)
                     and use_segment_attention(model))
    trainer = AutocastAdaptersSFTTrainer(
        model=model,
        args=sft_config(settings, out_dir / "checkpoints", progress),
        train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        peft_config=lora_config(settings.lora),
        callbacks=[JsonlLog(out_dir / "train_log.jsonl", resume_step)],
        autocast_adapters=settings.base_weights_dtype == "bfloat16")
    bar_only(trainer)
    info = {"rows_in": len(trajectories), "rows_used": len(rows),
            "rows_dropped_inconsistent": len(bad), **row_stats, "row_attention": row_attention,
            "consistency": {k: v for k, v in consistency.items() if k != "bad_ids"},
            "resume_checkpoint": resume, "resumed_from_step": resume_step}
    return trainer, info


def train_sft(trajectories: list[Trajectory], model_dir: Path, out_dir: Path,
              settings: SFTSettings, progress: bool = True) -> dict:
    """Train a LoRA adapter on `trajectories`; write adapter/, model/ (merged), train_log.jsonl
    and loss.png under `out_dir`; return the stats of the run. A rerun after a kill resumes
    from the latest checkpoint in `out_dir/checkpoints/`."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    trainer, info = sft_trainer(trajectories, model_dir, out_dir, settings, progress)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=info.pop("resume_checkpoint"))
    seconds = time.perf_counter() - t0

    # 4. Adapter, merged model, curve.
    log = finish(trainer, model_dir, out_dir, out_dir / "train_log.jsonl",
                 out_dir / "loss.png", SFT_PANELS, "SFT")
    losses = [r["loss"] for r in log]
    seen = int(trainer.state.num_input_tokens_seen or 0)
    runtime = result.metrics.get("train_runtime") or 0.0
    return {**info, "steps": trainer.state.global_step, "tokens_seen": seen,
            "train_seconds": round(seconds, 2),
            "tokens_per_s": round(seen / runtime, 2) if runtime else 0.0,
            "first_loss": losses[0] if losses else None,
            "final_loss": losses[-1] if losses else None,
            **dict(zip(("loss_first_tenth", "loss_last_tenth"), tenth_means(losses) or ())),
            "packing": settings.packing, "padding_free": settings.padding_free,
            "base_dtype": settings.base_weights_dtype}
