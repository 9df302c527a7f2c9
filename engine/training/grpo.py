"""RL polish: TRL GRPOTrainer + PEFT LoRA over multi-turn rollouts in the task environments.

Multi-turn goes through TRL 1.16's own `rollout_func` hook: for each turn we ask the trainer's
generation step (`_generate_single_turn`: transformers `generate`, or vLLM in colocate mode
with its weight sync) for one assistant turn per live rollout, hand it to the one turn rule
(`data.turns.take_turn`, the same rule the sampler and the gates play by), and append the
tool-response tokens with `env_mask` 0 so only sampled tokens carry loss. We use it rather than
`environment_factory`/`tools` because those derive tool schemas from Python signatures, while
our tasks declare their own JSON schemas (distractors, backup endpoints, injected faults) and
must be rendered exactly as the sampler and the gates render them.

Rewards are the verifier's score (the gates' code) and a format reward, weighted from config;
tool calls per trajectory and the unfinished share ride along as weight-0 rewards, so TRL logs
them per step beside reward and KL. Groups whose rewards are all equal carry no gradient and are
taken out of the loss (`engine.training.zero_variance`; share logged per step).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from data.chatformat import parse, render
from data.environment import DomainEnvironment, Environment
from data.trajectory import Task
from data.turns import Conversation, take_turn
from data.verify import reward as verifier_score
from engine.training.curves import JsonlLog, bar_only
from engine.training.fused_head import score_labelled_positions_only
from engine.training.lora import (finish, last_checkpoint, load_base, lora_config,
                                    training_tokenizer)
from engine.training.panels import GRPO_PANELS
from engine.training.settings import GRPOSettings
from engine.training.zero_variance import SHARE_KEY, DropZeroVariance

TASK_KEY = "task_id"  # carried on the prompt's system message; the renderer ignores it


# ------------------------------------------------------------------------------ rewards
# Pure functions `(completions, **columns) -> list[float]`; TRL passes the dataset columns
# ("task", JSON text) and the rollout's extra fields ("messages", "finish", "n_calls", ...).
# Example: verifier(completions=[...], task=[t.model_dump_json()], messages=[t.messages() +
# t.oracle], finish=["answer"]) == [1.0] for a task's own oracle demonstration.

def verifier(completions, task, messages, finish, **_) -> list[float]:
    """The gates' score of the whole trajectory (`data.verify.reward`)."""
    return [verifier_score(Task.model_validate_json(t), m, finish=f)
            for t, m, f in zip(task, messages, finish)]


def format_reward(completions, task, messages, finish, n_prompt, **_) -> list[float]:
    """Half for well-formed turns (closed within the token limit, calls to declared tools with
    schema-valid arguments), half for ending with a final answer."""
    out = []
    for t, m, f, k in zip(task, messages, finish, n_prompt):
        tools = json.loads(t)["tools"]
        ok = [parse(x.get("content") or "", tools).ok for x in m[k:] if x["role"] == "assistant"]
        if ok and f == "token_limit":  # the last turn was cut off: not well-formed
            ok[-1] = False
        out.append(0.5 * (sum(ok) / len(ok) if ok else 0.0) + 0.5 * (f == "answer"))
    return out


format_reward.__name__ = "format"


def tool_calls(completions, n_calls, **_) -> list[float]:
    """Metric (weight 0): tool calls executed in the trajectory."""
    return [float(n) for n in n_calls]


def unfinished(completions, finish, **_) -> list[float]:
    """Metric (weight 0): 1 when the trajectory ended without a final answer."""
    return [float(f != "answer") for f in finish]


REWARDS = {"verifier": verifier, "format": format_reward}
METRICS = [tool_calls, unfinished]


# ------------------------------------------------------------------------------ rollouts

