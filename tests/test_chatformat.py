"""The renderer equals the chat templates; the parser reads every shape of model output."""
from __future__ import annotations

from pathlib import Path

import pytest

from data import chatformat, tasks
from data.chatformat import format_call, parse, render

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]


def _conversations():
    out = []
    for kind in ("single", "parallel", "chained", "recovery", "long_context"):
        t = tasks.make(kind, 1)
        out.append((t.messages() + t.oracle, t.tools))
    return out


@pytest.mark.parametrize("gen", [False, True])
def test_render_equals_project_template(tokenizer, gen):
    for messages, tools in _conversations():
        want = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                             add_generation_prompt=gen)
        assert render(messages, tools, add_generation_prompt=gen) == want


def test_training_template_renders_the_same_text(tokenizer):
    training = (Path(chatformat.__file__).parent / "chat_template_training.jinja").read_text()
    for messages, tools in _conversations():
        want = render(messages, tools)
        got = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                            chat_template=training)
        assert got == want


def test_render_equals_smollm2_template_without_tools(tokenizer):
    import jinja2
    from engine.models import embedded_gguf  # noqa: F401  (the tokenizer came from it)
    smol = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
            "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
            "Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
            "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|im_start|>assistant\n' }}{% endif %}")
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}]
    want = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True,
                                         chat_template=smol)
    assert render(msgs, None, add_generation_prompt=True) == want
    assert jinja2  # the template engine transformers uses is present


def test_render_equals_qwen25_tools_template(tokenizer):
    """Against TRL's verbatim copy of the Qwen2.5 template (structured tool_calls, dict args)."""
    import trl
    qwen = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather",
                                                  "arguments": {"city": "Paris"}}},
                {"type": "function", "function": {"name": "get_weather",
                                                  "arguments": {"city": "Tokyo"}}}]},
            {"role": "tool", "content": '{"temp": 18}'}, {"role": "tool", "content": "21"},
            {"role": "assistant", "content": "Paris 18, Tokyo 21."}]
    want = tokenizer.apply_chat_template(msgs, tools=TOOLS, tokenize=False,
                                         add_generation_prompt=False, chat_template=qwen)
    assert render(msgs, TOOLS) == want
    # and the raw-markup form the sampler stores renders to the same string
    raw = dict(msgs[2], content="\n".join([format_call("get_weather", {"city": "Paris"}),
                                           format_call("get_weather", {"city": "Tokyo"})]))
    raw.pop("tool_calls")
    assert render(msgs[:2] + [raw] + msgs[3:], TOOLS) == want


def test_parse_plan_parallel_calls_and_text():
    text = ("<think>\nTwo cities, call both.\n</think>\nLet me check.\n"
            + format_call("get_weather", {"city": "Paris"}) + "\n"
            + format_call("get_weather", {"city": "Tokyo", "days": 2}))
    turn = parse(text, TOOLS)
    assert turn.ok and turn.think == "Two cities, call both." and turn.think_before_call
    assert [(c.name, c.arguments) for c in turn.calls] == [
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo", "days": 2})]
    assert turn.text == "Let me check."


@pytest.mark.parametrize("text, reason", [
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>', "malformed JSON"),
    ('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', "unknown tool 'get_time'"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": 3}}\n</tool_call>',
     "invalid arguments for get_weather at city"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>',
     "'city' is a required property"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}', "unclosed <tool_call>"),
    ("<think>planning forever", "unclosed <think>"),
    ('<tool_call>["get_weather"]</tool_call>', "lacks a string 'name'"),
])
def test_parse_failures_are_recorded_not_raised(text, reason):
    turn = parse(text, TOOLS)
    assert not turn.ok and not turn.calls
    assert any(reason in e for e in turn.errors), turn.errors


def test_parse_accepts_string_arguments():
    turn = parse('<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}'
                 '</tool_call>', TOOLS)
    assert turn.ok and turn.calls[0].arguments == {"city": "Rome"}
