"""The environment protocol's built-in kind: typed results, dispatch through the declared
tools only, injected faults, and a verifier that reads the result's status, not its text."""
from __future__ import annotations

import json

from data import verify
from data.chatformat import Call, format_call
from data.environment import DomainEnvironment, ToolResult
from data.envs import DOMAINS
from data.envs.base import tool
from data.envs.weather import get_weather
from data.tasks import make


def test_success_and_error_are_typed_results():
    env = DomainEnvironment(DOMAINS["weather"].tools)
    ok = env.execute(Call("get_weather", {"city": "Paris"}))
    assert ok.ok and ok.value == get_weather("Paris") and ok.error is None
    assert json.loads(ok.content()) == get_weather("Paris")
    bad = env.execute(Call("get_weather", {"city": "Atlantis"}))
    assert not bad.ok and bad.error.code == "not_found"
    assert json.loads(bad.content()) == {"error": {"code": "not_found",
                                                   "message": "city 'Atlantis' not found."}}
    wrong_args = env.execute(Call("get_weather", {"town": "Paris"}))
    assert wrong_args.error.code == "invalid_argument"
    assert env.state()["calls"] == [
        {"name": "get_weather", "arguments": {"city": "Paris"}, "ok": True},
        {"name": "get_weather", "arguments": {"city": "Atlantis"}, "ok": False},
        {"name": "get_weather", "arguments": {"town": "Paris"}, "ok": False}]


def test_only_declared_and_implemented_tools_run():
    decoy = tool("lookup_record_0", "Look up archive record set 0.", {"record_id": {"type": "string"}})
    env = DomainEnvironment(DOMAINS["weather"].tools + [decoy])
    # declared in the conversation, but no domain implements it: an error, never a fake success
    assert env.execute(Call("lookup_record_0", {"record_id": "x"})).error.code == "not_found"
    # implemented by a built-in domain, but not declared here
    assert env.execute(Call("convert_currency", {})).error.code == "not_found"


def test_the_task_domain_is_dispatched_first():
    calls = []

    def shadow(city: str, unit: str = "C") -> dict:
        calls.append(city)
        return {"shadowed": city}

    from data.envs.base import Domain
    mine = Domain("mine", [DOMAINS["weather"].tools[0]], {"get_weather": shadow})
    task = make("single", 0, domains=["weather"]).model_copy(update={"domain": "mine"})
    env = DomainEnvironment.for_task(task, {"mine": mine, **DOMAINS})
    assert env.execute(Call("get_weather", {"city": "Oslo"})).value == {"shadowed": "Oslo"}


def test_injected_timeout_and_backup():
    task = next(t for t in (make("recovery", i) for i in range(60))
                if t.faults.get("mode") == "timeout")
    env = DomainEnvironment.for_task(task)
    args = task.gold_calls[0].arguments
    first = env.execute(Call(task.faults["tool"], args))
    assert first.error.code == "timeout" and "_backup" in first.error.message
    assert env.execute(Call(task.faults["tool"] + "_backup", args)).ok


def test_verifier_reads_the_status_not_the_text():
    task = make("single", 3)
    g = task.gold_calls[0]
    call = Call(g.name, g.arguments)
    result = DomainEnvironment.for_task(task).execute(call)
    final = task.oracle[-1]["content"]

    def convo(tool_msg):
        return task.messages() + [{"role": "assistant", "content": format_call(g.name, g.arguments)},
                                  tool_msg, {"role": "assistant", "content": final}]

    assert verify.verify(task, convo(result.message(call))).success
    # a failed call whose text looks harmless still counts as failed ...
    failed = {**result.message(call), "ok": False}
    v = verify.verify(task, convo(failed))
    assert not v.success and f"0 successful calls, the task needs {task.min_calls}" in v.reasons
    # ... and a result that merely starts like an error is a success when the tool says so
    lookalike = ToolResult(value='{"error_rate": 0.1}').message(call)
    assert lookalike["ok"] and verify.replay(convo(lookalike), task.tools).calls[0][1]
