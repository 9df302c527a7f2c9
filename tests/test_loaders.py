"""Loaders: Hermes conversations, BFCL question/answer files, GSM8K-style math."""
import importlib.util
import json
from pathlib import Path

import pytest

from data.chatformat import parse, render
from data.jsonl import DataError
from data.loaders import bfcl_task, bfcl_tools, load_bfcl, load_gsm8k, load_hermes
from data.verify import verify

HERE = Path(__file__).parent / "data"


def bfcl_data() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


# ---------------------------------------------------------------------------------- Hermes

def test_hermes_rows_become_canonical_trajectories():
    loaded = load_hermes(HERE / "hermes_sample.jsonl", skip_bad=True)
    by_id = {t.id: t for t in loaded.items}
    assert sorted(by_id) == ["hermes-h1", "hermes-h2", "hermes-h3", "hermes-h4"]
    assert len(loaded.skipped) == 1 and "hermes_sample.jsonl:5" in loaded.skipped[0]
    assert "unknown speaker 'narrator'" in loaded.skipped[0]

    h1 = by_id["hermes-h1"]
    # tools come out of the system prompt (Python-quoted there), the prompt keeps no tool list
    assert [t["function"]["name"] for t in h1.tools] == ["get_stock_price", "convert_currency"]
    assert h1.messages[0] == {"role": "system", "content": "You are a helpful assistant."}
    # the Python-dict call is rewritten in the canonical JSON form
    assert h1.messages[2]["content"] == ('<tool_call>\n{"name": "get_stock_price", "arguments": '
                                         '{"symbol": "AAPL"}}\n</tool_call>')
    assert h1.messages[3] == {"role": "tool", "content": '{"name": "get_stock_price", '
                                                         '"content": {"price": 189.5}}'}
    assert (h1.kind, h1.finish, h1.source, h1.turns, h1.parse_errors) == (
        "single", "answer", "dataset", 2, [])
    assert h1.domain == "finance"

    h2 = by_id["hermes-h2"]  # tools given as a JSON string; two responses in one tool turn
    assert h2.kind == "parallel"
    assert [m["role"] for m in h2.messages] == ["system", "user", "assistant", "tool", "tool",
                                                "assistant"]
    assert len(parse(h2.messages[2]["content"], h2.tools).calls) == 2

    assert by_id["hermes-h3"].kind == "irrelevance"
    assert by_id["hermes-h3"].messages[0]["role"] == "system"  # a default system is added

    h4 = by_id["hermes-h4"]  # OpenAI form with string arguments; a call the schema rejects
    assert '"ticker": "MSFT"' in h4.messages[2]["content"]
    assert h4.parse_errors and "get_stock_price" in h4.parse_errors[0]


def test_hermes_render_round_trip_keeps_tool_responses():
    h2 = {t.id: t for t in load_hermes(HERE / "hermes_sample.jsonl", skip_bad=True).items}[
        "hermes-h2"]
    text = render(h2.messages, h2.tools)
    assert text.count("<tool_response>") == 2 and '"result": 92.1' in text
    assert text.count('"description": "Convert an amount"') == 1  # the tool list once


def test_hermes_bad_row_is_an_error_naming_the_line():
    with pytest.raises(DataError, match=r"hermes_sample.jsonl:5: unknown speaker"):
        load_hermes(HERE / "hermes_sample.jsonl")


def test_hermes_broken_lines_and_calls_never_sink_the_good_rows(tmp_path):
    good = HERE.joinpath("hermes_sample.jsonl").read_text().splitlines()[:2]
    odd = {"id": "odd", "conversations": [
        {"from": "human", "value": "Price of AAPL?"},
        {"from": "gpt", "value": "<tool_call>\n{'name': 'get_stock_price', 'arguments': {\n"
                                 "</tool_call>"},
        {"from": "tool", "value": "{}"}, {"from": "gpt", "value": "Done."}]}
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([good[0], '{"id": "cut", "conversa', json.dumps(odd), good[1],
                               json.dumps({"conversations": ["hi"]})]) + "\n")
    loaded = load_hermes(path, skip_bad=True)
    assert [t.id for t in loaded.items] == ["hermes-h1", "hermes-odd", "hermes-h2"]
    assert loaded.origins == [f"{path}:1", f"{path}:3", f"{path}:4"]
    assert [s.split(": ", 1)[0] for s in loaded.skipped] == [f"{path}:2", f"{path}:5"]
    assert "not valid JSON" in loaded.skipped[0] and "turn 0 is not an object" in loaded.skipped[1]
    odd_call = {t.id: t for t in loaded.items}["hermes-odd"]  # kept as written, named by parse
    assert odd_call.messages[2]["content"].startswith("<tool_call>\n{'name'")
    assert odd_call.parse_errors and "malformed JSON" in odd_call.parse_errors[0]
    with pytest.raises(DataError, match=r"mixed.jsonl:2: not valid JSON"):
        load_hermes(path)


