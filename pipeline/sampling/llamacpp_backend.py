"""llama.cpp backend (llama-cpp-python) over a GGUF file: laptop inference, export checks.

One sequence at a time. `Llama.generate` keeps the evaluated tokens and reuses the longest
common prefix with the next prompt, so continuing a turn re-evaluates only the new tokens.
Seeded per prompt (`set_seed` before each sequence); temperature 0 is greedy. Close it
explicitly: left to interpreter exit, its teardown prints a traceback.
"""
from __future__ import annotations

from pathlib import Path

from data.chatformat import IM_END

from .base import CALL_STOP, BackendError, Completion, Conversation, SamplingParams, cut_at_stop


class LlamaCppBackend:
    name = "llama_cpp"

    def __init__(self, model: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 512, **llama_opts):
        """`model`: a .gguf path, or `embedded:smollm2-135m` for the shipped GGUF."""
        from llama_cpp import Llama
        from pipeline.models import EMBEDDED, embedded_gguf
        path = embedded_gguf() if str(model) == EMBEDDED else Path(model)
        if path.suffix != ".gguf" or not path.exists():
            raise BackendError(f"llama_cpp backend needs an existing .gguf file, got {model!r}; "
                               f"export one (`pipeline export`) or use {EMBEDDED!r}")
        self.path = path
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
