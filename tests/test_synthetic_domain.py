"""The synthetic tool family: hundreds of seeded tools with every parameter type, deterministic
per seed, a small subset offered per task, oracles that verify through the real environment,
irrelevance tasks that expect no call, and the default preset that trains on it."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from data import tasks as taskgen
from data.chatformat import Call, parse, render
from data.environment import BACKUP, DomainEnvironment
from data.envs import BUILTIN, DOMAINS, SHIPPED, ToolError, problems
from data.envs.synthetic import DOMAIN, build, build_family
from data.verify import verify
from pipeline import config

KINDS = ("single", "parallel", "chained", "recovery", "irrelevance", "long_context")


def _types(schema: dict, out: Counter) -> None:
    """Count every parameter type in a schema, nested objects and array items included."""
    for spec in schema.get("properties", {}).values():
        out["enum" if "enum" in spec else spec["type"]] += 1
        if "default" in spec:
            out["with default"] += 1
        if spec["type"] == "object":
            _types(spec, out)
            out["object with required"] += bool(spec.get("required"))
        if spec["type"] == "array":
            out["array of " + spec["items"]["type"]] += 1


def test_hundreds_of_tools_with_every_parameter_type_and_naming_style():
    fam = build_family(0, 300)
    names = [s.name for s in fam.specs]
    assert len(names) == len(set(names)) == 300 and len(DOMAIN.tools) == 300
    assert not set(names) & {n for d in BUILTIN.values() for n in d.tool_names()}
    types, required, optional = Counter(), 0, 0
    for t in DOMAIN.tools:
        params = t["function"]["parameters"]
        _types(params, types)
        required += len(params["required"])
        optional += len(params["properties"]) - len(params["required"])
    for kind in ("string", "enum", "integer", "number", "boolean", "array", "object",
                 "array of string", "with default", "object with required"):
        assert types[kind] > 0, kind
    assert required > 300 and optional > 100
    styles = Counter("dotted" if "." in n else "camel" if re.search(r"[a-z][A-Z]", n)
                     else "snake" for n in names)
    assert set(styles) == {"dotted", "camel", "snake"} and min(styles.values()) > 20
    assert Counter(s.op for s in fam.specs).keys() == {
        "find", "get", "list", "count", "total", "create", "convert"}


def test_same_seed_same_tools_and_results_other_seed_other_tools():
    a, b, c = build(seed=3, n_tools=120), build(seed=3, n_tools=120), build(seed=4, n_tools=120)
    assert json.dumps(a.tools) == json.dumps(b.tools)
    assert len(set(a.tool_names()) & set(c.tool_names())) < 40
    fam = build_family(3, 120)
    get = next(s for s in fam.specs if s.op == "get")
    rid = get.resource.records[0].id
    assert a.call(get.name, {get.params["id"]: rid}) == b.call(get.name, {get.params["id"]: rid})
    made = [taskgen.make(k, 5, domains=["synthetic"]).model_dump() for k in KINDS]
    assert made == [taskgen.make(k, 5, domains=["synthetic"]).model_dump() for k in KINDS]
    assert len({t["prompt"] for t in made}) == len(KINDS)


def test_tools_check_arguments_and_name_the_right_value():
    fam = build_family(0, 300)
    get = next(s for s in fam.specs if s.op == "get" and s.params["unit"])
    create = next(s for s in fam.specs if s.op == "create")
    rid = get.resource.records[0].id
    idp = get.params["id"]
    # a declared default gives the same result as passing it
    default = get.decl["function"]["parameters"]["properties"]["unit"]["default"]
    assert get.run(**{idp: rid}) == get.run(**{idp: rid, "unit": default})
    cases = [(get.run, {idp: rid.lower()}, "not_found", f"did you mean {rid!r}"),
             (get.run, {idp: "NOPE-1"}, "not_found", "gives the id"),
             (get.run, {idp: rid, "unit": "furlong"}, "invalid_argument", "furlong"),
             (get.run, {idp: rid, "colour": "red"}, "invalid_argument", "unknown argument"),
             (get.run, {}, "invalid_argument", "required"),
             (create.run, {create.params["id"]: create.resource.records[0].id,
                           "date": "2026-02-03", "options": {"priority": "urgent"}},
              "invalid_argument", "options/priority"),
             (create.run, {create.params["id"]: create.resource.records[0].id,
                           "date": "3 Feb"}, "invalid_argument", "2026-05-14")]
    for run, args, code, text in cases:
        with pytest.raises(ToolError) as err:
            run(**args)
        assert err.value.code == code and text in err.value.message, (args, err.value)


def _replay(task) -> list[dict]:
    """The oracle's assistant turns played again in a fresh environment of the task."""
    env, out = DomainEnvironment.for_task(task), []
    for m in task.oracle:
        if m["role"] == "assistant":
            for call in parse(m["content"], task.tools).calls:
                out.append(env.execute(Call(call.name, call.arguments)).message(call))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_oracle_verifies_through_the_environment(kind):
    for i in range(8):
        task = taskgen.make(kind, i, domains=["synthetic"])
        assert task.domain == "synthetic" and task.kind == kind
        v = verify(task, task.messages() + task.oracle, require_plan=True)
        assert v.success and v.score == 1.0, (task.prompt, v.reasons)
        tool_msgs = [m for m in task.oracle if m["role"] == "tool"]
        assert _replay(task) == tool_msgs  # results are real and reproducible
        if kind == "recovery":
            assert [m["ok"] for m in tool_msgs] == [False, True]
        elif kind != "irrelevance":
            assert tool_msgs and all(m["ok"] for m in tool_msgs)