def test_hub_source_without_network_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError, match="download the file elsewhere"):
        load_hermes("hub:NousResearch/hermes-function-calling-v1@train", limit=1)


# ----------------------------------------------------------------------------------- GSM8K

def test_gsm8k_tasks_and_oracles_verify():
    loaded = load_gsm8k(HERE / "gsm8k_sample.jsonl", skip_bad=True)
    assert [t.answer for t in loaded.items] == [72.0, 2400.0, 3.5]
    assert len(loaded.skipped) == 1 and ":4:" in loaded.skipped[0]
    assert "####" in loaded.skipped[0]
    t = loaded.items[0]
    assert (t.kind, t.domain, t.tools) == ("reasoning", "math", [])
    assert "<<" not in t.oracle[0]["content"] and t.oracle[0]["content"].endswith(
        "The answer is 72.")
    for task in loaded.items:
        assert verify(task, task.messages() + task.oracle).success
    assert verify(t, t.messages() + [{"role": "assistant", "content": "It is 71."}]).success \
        is False
    with pytest.raises(DataError, match="gsm8k_sample.jsonl:4"):
        load_gsm8k(HERE / "gsm8k_sample.jsonl")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_gsm8k(tmp_path / "nope.jsonl")


# ------------------------------------------------------------------------------------ BFCL

def test_bfcl_simple_file_loads_as_tasks():
    d = bfcl_data()
    items = load_bfcl(d / "BFCL_v4_simple_python.json",
                      d / "possible_answer/BFCL_v4_simple_python.json", limit=5)
    assert [i.id for i in items] == [f"simple_python_{n}" for n in range(5)]
    first = items[0]
    assert first.category == "simple_python"
    assert first.ground_truth == [{"calculate_triangle_area": {"base": [10], "height": [5],
                                                               "unit": ["units", ""]}}]
    task = bfcl_task(first, [("calculate_triangle_area", {"base": 10, "height": 5})])
    assert task.kind == "single" and task.max_turns == 1
    assert task.prompt.startswith("Find the area of a triangle")
    params = task.tools[0]["function"]["parameters"]
    assert params["type"] == "object"  # BFCL "dict" -> JSON Schema "object"
    assert params["properties"]["base"]["type"] == "integer"
    # the oracle call parses and validates against the converted schema
    turn = parse(task.oracle[0]["content"], task.tools)
    assert turn.ok and turn.calls[0].arguments == {"base": 10, "height": 5}


def test_bfcl_types_map_to_json_schema():
    tools = bfcl_tools([{"name": "f", "description": "", "parameters": {
        "type": "dict", "properties": {
            "x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "float"}},
            "a": {"type": "any"}, "o": {"type": "dict", "properties": {"k": {"type": "float"}}}},
        "required": ["x"]}}])
    p = tools[0]["function"]["parameters"]
    assert p["properties"]["x"] == {"type": "number"}
    assert p["properties"]["t"] == {"type": "array", "items": {"type": "number"}}
    assert p["properties"]["a"] == {}
    assert p["properties"]["o"] == {"type": "object", "properties": {"k": {"type": "number"}}}
    assert p["required"] == ["x"]


def test_bfcl_irrelevance_and_unsupported_categories():
    d = bfcl_data()
    items = load_bfcl(d / "BFCL_v4_irrelevance.json", limit=3)
    assert all(i.ground_truth is None for i in items)
    assert bfcl_task(items[0]).kind == "irrelevance" and bfcl_task(items[0]).answer is None
    with pytest.raises(DataError, match="multi_turn_base"):
        load_bfcl(d / "BFCL_v4_multi_turn_base.json", limit=1)
    # BFCL's layout: the possible answers are found beside the questions
    found = load_bfcl(d / "BFCL_v4_simple_python.json", limit=2)
    assert found[1].ground_truth and found[1].id == "simple_python_1"


def test_bfcl_call_file_without_answers_says_so(tmp_path):
    d = bfcl_data()
    q = tmp_path / "BFCL_v4_simple_python.json"
    q.write_text((d / "BFCL_v4_simple_python.json").read_text().splitlines()[0] + "\n")
    with pytest.raises(DataError, match="pass the possible_answer file"):
        load_bfcl(q)


def test_bfcl_live_items_with_system_messages(tmp_path):
    q = {"id": "live_simple_9-9-9", "question": [[
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"}]],
         "function": [{"name": "get_weather", "description": "d", "parameters": {
             "type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]}
    a = {"id": "live_simple_9-9-9", "ground_truth": [{"get_weather": {"city": ["Paris"]}}]}
    (tmp_path / "BFCL_v4_live_simple.json").write_text(json.dumps(q) + "\n")
    (tmp_path / "ans.json").write_text(json.dumps(a) + "\n")
    item, = load_bfcl(tmp_path / "BFCL_v4_live_simple.json", tmp_path / "ans.json")
    task = bfcl_task(item)
    assert (item.category, task.system, task.prompt, task.history) == (
        "live_simple", "You are terse.", "Weather in Paris?", [])
