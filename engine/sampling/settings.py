"""Sampler settings (`sampler:`): which backend samples, its options, the context window."""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from engine.settings import Strict

_SECRET = re.compile(r"api[_-]?key|secret|passw(or)?d|token$|^auth|credential|private[_-]?key",
                     re.I)  # `max_tokens` ends in "tokens", not "token"


class SamplerSettings(Strict):
    backend: Literal["auto", "vllm", "transformers", "llama_cpp", "openai"] = Field(
        "auto", description="auto: vLLM where installed, else transformers; llama_cpp samples "
                            "a GGUF, openai an OpenAI-compatible server")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="passed to the backend: vLLM's "
                                                "gpu_memory_utilization, tensor_parallel_size, "
                                                "kv_cache_gib, cpu_bind (all, auto, nobind or "
                                                "a CPU list; default all); llama.cpp's "
                                                "extra_buffers (default false)")
    max_context_tokens: int = Field(4096, ge=256, description="context window of the sampler "
                                                              "(prompt and generated tokens)")

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, options: dict[str, Any]) -> dict[str, Any]:
        """run.yaml records every option in clear: a secret never goes in; the backend reads
        it from the environment variable named by `api_key_env`."""
        secret = [k for k in options if _SECRET.search(k) and not k.endswith("_env")]
        if secret:
            raise ValueError(f"sampler.options.{secret[0]}: looks like a secret, which would be "
                             "written in clear to run.yaml; put it in an environment variable "
                             "and name that variable in sampler.options.api_key_env")
        return options
