"""Fuzz the parser with 10,000+ generated outputs: it never raises and its fields stay sane."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data.chatformat import parse
from tests.test_chatformat import TOOLS

FRAGMENTS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", '"name"', ":",
             '"get_weather"', '"arguments"', '{"city": "Paris"}', "\n", " ", "null", "[",
             '"', "\\", "<|im_end|>", "é", "\x00"]
call_json = st.fixed_dictionaries({"name": st.sampled_from(["get_weather", "nope", ""]),
                                   "arguments": st.dictionaries(st.sampled_from(["city", "days"]),
                                                                st.one_of(st.text(max_size=5),
                                                                          st.integers()))})
piece = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8),
                  call_json.map(lambda d: "<tool_call>" + json.dumps(d) + "</tool_call>"))


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(piece, max_size=12).map("".join))
def test_parser_never_raises(text):
    turn = parse(text, TOOLS)
    assert isinstance(turn.errors, list) and isinstance(turn.text, str)
    for call in turn.calls:  # every accepted call is declared and schema-valid
        assert call.name == "get_weather" and isinstance(call.arguments.get("city"), str)
    assert "<tool_call>" not in turn.text
