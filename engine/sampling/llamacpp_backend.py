"""llama.cpp backend (llama-cpp-python) over a GGUF file: laptop inference, export checks.

One sequence at a time. `Llama.generate` keeps the evaluated tokens and reuses the longest
common prefix with the next prompt, so continuing a turn re-evaluates only the new tokens.
Seeded per prompt (`set_seed` before each sequence); temperature 0 is greedy. Close it
explicitly: left to interpreter exit, its teardown prints a traceback.

llama.cpp's extra weight buffers (repacked layouts for the CPU's matrix units) are off unless
`extra_buffers=True`: on a CPU with AMX, llama-cpp-python 0.3.36 built for the machine
segfaults in its AMX matrix multiply (`ggml_backend_amx_mul_mat`) once a prompt is a few
hundred tokens long (the exported Q6_K SmolLM2, measured); with them off the same prompt
runs. Q6_K, the default export, is not repacked on other x86 CPUs, so nothing is lost there.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from data.chatformat import IM_END

from .base import CALL_STOP, BackendError, Completion, Conversation, SamplingParams, cut_at_stop


class LlamaCppBackend:
    name = "llama_cpp"

    def __init__(self, model: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 512, extra_buffers: bool = False, **llama_opts):
        """`model`: a .gguf path, or `embedded:smollm2-135m` for the shipped GGUF;
        `extra_buffers`: llama.cpp's repacked weight buffers (off: see the module doc)."""
        from llama_cpp import Llama
        from engine.models import EMBEDDED, embedded_gguf
        path = embedded_gguf() if str(model) == EMBEDDED else Path(model)
        if path.suffix != ".gguf" or not path.exists():
            raise BackendError(f"llama_cpp backend needs an existing .gguf file, got {model!r}; "
                               f"export one (`pipeline export`) or use {EMBEDDED!r}")
        self.path = path
        with _extra_buffers(extra_buffers):
            self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                             n_batch=n_batch, verbose=False, **llama_opts)
        self.end_ids = {self.llm.token_eos()}
        im_end = self.llm.tokenize(IM_END.encode(), add_bos=False, special=True)
        if len(im_end) == 1:
            self.end_ids.add(im_end[0])
        self.config = {"n_ctx": n_ctx, "gguf": path.name}

    def generate(self, prompts: list[str], params: SamplingParams, seeds: list[int],
                 conversations: list[Conversation] | None = None) -> list[Completion]:
        return [self._one(p, params, s) for p, s in zip(prompts, seeds)]

    def _one(self, prompt: str, params: SamplingParams, seed: int) -> Completion:
        tokens = self.llm.tokenize(prompt.encode(), add_bos=False, special=True)
        stops = [s for s in params.stop if s != IM_END]
        room = self.llm.n_ctx() - len(tokens)
        limit = min(params.max_tokens, max(room, 0))
        self.llm.set_seed(seed)
        ids: list[int] = []
        if limit > 0:
            for tok in self.llm.generate(tokens, temp=params.temperature, top_p=params.top_p,
                                         top_k=0, min_p=0.0, repeat_penalty=1.0):
                ids.append(tok)
                if tok in self.end_ids:
                    text = self._text(ids[:-1])
                    return Completion(text, ids, len(tokens), "stop")
                text = self._text(ids)
                cut, stop = cut_at_stop(text, stops)
                if stop is not None:
                    return Completion(cut, ids, len(tokens), "stop",
                                      CALL_STOP if stop == CALL_STOP else None)
                if len(ids) >= limit:
                    break
        return Completion(self._text(ids), ids, len(tokens), "length")

    def _text(self, ids: list[int]) -> str:
        return self.llm.detokenize(ids, special=True).decode("utf-8", errors="ignore")

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.close()


@contextmanager
def _extra_buffers(on: bool):
    """Models loaded inside get `use_extra_bufts = on` (llama-cpp-python's `Llama` does not
    take the model parameter, so its defaults are wrapped while the model loads)."""
    import llama_cpp.llama_cpp as lib
    default = lib.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = on
        return p
    lib.llama_model_default_params = params
    try:
        yield
    finally:
        lib.llama_model_default_params = default
