"""Laptop chat: the real loop over a tiny GGUF, and the tool-execution path with a scripted model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.chatformat import format_call
from data.envs.weather import get_weather
from export.chat import Session, chat, domain_tools
from export.convert import convert_to_f16
from export.quantize import quantize
from engine.models import tiny_model_dir
from engine.sampling.base import CALL_STOP, Completion, SamplingParams


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("chat")
    convert_to_f16(tiny_model_dir(256), out / "f16.gguf")
    quantize(out / "f16.gguf", out / "model-Q6_K.gguf")
    return out / "model-Q6_K.gguf"


def test_one_shot_chat_on_a_tiny_gguf_runs_the_loop(tiny_gguf):
    lines: list[str] = []
    session = chat(tiny_gguf, prompt="What's the weather in Paris?", tools_domains=["weather"],
                   max_tokens=12, n_ctx=2048, out=lines.append)
    assert lines[0] == "user> What's the weather in Paris?"
    assert len(lines) >= 2  # the random model's turn is printed, whatever it was
    assert [m["role"] for m in session.messages[:3]] == ["system", "user", "assistant"]
    assert [t["function"]["name"] for t in session.tools] == ["get_weather", "get_forecast",
                                                              "city_for_airport"]


def test_interactive_loop_reads_until_exit(tiny_gguf):
    said = iter(["Hi", "/exit"])
    lines: list[str] = []
    session = chat(tiny_gguf, tools_domains=["units"], max_tokens=4, n_ctx=2048,
                   out=lines.append, read=lambda _: next(said))
    assert lines[0].startswith("Chatting with model-Q6_K.gguf; tools: convert_units")
    assert sum(m["role"] == "user" for m in session.messages) == 1


class ScriptedModel:
    """A hand-written stand-in for the model: replays fixed turns, one piece per request."""
    name = "scripted"

    def __init__(self, pieces: list[str]):
        self.pieces, self.prompts = list(pieces), []

    def generate(self, prompts, params, seeds, conversations=None):
        self.prompts += prompts
        text = self.pieces.pop(0)
        stop = CALL_STOP if text.endswith(CALL_STOP) else None
        return [Completion(text, [0], 0, "stop", stop)]


def test_tool_calls_are_executed_for_real_and_printed():
    call = format_call("get_weather", {"city": "Paris"})
    model = ScriptedModel(["<think>\nLook it up.\n</think>\n" + call, "",
                           "It is warm in Paris."])
    lines: list[str] = []
    session = Session(model, domain_tools(["weather"]), "sys", SamplingParams(), lines.append)
    answer = session.ask("Weather in Paris?")
    expected = json.dumps(get_weather("Paris"), ensure_ascii=False)
    assert answer == "It is warm in Paris."
    assert lines == ["[think] Look it up.", '[call] get_weather({"city": "Paris"})',
                     f"[result] {expected}", "assistant> It is warm in Paris."]
    assert session.messages[-2] == {"role": "tool", "name": "get_weather", "content": expected,
                                    "ok": True}
    # the model read the real result in its next prompt, inside <tool_response>
    assert f"<tool_response>\n{expected}\n</tool_response>" in model.prompts[-1]
    assert session.problems == []


def test_malformed_output_is_recorded_not_raised():
    model = ScriptedModel(['<tool_call>\n{"name": "get_weather", "arguments": {"town": 1}}\n'
                           '</tool_call>', ""])
    lines: list[str] = []
    session = Session(model, domain_tools(["weather"]), "sys", SamplingParams(), lines.append)
    assert session.ask("Weather?") is None
    assert any(line.startswith("[unparsed] invalid arguments for get_weather") for line in lines)
    assert session.problems and "get_weather" in session.problems[0]
    assert session.conv.finish == "parse_error" and lines[-1].startswith("[raw] <tool_call>")


def test_unknown_domain_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown tool domain"):
        domain_tools(["weather", "stocks"])
