"""Malformed model output is a recorded parse failure, never an exception, and parsing takes
linear time however many tags are left open."""
from __future__ import annotations

import json
import time

from data import teacher
from data.chatformat import parse
from tests.test_chatformat import TOOLS

HUGE = "1" * 5000  # more digits than Python converts to an int by default (4,300)


def test_an_integer_too_long_to_convert_is_a_parse_error():
    for text in (f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "Oslo", '
                 f'"days": {HUGE}}}}}</tool_call>',
                 '<tool_call>' + json.dumps({"name": "get_weather",
                                              "arguments": f'{{"days": {HUGE}}}'}) + '</tool_call>',
                 f'<tool_call>{{"name": "x", "arguments": {{}}, "n": {HUGE}}}</tool_call>'):
        for tools in (TOOLS, None):
            turn = parse(text, tools)
            assert turn.calls == [] and len(turn.errors) == 1, turn.errors
            assert "JSON" in turn.errors[0]


def test_a_teacher_row_with_a_huge_integer_is_dropped_not_raised(tmp_path):
    call = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": '
            + HUGE + '}}</tool_call>')
    good = [{"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "It is sunny."}]
    bad = [{"role": "user", "content": "Weather in Oslo?"},
           {"role": "assistant", "content": call},
           {"role": "tool", "content": "{}"},
           {"role": "assistant", "content": "Done."}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"messages": m, "tools": TOOLS}) + "\n"
                            for m in (good, bad))
                    + f'{{"messages": [], "n": {HUGE}}}\n')  # a number the reader cannot convert
    traces = teacher.load_teacher(path, "schema")
    assert len(traces.kept) == 1 and len(traces.dropped) == 2
    where = sorted(line.split(": ")[0] for _, line in traces.dropped)
    assert where == [f"{path}:2", f"{path}:3"], traces.dropped


def _parse_seconds(text: str, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        parse(text, TOOLS)
        best = min(best, time.perf_counter() - t0)
    return best


def test_parsing_unclosed_tags_is_linear():
    """44 kB of unclosed tags took 23 s (every open tag rescanned the rest). Time grows with
    the input, not its square: 8x the text must cost well under 64x the time (measured
    before: 47 ms for 5 kB, 4.3 s for 40 kB, 92x; after: 0.03 and 0.17 ms)."""
    unit = "<tool_call><think>x"
    small = unit * (5_000 // len(unit))
    large = unit * (40_000 // len(unit))
    t_small, t_large = _parse_seconds(small), _parse_seconds(large)
    assert t_large / max(t_small, 1e-4) < 24, (t_small, t_large)
    turn = parse(unit * (44_000 // len(unit)), TOOLS)
    assert "unclosed <tool_call> tag" in turn.errors and "unclosed <think> tag" in turn.errors


def test_linear_parsing_finds_what_the_regex_found():
    text = ("<think>plan</think>a <tool_call>{\"name\": \"get_weather\", \"arguments\": "
            "{\"city\": \"Oslo\"}}</tool_call> b <tool_call> c <think> d")
    turn = parse(text, TOOLS)
    assert turn.think == "plan" and [c.arguments for c in turn.calls] == [{"city": "Oslo"}]
    assert turn.text == "a  b" and turn.think_before_call
    assert turn.errors == ["unclosed <tool_call> tag"]