@dataclass
class Rollout:
    """One multi-turn conversation: its text messages and its token stream for the trainer."""
    task: Task
    env: Environment
    conv: Conversation
    prompt_ids: list[int]
    context: list[int]                        # prompt + everything so far (next turn's input)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)   # 1 sampled, 0 tool/template tokens
    logprobs: list[float] = field(default_factory=list)
    turn_token_ids: list[list[int]] = field(default_factory=list)

    @property
    def messages(self) -> list[dict]:
        return self.conv.messages

    @property
    def finish(self) -> str:
        return self.conv.finish or "pending"


def _suffix_text(before: list[dict], after: list[dict], tools: list[dict]) -> str:
    """Text between the end-of-turn id of the last assistant turn and the next generation:
    the tool responses and the new assistant header."""
    head = render(before, tools)                               # ends "<|im_end|>\n"
    full = render(after, tools, add_generation_prompt=True)
    if not full.startswith(head):
        raise RuntimeError("chat template is not prefix-preserving across a tool turn; "
                           "multi-turn GRPO needs a template that appends turns")
    return full[len(head) - 1:]


def _step(r: Rollout, ids: list[int], lps, tokenizer, eos_ids: set[int]):
    """Apply one sampled assistant turn to rollout `r` through the turn rule (a turn that
    did not reach end-of-turn was cut by the token limit); never raises on bad output."""
    ids = list(ids)
    r.completion_ids += ids
    r.env_mask += [1] * len(ids)
    r.logprobs += list(lps) if lps is not None else [0.0] * len(ids)
    r.context += ids
    r.turn_token_ids.append(ids)
    ended = bool(ids) and ids[-1] in eos_ids
    text = tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=False)
    n = len(r.messages)
    take_turn(r.conv, r.env, text, cut=not ended)
    if r.conv.finish is not None:
        return
    before = r.messages[:n + 1]                                  # up to this assistant turn
    suffix = tokenizer(_suffix_text(before, r.messages, r.task.tools),
                       add_special_tokens=False)["input_ids"]
    r.completion_ids += suffix
    r.env_mask += [0] * len(suffix)
    r.logprobs += [0.0] * len(suffix)
    r.context += suffix


def make_rollout_func(tasks: dict[str, Task], tokenizer, settings: GRPOSettings):
    """TRL `rollout_func(prompts, trainer) -> {prompt_ids, completion_ids, logprobs, env_mask,
    ...extra fields for the rewards}`, one rollout per prompt (TRL already repeats each task
    group_size times)."""
    eos_ids = {tokenizer.eos_token_id}

    def rollout_func(prompts: list, trainer) -> dict:
        rollouts = []
        for prompt in prompts:
            task = tasks[prompt[0][TASK_KEY]]
            text = render(task.messages(), task.tools, add_generation_prompt=True)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            rollouts.append(Rollout(task, DomainEnvironment.for_task(task),
                                    Conversation.for_task(task, settings.max_turns),
                                    ids, list(ids)))
        while live := [r for r in rollouts if r.finish == "pending"]:
            ids, lps = trainer._generate_single_turn([r.context for r in live], None, {}, 1)
            for i, r in enumerate(live):
                _step(r, ids[i], lps[i] if lps is not None else None, tokenizer, eos_ids)
        for r in rollouts:
            r.env.close()
        return {"prompt_ids": [r.prompt_ids for r in rollouts],
                "completion_ids": [r.completion_ids for r in rollouts],
                "logprobs": [r.logprobs for r in rollouts] if settings.use_vllm else None,
                "env_mask": [r.env_mask for r in rollouts],
                "messages": [r.messages for r in rollouts],
                "n_prompt": [len(r.task.messages()) for r in rollouts],
                "finish": [r.finish for r in rollouts],
                "n_calls": [r.conv.calls for r in rollouts]}

    return rollout_func


# ------------------------------------------------------------------------------ training

