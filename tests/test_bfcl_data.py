"""BFCL data as the project reads it: tool declarations, call strings, and the guarantee that
nothing but a literal-only call to an offered function ever reaches BFCL's `eval`."""
import ast
import importlib.util

import pytest

from data.chatformat import Call, format_call, parse, schemas_of

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval is not installed (see .ci/setup)")

DOCS = [{"name": "cd", "description": "Change directory.", "parameters": {"type": "dict",
         "properties": {"folder": {"type": "string"}}, "required": ["folder"]}},
        {"name": "calc", "description": "", "parameters": {"type": "dict", "properties": {
            "x": {"type": "float"}, "opts": {"type": "dict", "properties": {
                "n": {"type": "integer"}}}, "xs": {"type": "tuple", "items": {"type": "float"}},
            "anything": {"type": "any"}}}}]


def test_tools_use_bfcls_type_mapping():
    from data.bfcl import tools_of
    calc = tools_of(DOCS)[1]["function"]["parameters"]
    assert calc["type"] == "object"
    assert calc["properties"]["x"]["type"] == "number"
    assert calc["properties"]["opts"] == {"type": "object",
                                          "properties": {"n": {"type": "integer"}}}
    assert calc["properties"]["xs"] == {"type": "array", "items": {"type": "number"}}
    assert calc["properties"]["anything"]["type"] == "string"  # BFCL: any -> string


def test_every_multi_turn_doc_converts_to_a_valid_schema():
    from data.bfcl import MULTI_TURN, load_multi_turn, tools_of
    for category in MULTI_TURN:
        for e in load_multi_turn(category)[:5]:
            tools = tools_of(e.all_functions())
            turn = parse(format_call(tools[0]["function"]["name"], {}), tools)
            assert not any("invalid schema" in err for err in turn.errors)


def test_call_strings_are_literal_calls_and_read_back():
    from data.bfcl import call_string, parse_call_string
    args = {"x": 2, "opts": {"n": 1}, "xs": [1.5, 2.0], "anything": "it's \"quoted\"\n"}
    text = call_string("calc", args, DOCS)
    assert text == "calc(x=2, opts={'n': 1}, xs=[1.5, 2.0], anything='it\\'s \"quoted\"\\n')"
    assert parse_call_string(text, DOCS) == ("calc", args)
    assert parse_call_string("cd('docs')", DOCS) == ("cd", {"folder": "docs"})  # positional


PAYLOAD = "__import__('os').system('touch {path}')"


@pytest.mark.parametrize("name,args", [
    ("__import__", {"name": "os"}),                       # not one of the entry's functions
    ("exec", {"source": "print(1)"}),
    ("cd(folder='a') or __import__('os').system('touch {path}') or cd", {}),
    ("cd", {"folder); __import__('os').system('touch {path}'); cd(folder": "x"}),  # bad key
    ("cd", {"folder": "a", "__class__": "x"}),            # undeclared key
    ("cd", {"folder": float("nan")}),                     # not a JSON value
    ("cd", {"folder": b"bytes"}),
])
def test_call_string_refuses_anything_else(name, args, tmp_path):
    from data.bfcl import call_string
    target = tmp_path / "pwned"
    name = name.format(path=target)
    args = {k.format(path=target): v for k, v in args.items()}
    with pytest.raises(ValueError):
        call_string(name, args, DOCS)
    assert not target.exists()


def test_a_malicious_call_is_never_executed(tmp_path):
    """Through the environment: a payload in a value is only ever a string argument; an
    unknown name, a private method, a withheld function or an undeclared key never runs."""
    from data.bfcl import BfclEnvironment, MULTI_TURN, load_multi_turn
    target = tmp_path / "pwned"
    payload = PAYLOAD.format(path=target)
    e = next(x for x in load_multi_turn(MULTI_TURN[1]) if x.held_out)
    withheld = next(iter(e.held_out.values()))[0]["name"]
    env = BfclEnvironment(e)
    try:
        ran = env.execute(Call("cd", {"folder": payload}))      # a harmless string argument
        assert ran.error.code == "tool_error" and payload in ran.error.message  # a folder name
        for call in (Call("__import__", {"name": "os"}), Call("_load_scenario", {}),
                     Call(withheld, {}), Call("cd", {"folder": "a", "path": payload}),
                     Call(f"cd(folder='x') or {payload} or cd", {})):
            res = env.execute(call)
            assert not res.ok and res.error.code == "invalid_call"
        assert len(env.calls) == 1
        node = ast.parse(env.calls[0], mode="eval").body
        assert node.func.id == "cd" and ast.literal_eval(node.keywords[0].value) == payload
    finally:
        env.close()
    assert not target.exists()


def test_a_malicious_turn_through_the_driver(tmp_path):
    """The whole path: model text -> turn rule -> environment -> BFCL's executor -> checker."""
    from data.bfcl import load_multi_turn
    from gates.bfcl import advance_play, finish, start
    target = tmp_path / "pwned"
    payload = PAYLOAD.format(path=target)
    e = load_multi_turn("multi_turn_base")[0]
    p = start(e)
    schemas = schemas_of(p.conv.tools)
    assert "system" not in schemas and "__import__" not in schemas
    step = advance_play(p, format_call("system", {"command": f"touch {target}"}))
    assert step.finish == "parse_error" and not p.env.calls
    advance_play(p, format_call("mkdir", {"dir_name": payload}))  # runs, as a directory name
    advance_play(p, f"<tool_call>\n{payload}\n</tool_call>")       # not JSON: parse error
    r = finish(p)
    assert r.calls[1] == [[f"mkdir(dir_name={payload!r})"]]
    assert not target.exists()


def test_constants_match_bfcls_own():
    from bfcl_eval.constants.default_prompts import (
        DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC, MAXIMUM_STEP_LIMIT)
    from data.bfcl import ADDED_FUNCTIONS_PROMPT, STEP_LIMIT, version
    assert ADDED_FUNCTIONS_PROMPT == DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    assert STEP_LIMIT == MAXIMUM_STEP_LIMIT
    assert version() == "2026.3.23"  # the version pinned in .ci/setup
