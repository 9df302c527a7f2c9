"""Laptop inference: chat with an exported GGUF through llama.cpp, built-in tools run for real.

    chat(Path("runs/default/round-5-rl-polish/export/model-Q6_K.gguf"),
         prompt="What's the weather in Paris?")

Each assistant turn is generated with the project's own render (the same ChatML + Hermes
text the model was trained on) and handed to the one turn rule (`data.turns.take_turn`), the
rule the sampler, GRPO and the gates play by: every call is executed against the built-in tool
domains (`data.envs`) and the call and its result are printed before the model reads the
result. `prompt=None` starts an interactive loop (empty line or /exit quits). Malformed model
output is printed and recorded, never raised.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from data.chatformat import render
from data.environment import DomainEnvironment
from data.envs import BUILTIN, resolve
from data.tasks import SYSTEM
from data.turns import MAX_CALLS_PER_TURN, Conversation, take_turn


def domain_tools(domains: Iterable[str] | None = None) -> list[dict]:
    """Tool declarations of the chosen domains: built-in names or dotted paths to a user's
    domain (all built-in domains by default)."""
    out = []
    for spec in sorted(domains) if domains else sorted(BUILTIN):
        try:
            out += resolve(spec).tools
        except ValueError as err:
            raise ValueError(f"unknown tool domain: {err}") from None
    return out


class Session:
    """One conversation: the turn rule's state, the tool runtime, the backend."""

    def __init__(self, backend, tools: list[dict], system: str, params, out: Callable,
                 max_turns: int = 6):
        self.backend, self.tools, self.params, self.out = backend, tools, params, out
        self.conv = Conversation([{"role": "system", "content": system}], tools, max_turns)
        self.env = DomainEnvironment(tools)  # a chat has no injected faults
        self.problems: list[str] = []

    @property
    def messages(self) -> list[dict]:
        return self.conv.messages

    def _generate_turn(self, seed: int) -> tuple[str, bool]:
        """One assistant turn and whether the token limit cut it; a `</tool_call>` stop
        continues the same turn (parallel calls), as in the sampler's driver."""
        from engine.sampling.base import CALL_STOP
        prompt, text = render(self.messages, self.tools, add_generation_prompt=True), ""
        for piece in range(MAX_CALLS_PER_TURN + 1):
            c = self.backend.generate([prompt + text], self.params, [seed + piece])[0]
            text += c.text
            if c.finish_reason == "length":
                return text, True
            if c.stop_reason != CALL_STOP:
                break
        return text, False

    def ask(self, user: str, max_turns: int | None = None, seed: int = 0) -> str | None:
        """Run the model on one user message until it answers; returns the answer text
        (None when it ran out of turns or tokens, or produced output that does not parse)."""
        if max_turns is not None:
            self.conv.max_turns = max_turns
        self.conv.user(user)
        while self.conv.finish is None:
            text, cut = self._generate_turn(seed + 101 * self.conv.turns)
            n = len(self.messages)
            step = take_turn(self.conv, self.env, text, cut=cut)
            if step.parsed is not None and step.parsed.think:
                self.out(f"[think] {step.parsed.think}")
            for err in step.errors:
                self.problems.append(err)
                self.out(f"[unparsed] {err}")
            for call, result in zip(step.calls, self.messages[n + 1:]):
                self.out(f"[call] {call.name}({_args(call.arguments)})")
                self.out(f"[result] {result['content']}")
        return self._ending(step, text)

    def _ending(self, step, text: str) -> str | None:
        """Print how the conversation ended; the answer text when it answered."""
        finish = self.conv.finish
        if finish == "answer":
            self.out(f"assistant> {step.parsed.text}")
            return step.parsed.text
        if finish == "parse_error":
            self.out(f"[raw] {text.strip()}")
        else:
            why = {"turn_limit": f"no final answer within {self.conv.max_turns} turns",
                   "token_limit": f"the turn ran past {self.params.max_tokens} tokens"}[finish]
            self.problems.append(why)
            self.out(f"[stopped] {why}")
        return None


def _args(arguments: dict) -> str:
    import json
    return json.dumps(arguments, ensure_ascii=False)


def chat(gguf: Path, prompt: str | None = None, tools_domains: Iterable[str] | None = None, *,
         system: str | None = None, temperature: float = 0.0, top_p: float = 0.95,
         max_tokens: int = 256, max_turns: int = 6, n_ctx: int = 8192, seed: int = 0,
         out: Callable[[str], None] = print,
         read: Callable[[str], str] = input) -> Session:
    """Chat with `gguf`. With `prompt`, answer it once and return; else loop on `read`.

    Greedy by default (reproducible); pass temperature 0.6 / top_p 0.95 for the Modelfile's
    sampling. Returns the session (messages, problems) for the caller to inspect.
    """
    from engine.sampling import SamplingParams, make_backend
    tools = domain_tools(tools_domains)
    backend = make_backend("llama_cpp", Path(gguf), n_ctx=n_ctx)
    params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
    session = Session(backend, tools, system or SYSTEM, params, out, max_turns)
    try:
        if prompt is not None:
            out(f"user> {prompt}")
            session.ask(prompt, max_turns, seed)
            return session
        out(f"Chatting with {Path(gguf).name}; tools: "
            f"{', '.join(t['function']['name'] for t in tools)}. Empty line or /exit quits.")
        asked = 0
        while True:
            try:
                line = read("user> ").strip()
            except EOFError:
                break
            if not line or line in ("/exit", "/quit"):
                break
            session.ask(line, max_turns, seed + 1000 * asked)
            asked += 1
        return session
    finally:
        backend.close()
