"""Laptop inference: chat with an exported GGUF through llama.cpp, built-in tools run for real.

    chat(Path("runs/default/round-5-rl/export/model-Q6_K.gguf"),
         prompt="What's the weather in Paris?")

Each assistant turn is generated with the project's own render (the same ChatML + Hermes
text the model was trained on), parsed with the project's parser, and every call is executed
against the built-in tool domains (`data.envs`); the call and its result are printed before
the model reads the result. `prompt=None` starts an interactive loop (empty line or /exit
quits). Malformed model output is printed and recorded, never raised.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from data.chatformat import parse, render
from data.environment import Environment
from data.envs import DOMAINS
from data.tasks import SYSTEM
from data.trajectory import Task

MAX_CALLS_PER_TURN = 4


def domain_tools(domains: Iterable[str] | None = None) -> list[dict]:
    """Tool declarations of the chosen built-in domains (all of them by default)."""
    names = sorted(domains) if domains else sorted(DOMAINS)
    unknown = [d for d in names if d not in DOMAINS]
    if unknown:
        raise ValueError(f"unknown tool domain(s) {unknown}; choose from {sorted(DOMAINS)}")
    return [t for d in names for t in DOMAINS[d].tools]


class Session:
    """One conversation: messages, declared tools, the tool runtime, the backend."""

    def __init__(self, backend, tools: list[dict], system: str, params, out: Callable):
        self.backend, self.tools, self.params, self.out = backend, tools, params, out
        self.messages: list[dict] = [{"role": "system", "content": system}]
        # Environment reads only the declared tools and faults of a task: a chat has no faults.
        self.env = Environment(Task(id="chat", domain="chat", kind="single", seed=0,
                                    system=system, prompt="", tools=tools, answer=None))
        self.problems: list[str] = []

    def _generate_turn(self, seed: int) -> str:
        """One assistant turn; a `</tool_call>` stop continues the same turn (parallel calls)."""
        from pipeline.sampling.base import CALL_STOP
        prompt, text = render(self.messages, self.tools, add_generation_prompt=True), ""
        for piece in range(MAX_CALLS_PER_TURN):
            c = self.backend.generate([prompt + text], self.params, [seed + piece])[0]
            text += c.text
            if c.stop_reason != CALL_STOP or c.finish_reason == "length":
                break
        return text

    def ask(self, user: str, max_turns: int = 6, seed: int = 0) -> str | None:
        """Run the model on one user message until it answers; returns the answer text
        (None when it ran out of turns or produced output that does not parse)."""
        self.messages.append({"role": "user", "content": user})
        for turn_no in range(max_turns):
            text = self._generate_turn(seed + 101 * turn_no)
            self.messages.append({"role": "assistant", "content": text})
            turn = parse(text, self.tools)
            if turn.think:
                self.out(f"[think] {turn.think}")
            for err in turn.errors:
                self.problems.append(err)
                self.out(f"[unparsed] {err}")
            if turn.errors and not turn.calls:
                self.out(f"[raw] {text.strip()}")
                return None
            if not turn.calls:
                self.out(f"assistant> {turn.text}")
                return turn.text
            for call in turn.calls:
                self.out(f"[call] {call.name}({_args(call.arguments)})")
                result = self.env.execute(call)
                self.out(f"[result] {result}")
                self.messages.append({"role": "tool", "content": result})
        self.problems.append(f"no final answer within {max_turns} turns")
        self.out(f"[stopped] no final answer within {max_turns} turns")
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
    from pipeline.sampling import SamplingParams, make_backend
    tools = domain_tools(tools_domains)
    backend = make_backend("llama_cpp", Path(gguf), n_ctx=n_ctx)
    params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
    session = Session(backend, tools, system or SYSTEM, params, out)
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
