"""transformers backend: batched `generate` with left padding and the KV cache (the fallback).

Sampling happens in a logits processor that draws each row's token with that row's own
`torch.Generator` (seeded from `seeds[i]`) and then leaves `generate` a single finite logit
per row, so `generate` itself runs greedy (inverse-CDF draws: one uniform number per row and step). What that guarantees: temperature 0 is greedy and
deterministic; at temperature > 0 a row's draws depend only on its seed and its logits, so the
same prompts, seeds and batch give the same completions run after run. Rows in a different
batch (other padding) can differ in the last bits of their logits, hence rarely in a token.
"""
from __future__ import annotations

from pathlib import Path

from data.chatformat import IM_END

from .base import CALL_STOP, Completion, Conversation, SamplingParams, cut_at_stop


class _RowSampler:
    """LogitsProcessor: temperature / top-p sampling with one generator per row."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float):
        import torch
        self.temperature, self.top_p = temperature, top_p
        self.gens = [torch.Generator().manual_seed(int(s)) for s in seeds]

    def __call__(self, input_ids, scores):
        import torch
        scores = scores.float()
        if self.temperature <= 0:
            choice = scores.argmax(-1)
        else:
            probs = torch.softmax(scores / self.temperature, dim=-1)  # (B, V)
            if self.top_p < 1.0:
                sorted_p, order = probs.sort(dim=-1, descending=True)
                drop = sorted_p.cumsum(-1) - sorted_p > self.top_p
                sorted_p[drop] = 0.0
                probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
            # inverse-CDF sampling: one uniform draw per row from that row's generator
            u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.gens])
            cdf = probs.double().cumsum(-1)  # (B, V)
            choice = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(-1)
            choice = choice.clamp(max=scores.shape[-1] - 1)
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(choice)), choice] = 0.0
        return out


class _StopOnText:
    """StoppingCriteria: a row is done once its generated text contains a stop string
    (checked on the last few tokens only; the prompt itself mentions `</tool_call>`)."""

    def __init__(self, tokenizer, stops: list[str], prompt_len: int):
        self.tok, self.stops, self.start = tokenizer, stops, prompt_len
        self.tail = max((len(tokenizer.encode(s, add_special_tokens=False)) for s in stops),
                        default=1) + 2

    def __call__(self, input_ids, scores, **kw):
        import torch
        lo = max(self.start, input_ids.shape[1] - self.tail)
        texts = self.tok.batch_decode(input_ids[:, lo:])
        return torch.tensor([any(s in t for s in self.stops) for t in texts], dtype=torch.bool)


class HFBackend:
    name = "transformers"

    def __init__(self, model: str | Path, *, dtype: str = "bfloat16", max_batch: int = 64,
                 trust_remote_code: bool = False):
        import torch
        from engine.models import load_model, load_tokenizer, resolve
        self.model_dir = resolve(model)
        self.tokenizer = load_tokenizer(self.model_dir)
        self.tokenizer.padding_side = "left"
        self.model = load_model(self.model_dir, dtype=dtype,
                                trust_remote_code=trust_remote_code).eval()
        self.max_batch = max_batch
        self.end_id = self.tokenizer.convert_tokens_to_ids(IM_END)
        self.end_ids = sorted({i for i in (self.end_id, self.tokenizer.eos_token_id)
                               if isinstance(i, int)})
        self.config = {"dtype": dtype, "threads": torch.get_num_threads()}

    def generate(self, prompts: list[str], params: SamplingParams, seeds: list[int],
                 conversations: list[Conversation] | None = None) -> list[Completion]:
        out: list[Completion] = []
        for i in range(0, len(prompts), self.max_batch):
            out += self._batch(prompts[i:i + self.max_batch], params,
                               seeds[i:i + self.max_batch])
        return out

    def _batch(self, prompts, params, seeds) -> list[Completion]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True,
                             add_special_tokens=False)
        stops = [s for s in params.stop if s != IM_END]
        gen = GenerationConfig(max_new_tokens=params.max_tokens, do_sample=False,
                               eos_token_id=self.end_ids,
                               pad_token_id=self.tokenizer.pad_token_id)
        prompt_len = enc["input_ids"].shape[1]
        with torch.inference_mode():
            ids = self.model.generate(
                **enc, generation_config=gen,
                logits_processor=LogitsProcessorList(
                    [_RowSampler(seeds, params.temperature, params.top_p)]),
                stopping_criteria=StoppingCriteriaList(
                    [_StopOnText(self.tokenizer, stops, prompt_len)] if stops else []))
        new = ids[:, prompt_len:].tolist()  # (B, T)
        lengths = enc["attention_mask"].sum(-1).tolist()
        return [self._completion(row, n, params) for row, n in zip(new, lengths)]

    def _completion(self, row: list[int], prompt_tokens: int, params) -> Completion:
        """Cut one generated row at its stop string or end token. Rows that finished early
        were padded by `generate` (the pad id may equal the end id: a stop string found
        before the first end id means that id is padding)."""
        j = next((k for k, t in enumerate(row) if t in self.end_ids), len(row))
        text = self.tokenizer.decode(row[:j])
        cut, stop = cut_at_stop(text, [s for s in params.stop if s != IM_END])
        if stop is None:
            if j < len(row):  # the end-of-turn token was sampled: keep its id
                return Completion(text, row[:j + 1], prompt_tokens, "stop")
            return Completion(text, row, prompt_tokens,
                              "length" if len(row) >= params.max_tokens else "stop")
        row = row[:j]
        # the fewest tokens whose text reaches the end of the stop string
        lo, hi = 1, len(row)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(self.tokenizer.decode(row[:mid])) >= len(cut):
                hi = mid
            else:
                lo = mid + 1
        return Completion(cut, row[:lo], prompt_tokens, "stop",
                          CALL_STOP if stop == CALL_STOP else None)

    def close(self) -> None:
        self.model = None
        import gc
        gc.collect()