def grpo_config(settings: GRPOSettings, ckpt_dir: Path, progress: bool):
    import torch
    from trl import GRPOConfig
    return GRPOConfig(
        output_dir=str(ckpt_dir), num_generations=settings.group_size,
        per_device_train_batch_size=settings.group_size * settings.tasks_per_step,
        max_completion_length=settings.max_new_tokens, temperature=settings.temperature,
        beta=settings.beta, epsilon=settings.epsilon, learning_rate=settings.lr,
        loss_type="dapo",  # token-normalised over the batch: dropped groups leave it exactly
        max_steps=settings.max_steps, bf16=settings.bf16, seed=settings.seed,
        logging_steps=settings.logging_steps, save_strategy="steps",
        save_steps=settings.save_steps, save_total_limit=2, report_to="none",
        reward_weights=[settings.reward_weights.get(k, 0.0) for k in REWARDS] + [0.0] * len(METRICS),
        use_vllm=settings.use_vllm, vllm_mode="colocate",
        vllm_gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
        gradient_checkpointing=False, remove_unused_columns=False, disable_tqdm=not progress,
        use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0)


def train_grpo(tasks: list[Task], model_dir: Path, out_dir: Path, settings: GRPOSettings,
               progress: bool = True) -> dict:
    """GRPO with LoRA from `model_dir` on `tasks`; writes adapter/, model/ (merged),
    grpo_log.jsonl and grpo.png under `out_dir`; returns the run's stats."""
    import os
    from datasets import Dataset
    from transformers import set_seed
    from trl import GRPOTrainer
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if len(tasks) < settings.tasks_per_step:
        raise ValueError(f"grpo.tasks_per_step={settings.tasks_per_step} but only {len(tasks)} "
                         "tasks were given; lower tasks_per_step or supply more tasks")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("task ids must be unique: the rollout finds each task by its id")
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL-experimental
    set_seed(settings.seed)
    tokenizer = training_tokenizer(model_dir)
    tokenizer.padding_side = "left"
    by_id = {t.id: t for t in tasks}
    # The first prompt message carries the task id, so the rollout finds the task (its tools,
    # faults, environment); the rollout renders task.messages() itself.
    rows = [{"prompt": [{**m, TASK_KEY: t.id} if i == 0 else m
                        for i, m in enumerate(t.messages())],
             "task": t.model_dump_json()} for t in tasks]
    dataset = Dataset.from_list(rows)

    model = load_base(model_dir, settings.lora)
    ckpt_dir = out_dir / "checkpoints"
    resume, resume_step = last_checkpoint(ckpt_dir)
    log_path = out_dir / "grpo_log.jsonl"
    score_labelled_positions_only()

    class Trainer(DropZeroVariance, GRPOTrainer):  # zero-variance groups: logged, dropped
        drop_zero_variance = settings.drop_zero_variance

    trainer = Trainer(model=model, reward_funcs=list(REWARDS.values()) + METRICS,
                      args=grpo_config(settings, ckpt_dir, progress),
                      train_dataset=dataset, processing_class=tokenizer,
                      peft_config=lora_config(settings.lora),
                      rollout_func=make_rollout_func(by_id, tokenizer, settings),
                      callbacks=[JsonlLog(log_path, resume_step)])
    bar_only(trainer)
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - t0

    log = finish(trainer, model_dir, out_dir, log_path, out_dir / "grpo.png", GRPO_PANELS,
                 "GRPO")
    steps = trainer.state.global_step - resume_step

    def series(key):
        return [r[key] for r in log if key in r]

    shares = series(SHARE_KEY)  # groups with equal rewards, per step
    return {"tasks": len(tasks), "steps": trainer.state.global_step,
            "train_seconds": round(seconds, 2),
            "seconds_per_step": round(seconds / steps, 2) if steps else None,
            "reward": series("reward"), "kl": series("kl"),
            "tool_calls_per_trajectory": series("rewards/tool_calls/mean"),
            "unfinished_share": series("rewards/unfinished/mean"),
            "zero_variance_share": shares,
            "zero_variance_share_mean": round(sum(shares) / len(shares), 4) if shares else None,
            "zero_variance_dropped": settings.drop_zero_variance,
            "generation": "vllm-colocate" if settings.use_vllm else "transformers",
            "resumed_from_step": resume_step}