def test_irrelevance_expects_no_call_and_offers_no_tool_that_answers():
    fam = build_family(0, 300)
    names_of_family = {s.name for s in fam.specs}
    prompts = set()
    for i in range(40):
        task = taskgen.make("irrelevance", i, domains=["synthetic"])
        prompts.add(task.prompt)
        assert task.answer is None and task.gold_calls == [] and task.min_calls == 0
        assert "<tool_call>" not in task.oracle[0]["content"] and len(task.oracle) == 1
        for t in task.tools:  # the family's own offer; other domains' tools stand beside it
            if t["function"]["name"] not in names_of_family:
                continue
            spec = fam.spec(t["function"]["name"])
            if spec.attr:  # never the getter, count or total of the asked attribute
                assert f"the {spec.attr} of the {spec.resource.noun} " not in task.prompt
        # calling any offered tool is wrong, even with valid arguments
        name = task.tools[0]["function"]["name"]
        calling = [{"role": "assistant", "content": '<tool_call>\n{"name": "%s", "arguments": '
                                                    '{}}\n</tool_call>' % name},
                   {"role": "tool", "name": name, "content": "{}", "ok": True},
                   task.oracle[-1]]
        assert not verify(task, task.messages() + calling).success
    assert len(prompts) >= 35


def test_a_task_declares_a_small_subset_and_a_short_system_prompt(tokenizer):
    names = set(DOMAIN.tool_names())
    longest = 0
    for kind in ("single", "parallel", "chained", "recovery", "irrelevance"):
        for i in range(20):
            task = taskgen.make(kind, i, domains=["synthetic"])
            declared = [t["function"]["name"] for t in task.tools]
            # what the solution calls, near misses of the family, other domains' tools
            assert 1 <= len(declared) <= max(taskgen.OFFERED, 4) + 1, (kind, declared)
            assert {g.name for g in task.gold_calls} <= names
            shipped = names | {n for d in SHIPPED.values() for n in d.tool_names()}
            assert {n.removesuffix(BACKUP) for n in declared} <= shipped
            system = render([{"role": "system", "content": task.system}], task.tools)
            longest = max(longest, len(tokenizer(system)["input_ids"]))
    assert longest < 1100  # up to OFFERED tools of several domains (one built-in: 337-419)


def test_validate_domain_passes_and_kind_at_domain_pins_it():
    assert problems(DOMAIN) == [] and "synthetic" in SHIPPED and "synthetic" not in BUILTIN
    assert DOMAINS["synthetic"] is DOMAIN
    assert taskgen.validate_domain("synthetic") == []
    # pinned to one domain whatever the round's domains are
    assert taskgen.domain_cycle("irrelevance@synthetic", 3, ["weather"]) == ["synthetic"]
    pinned = taskgen.make("irrelevance@synthetic", 0)
    assert pinned.domain == "synthetic" and pinned.kind == "irrelevance"
    assert pinned.id == "train-default-irrelevance@synthetic-0"
    for bad in ("reasoning@synthetic", "single@", "dance"):
        with pytest.raises(ValueError):
            taskgen.parse_kind(bad)


def test_default_preset_trains_on_synthetic_and_keeps_built_in_counts():
    cfg = config.load()
    grounding = dict((n, rs) for _, n, rs in cfg.planned_rounds())["grounding"]
    assert {"synthetic", "formulas"} <= set(grounding.domains) and len(grounding.domains) == 8
    assert grounding.tasks["irrelevance@synthetic"] > grounding.tasks["irrelevance"]
    # cycled over every domain that makes the kind (the calculators make no chained tasks)
    for kind, n_domains, least in (("chained", 7, 11), ("recovery", 8, 7)):
        per = Counter(taskgen.domain_cycle(kind, i, grounding.domains)[0]
                      for i in range(grounding.tasks[kind]))
        assert len(per) == n_domains and min(per.values()) >= least
        assert max(per.values()) - min(per.values()) <= 1


def test_cli_shows_synthetic_tasks(capsys):
    from pipeline.cli import main
    assert main(["tasks", "--kind", "single", "--n", "3", "--domains", "synthetic"]) == 0
    out = capsys.readouterr().out
    assert out.count("synthetic/single") == 3
    assert main(["tasks", "--kind", "single", "--n", "1", "--domains", "nope"]) == 2
