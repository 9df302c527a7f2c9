"""OpenAI-compatible backend: a vLLM server, Ollama, llama.cpp's server, a teacher model.

Two modes:
- "completions" (default): POST /v1/completions with the prompt the driver rendered, so the
  server sees exactly the project's template. Token ids come back only from servers that
  return them (vLLM's `return_token_ids`); otherwise they are re-encoded with `tokenizer`
  (a model reference) when one is given, else left empty.
- "chat": POST /v1/chat/completions with the conversation and tools; the server applies its
  own template, and returned `tool_calls` are written back as `<tool_call>` markup.

The API key is read from the environment variable named by `api_key_env` and never logged.
Requests run concurrently (`concurrency`), each with a timeout and retries with exponential
backoff; when the server stays unreachable the error names the URL.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from data.chatformat import IM_END, format_call, parse

from .base import (CALL_STOP, BackendError, Completion, Conversation, SamplingParams)

MODES = ("completions", "chat")


class OpenAIBackend:
    name = "openai"

    def __init__(self, model: str, *, base_url: str = "http://127.0.0.1:8000/v1",
                 mode: str = "completions", api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 120.0, retries: int = 4, backoff_s: float = 1.0,
                 concurrency: int = 8, tokenizer: str | None = None):
        import openai
        if mode not in MODES:
            raise ValueError(f"openai backend: unknown mode {mode!r}; choose from {MODES}")
        self.model, self.mode, self.base_url = str(model), mode, base_url.rstrip("/")
        self.retries, self.backoff_s, self.concurrency = retries, backoff_s, concurrency
        key = os.environ.get(api_key_env) or "none"  # local servers accept any key
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=timeout_s,
                                    max_retries=0)
        self._retryable = (openai.APIConnectionError, openai.APITimeoutError,
                           openai.RateLimitError, openai.InternalServerError)
        self.tokenizer = None
        if tokenizer is not None:
            from engine.models import load_tokenizer, resolve
            self.tokenizer = load_tokenizer(resolve(tokenizer))
        self.config = {"base_url": self.base_url, "mode": mode, "model": self.model}

    # ------------------------------------------------------------------ requests
    def _call(self, fn, **kw):
        """One request with retries and exponential backoff (1, 2, 4 ... x backoff_s)."""
        for attempt in range(self.retries + 1):
            try:
                return fn(**kw)
            except self._retryable as err:
                if attempt == self.retries:
                    raise BackendError(
                        f"OpenAI-compatible server at {self.base_url} failed after "
                        f"{attempt + 1} tries ({type(err).__name__}: {err}); is it running "
                        f"and is base_url right?") from err
                time.sleep(self.backoff_s * 2 ** attempt)

    def generate(self, prompts: list[str], params: SamplingParams, seeds: list[int],
                 conversations: list[Conversation] | None = None) -> list[Completion]:
        if self.mode == "chat":
            if conversations is None or len(conversations) != len(prompts):
                raise ValueError("openai backend in chat mode needs one conversation per prompt")
            jobs = [(self._chat, c, params, s) for c, s in zip(conversations, seeds)]
        else:
            jobs = [(self._complete, p, params, s) for p, s in zip(prompts, seeds)]
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            return list(pool.map(lambda job: job[0](*job[1:]), jobs))

    def _complete(self, prompt: str, params: SamplingParams, seed: int) -> Completion:
        stops = [s for s in params.stop if s != IM_END] + [IM_END]
        resp = self._call(self.client.completions.create, model=self.model, prompt=prompt,
                          max_tokens=params.max_tokens, temperature=params.temperature,
                          top_p=params.top_p, stop=stops, seed=seed)
        choice = resp.choices[0]
        text = choice.text or ""
        # Which stop string fired: vLLM says so (`stop_reason`); otherwise an unclosed
        # <tool_call> means the server cut `</tool_call>` off.
        stop = getattr(choice, "stop_reason", None)
        on_call = choice.finish_reason == "stop" and (
            stop == CALL_STOP or (stop is None and text.count("<tool_call>") >
                                  text.count(CALL_STOP)))
        if on_call and not text.endswith(CALL_STOP):
            text += CALL_STOP
        ids = list(getattr(choice, "token_ids", None) or [])
        if not ids and self.tokenizer is not None:  # re-encoded, not the sampled ids
            ids = self.tokenizer.encode(text, add_special_tokens=False)
        usage = getattr(resp, "usage", None)
        return Completion(text=text, token_ids=ids,
                          prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                          finish_reason="length" if choice.finish_reason == "length" else "stop",
                          stop_reason=CALL_STOP if on_call else None)

    def _chat(self, conversation: Conversation, params: SamplingParams, seed: int) -> Completion:
        messages, tools = conversation
        kw = dict(model=self.model, messages=to_openai_messages(messages, tools),
                  max_tokens=params.max_tokens, temperature=params.temperature,
                  top_p=params.top_p, seed=seed)
        if tools:
            kw["tools"] = tools
        resp = self._call(self.client.chat.completions.create, **kw)
        choice = resp.choices[0]
        msg = choice.message
        text = msg.content or ""
        for call in msg.tool_calls or []:
            try:
                args = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                args = call.function.arguments  # kept as text: the parser records the error
            text += ("\n" if text else "") + (format_call(call.function.name, args)
                                              if isinstance(args, dict) else
                                              f"<tool_call>\n{{\"name\": "
                                              f"{json.dumps(call.function.name)}, "
                                              f"\"arguments\": {args}}}\n{CALL_STOP}")
        ids = self.tokenizer.encode(text, add_special_tokens=False) if self.tokenizer else []
        usage = getattr(resp, "usage", None)
        return Completion(text=text, token_ids=ids,
                          prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                          finish_reason="length" if choice.finish_reason == "length" else "stop")

    def close(self) -> None:
        self.client.close()


def to_openai_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """Our messages (assistant content with `<tool_call>` markup, bare tool results) in the
    OpenAI wire form: `tool_calls` with ids, tool messages answering them in order."""
    out, pending = [], []
    for i, msg in enumerate(messages):
        if msg["role"] == "assistant":
            turn = parse(msg.get("content") or "", None)
            entry = {"role": "assistant", "content": turn.text or None}
            if turn.calls:
                ids = [f"call_{i}_{j}" for j in range(len(turn.calls))]
                entry["tool_calls"] = [
                    {"id": cid, "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for cid, c in zip(ids, turn.calls)]
                pending = ids
            out.append(entry)
        elif msg["role"] == "tool":
            cid = pending.pop(0) if pending else f"call_{i}"
            out.append({"role": "tool", "tool_call_id": cid, "content": msg["content"]})
        else:
            out.append({"role": msg["role"], "content": msg["content"]})
    return out
