"""Sampler backends behind one interface (`base.Backend`), chosen by name from config.

    backend = make_backend("vllm", "embedded:smollm2-135m", kv_cache_gib=1)
    completions = backend.generate(prompts, SamplingParams(max_tokens=64), seeds)
    backend.close()

Engines are imported only when a backend is built, so importing this package is cheap.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

from .base import Backend, BackendError, Completion, SamplingParams
from .engines import engine_key, keep_engines, open_engine, release_engine


def _vllm(model, **opts):
    from .vllm_backend import VLLMBackend
    return VLLMBackend(model, **opts)


def _transformers(model, **opts):
    from .hf_backend import HFBackend
    return HFBackend(model, **opts)


def _llama_cpp(model, **opts):
    from .llamacpp_backend import LlamaCppBackend
    return LlamaCppBackend(model, **opts)


def _openai(model, **opts):
    from .openai_backend import OpenAIBackend
    return OpenAIBackend(model, **opts)


BACKENDS: dict[str, Callable[..., Backend]] = {
    "vllm": _vllm, "transformers": _transformers, "llama_cpp": _llama_cpp, "openai": _openai,
}
_MODULES = {"vllm": "vllm", "transformers": "transformers", "llama_cpp": "llama_cpp",
            "openai": "openai"}


def make_backend(name: str, model: str | Path, **opts) -> Backend:
    """Build backend `name` for `model` (a model reference, a GGUF path for llama_cpp, the
    served model name for openai); `opts` go to that backend's constructor."""
    if name not in BACKENDS:
        raise ValueError(f"unknown sampler backend {name!r}; choose from {', '.join(BACKENDS)}")
    return BACKENDS[name](model, **opts)


def available_backends() -> list[str]:
    """Backends whose engine package is installed (the server of `openai` is not checked)."""
    return [n for n, mod in _MODULES.items() if importlib.util.find_spec(mod) is not None]


def default_backend() -> str:
    """vLLM wherever it is installed, else transformers."""
    return "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"


def backend_opener(sampler) -> Callable:
    """`open_backend(model_dir)`, a context manager yielding the backend that `sampler` (a run
    config's sampler settings; backend `auto` is `default_backend()`) names. Rounds and gates
    open their engines through it: inside `keep_engines()` the last engine stays alive for the
    next open of the same model (see `engines`), elsewhere it is closed on exit."""
    def open_backend(model_dir: Path):
        name = default_backend() if sampler.backend == "auto" else sampler.backend
        key = engine_key(name, model_dir, sampler.options)
        return open_engine(key, lambda: make_backend(name, model_dir, **sampler.options))
    return open_backend


__all__ = ["Backend", "BackendError", "Completion", "SamplingParams", "BACKENDS",
           "make_backend", "available_backends", "default_backend", "backend_opener", "keep_engines",
           "release_engine"]
