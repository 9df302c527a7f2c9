"""A seeded family of tool APIs over deterministic tables: things (resources) with records,
and per thing a few operations (find, get an attribute, list, count, total, create), plus a
unit converter per quantity.

Every tool validates its arguments against its own declared JSON schema, fills in declared
defaults, and answers from tables that are pure functions of (seed, thing, record, attribute),
so the same call always gives the same result. An unknown name or id is a `not_found`
ToolError that names the right value when the mistake is only its case, which is what
recovery tasks replay.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..base import ToolError, schema_checked, stable_int, tool
from . import vocab

STYLES = ("snake", "camel", "noun_first", "dotted")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
N_RECORDS = 10


@dataclass
class Record:
    id: str
    name: str
    category: str
    active: bool
    values: dict[str, float]  # attribute -> value in the quantity's base unit


@dataclass
class Resource:
    """One thing an API family is about, with its table of records."""
    noun: str                 # "wind turbine"
    plural: str
    prefix: str               # record ids look like PREFIX-1234
    style: str                # naming convention of its tools and parameters
    cat_param: str            # category parameter name (a key of vocab.CATEGORIES)
    attrs: dict[str, str]     # attribute -> quantity (a key of vocab.QUANTITIES)
    records: list[Record] = field(default_factory=list)

    def by_id(self) -> dict[str, Record]:
        return {r.id: r for r in self.records}

    def by_name(self) -> dict[str, Record]:
        return {r.name: r for r in self.records}


@dataclass
class Spec:
    """One tool: its declaration, what it does, and the parameter name of each role."""
    name: str
    op: str                   # find | get | list | count | total | create | convert
    decl: dict
    run: Callable[..., Any]
    resource: Resource | None = None
    attr: str | None = None
    quantity: str | None = None
    obj: str | None = None    # what a create tool makes
    params: dict[str, str] = field(default_factory=dict)  # role -> parameter name


# ------------------------------------------------------------------------------ naming

def plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")


def _camel(words: list[str]) -> str:
    return words[0] + "".join(w.capitalize() for w in words[1:])


def param(style: str, *parts: str) -> str:
    """A parameter name in the resource's convention (camelCase or snake_case)."""
    words = [w for p in parts for w in p.split()]
    return _camel(words) if style == "camel" else "_".join(words)


def tool_name(style: str, verb: str, noun: str, tail: str = "") -> str:
    """`get_wind_turbine_height`, `getWindTurbineHeight`, `wind_turbine_get_height` or
    `wind_turbine.get_height`."""
    n, t = noun.split(), tail.split()
    if style == "camel":
        return _camel([verb] + n + t)
    if style == "noun_first":
        return "_".join(n + [verb] + t)
    if style == "dotted":
        return "_".join(n) + "." + "_".join([verb] + t)
    return "_".join([verb] + n + t)


def a_(word: str) -> str:
    """`a word` or `an word`."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _key(attr: str) -> str:
    return attr.replace(" ", "_")


# ------------------------------------------------------------------------------ values

def in_unit(quantity: str, base: float, unit: str) -> float:
    q = vocab.QUANTITIES[quantity]
    factor, offset = q["units"].get(unit, (1.0, 0.0))
    value = round(base * factor + offset, q["dp"])
    return int(value) if q["dp"] == 0 else value


def _base_value(seed: int, noun: str, rid: str, attr: str, quantity: str) -> float:
    lo, hi = vocab.QUANTITIES[quantity]["range"]
    value = lo + stable_int("synthetic", seed, noun, rid, attr, mod=(hi - lo) * 10) / 10
    return float(round(value)) if vocab.QUANTITIES[quantity]["dp"] == 0 else value


def _record(res: Resource, rid: str, finder: str | None) -> Record:
    table = res.by_id()
    if rid in table:
        return table[rid]
    if isinstance(rid, str) and rid.upper() in table:
        raise ToolError("not_found", f"no {res.noun} with id {rid!r}; ids are upper case: "
                                     f"did you mean {rid.upper()!r}?")
    hint = f" {finder} gives the id of a {res.noun} by name." if finder else ""
    raise ToolError("not_found", f"no {res.noun} with id {rid!r}.{hint}")


# ------------------------------------------------------------------------------ resources

def make_resource(rng: random.Random, seed: int, noun: str) -> Resource:
    words = noun.split()
    prefix = (words[0][:3] if len(words) == 1 else "".join(w[0] for w in words)).upper()
    quantities = rng.sample(sorted(vocab.QUANTITIES), rng.choice([1, 2, 2, 3]))
    attrs = {rng.choice(vocab.QUANTITIES[q]["attrs"]): q for q in quantities}
    res = Resource(noun, plural(noun), prefix, rng.choice(STYLES),
                   rng.choice(sorted(vocab.CATEGORIES)), attrs)
    cats = vocab.CATEGORIES[res.cat_param]
    names = rng.sample([f"{a} {b}" for a in vocab.FIRST for b in vocab.SECOND], N_RECORDS)
    ids = rng.sample(range(1000, 10000), N_RECORDS)
    for i, (name, num) in enumerate(zip(names, ids)):
        rid = f"{prefix}-{num}"
        res.records.append(Record(
            rid, name, cats[i % len(cats)] if i < len(cats) else rng.choice(cats),
            rng.random() < 0.75,
            {a: _base_value(seed, noun, rid, a, q) for a, q in attrs.items()}))
    return res


def _id_param(res: Resource) -> tuple[str, dict]:
    return param(res.style, res.noun, "id"), {
        "type": "string", "description": f"{res.noun.capitalize()} id ({res.prefix}-NNNN)"}


def _unit_param(quantity: str) -> dict | None:
    units = list(vocab.QUANTITIES[quantity]["units"])
    if not units:
        return None
    return {"type": "string", "enum": units, "default": units[0]}


def find_tool(res: Resource, verb: str, name_param: str) -> Spec:
    pname = param(res.style, name_param)
    cat = param(res.style, res.cat_param)
    label = res.cat_param.replace("_", " ")
    decl = tool(tool_name(res.style, verb, res.noun),
                f"Find {a_(res.noun)} by its exact name; returns its id, {label} and whether "
                "it is active.",
                {pname: {"type": "string", "description": f"exact {res.noun} name"}})

    def body(a):
        name = a[pname]
        table = res.by_name()
        if name in table:
            r = table[name]
            return {"id": r.id, "name": r.name, cat: r.category, "active": r.active}
        close = next((n for n in table if n.lower() == str(name).lower()), None)
        hint = f" Names are case-sensitive: did you mean {close!r}?" if close else ""
        raise ToolError("not_found", f"no {res.noun} named {name!r}.{hint}")
    return Spec(decl["function"]["name"], "find", decl, schema_checked(decl, body), res,
                params={"name": pname})


def get_tool(res: Resource, verb: str, attr: str, finder: str) -> Spec:
    q = res.attrs[attr]
    idp, idspec = _id_param(res)
    props = {idp: idspec}
    unit = _unit_param(q)
    if unit:
        props["unit"] = unit
    units = "/".join(vocab.QUANTITIES[q]["units"]) or ("percent" if q == "percent" else "count")
    decl = tool(tool_name(res.style, verb, res.noun, attr),
                f"The {attr} of {a_(res.noun)} by id ({units}).", props, [idp])

    def body(a):
        r = _record(res, a[idp], finder)
        u = a.get("unit", "")
        out = {"id": r.id, _key(attr): in_unit(q, r.values[attr], u)}
        return {**out, "unit": u} if u else out
    return Spec(decl["function"]["name"], "get", decl, schema_checked(decl, body), res, attr, q,
                params={"id": idp, "unit": "unit" if unit else ""})


def list_tool(res: Resource, verb: str) -> Spec:
    cat, lim, inc = (param(res.style, res.cat_param), param(res.style, "limit"),
                     param(res.style, "include inactive"))
    decl = tool(tool_name(res.style, verb, res.plural if res.style != "dotted" else res.noun),
                f"Names of the {res.plural} in {a_(res.cat_param.replace('_', ' '))}, "
                "alphabetical, and how many match.",
                {cat: {"type": "string", "enum": vocab.CATEGORIES[res.cat_param]},
                 lim: {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                 inc: {"type": "boolean", "default": False}}, [cat])

    def body(a):
        hits = sorted(r.name for r in res.records
                      if r.category == a[cat] and (r.active or a[inc]))
        return {"items": hits[:a[lim]], "total": len(hits)}
    return Spec(decl["function"]["name"], "list", decl, schema_checked(decl, body), res,
                params={"category": cat, "limit": lim, "include_inactive": inc})


def count_tool(res: Resource, verb: str, attr: str) -> Spec:
    q = res.attrs[attr]
    base = next(iter(vocab.QUANTITIES[q]["units"]), "")
    cat, low = param(res.style, res.cat_param), param(res.style, "min", attr)
    decl = tool(tool_name(res.style, verb, res.plural if res.style != "dotted" else res.noun,
                          f"by {attr}"),
                f"How many {res.plural} have at least a given {attr}.",
                {low: {"type": "number", "description": f"lowest {attr}"
                                                        + (f" in {base}" if base else "")},
                 cat: {"type": "string", "enum": vocab.CATEGORIES[res.cat_param],
                       "description": "default: all"}}, [low])

    def body(a):
        n = sum(r.values[attr] >= a[low] and a.get(cat, r.category) == r.category
                for r in res.records)
        return {"count": n}
    return Spec(decl["function"]["name"], "count", decl, schema_checked(decl, body), res, attr, q,
                params={"min": low, "category": cat})


def total_tool(res: Resource, verb: str, attr: str, finder: str) -> Spec:
    q = res.attrs[attr]
    ids = param(res.style, res.noun, "ids")
    props = {ids: {"type": "array", "items": {"type": "string"}, "minItems": 1,
                   "description": f"{res.noun} ids ({res.prefix}-NNNN)"}}
    unit = _unit_param(q)
    if unit:
        props["unit"] = unit
    decl = tool(tool_name(res.style, verb, res.noun, attr),
                f"The summed {attr} of several {res.plural}.", props, [ids])

    def body(a):
        if len(set(a[ids])) != len(a[ids]):
            raise ToolError("invalid_argument", f"{ids}: an id is repeated.")
        recs = [_record(res, rid, finder) for rid in a[ids]]
        u = a.get("unit", "")
        total = in_unit(q, sum(r.values[attr] for r in recs), u)
        return {"total": total, "unit": u} if u else {"total": total}
    return Spec(decl["function"]["name"], "total", decl, schema_checked(decl, body), res, attr, q,
                params={"ids": ids, "unit": "unit" if unit else ""})


def create_tool(res: Resource, verb: str, obj: str, finder: str, seed: int,
                nested_required: bool) -> Spec:
    idp, idspec = _id_param(res)
    date, opts, tags = "date", "options", "tags"
    prio, notify = "priority", "notify"
    options = {"type": "object",
               "properties": {prio: {"type": "string", "enum": ["low", "normal", "high"],
                                     "default": "normal"},
                              notify: {"type": "boolean", "default": False}}}
    if nested_required:
        options["required"] = [prio]
    decl = tool(tool_name(res.style, verb, res.noun, obj),
                f"{verb.capitalize()} {a_(obj)} for {a_(res.noun)} on a date; returns its ticket.",
                {idp: idspec, date: {"type": "string", "description": "YYYY-MM-DD"},
                 opts: options,
                 tags: {"type": "array", "items": {"type": "string"}, "default": []}},
                [idp, date])
    pfx = vocab.OBJECTS[obj]

    def body(a):
        r = _record(res, a[idp], finder)
        if not DATE.match(a[date]):
            raise ToolError("invalid_argument", f"date {a[date]!r} must look like 2026-05-14.")
        o = a.get(opts) or {}
        key = (r.id, a[date], o.get(prio, "normal"), bool(o.get(notify, False)),
               sorted(a[tags]))
        num = stable_int("ticket", seed, res.noun, obj, *key, mod=90000) + 10000
        return {"ticket": f"{pfx}-{num}", "status": "scheduled", "date": a[date]}
    return Spec(decl["function"]["name"], "create", decl, schema_checked(decl, body), res, obj=obj,
                params={"id": idp, "date": date, "options": opts, "tags": tags,
                        "priority": prio, "notify": notify})


def convert_tool(quantity: str, style: str) -> Spec:
    units = list(vocab.QUANTITIES[quantity]["units"])
    value, src, dst = (param(style, "value"), param(style, "from unit"),
                       param(style, "to unit"))
    decl = tool(tool_name(style, "convert", quantity),
                f"Convert {a_(quantity)} value between {' and '.join(units)}.",
                {value: {"type": "number"}, src: {"type": "string", "enum": units},
                 dst: {"type": "string", "enum": units}})
    q = vocab.QUANTITIES[quantity]

    def body(a):
        f1, o1 = q["units"][a[src]]
        f2, o2 = q["units"][a[dst]]
        return {"value": round((a[value] - o1) / f1 * f2 + o2, 2), "unit": a[dst]}
    return Spec(decl["function"]["name"], "convert", decl, schema_checked(decl, body),
                quantity=quantity, params={"value": value, "from": src, "to": dst})


# ------------------------------------------------------------------------------ family

def resource_tools(rng: random.Random, res: Resource, seed: int) -> list[Spec]:
    """A resource's operations: find and one getter per attribute always; list, count,
    total and create by chance."""
    verb = {op: rng.choice(vs) for op, vs in vocab.VERBS.items()}
    find = find_tool(res, verb["find"], rng.choice(["name", "query", f"{res.noun} name"]))
    specs = [find] + [get_tool(res, verb["get"], a, find.name) for a in res.attrs]
    if rng.random() < 0.6:
        specs.append(list_tool(res, verb["list"]))
    summable = [a for a, q in res.attrs.items() if q != "temperature"]
    if rng.random() < 0.35:
        specs.append(count_tool(res, verb["count"], rng.choice(list(res.attrs))))
    if summable and rng.random() < 0.35:
        specs.append(total_tool(res, verb["total"], rng.choice(summable), find.name))
    if rng.random() < 0.6:
        specs.append(create_tool(res, verb["create"], rng.choice(sorted(vocab.OBJECTS)),
                                 find.name, seed, rng.random() < 0.5))
    return specs


@dataclass
class Family:
    seed: int
    resources: list[Resource]
    specs: list[Spec]

    def spec(self, name: str) -> Spec:
        return self._by_name[name]

    def __post_init__(self):
        self._by_name = {s.name: s for s in self.specs}

    def of(self, res: Resource, op: str | None = None) -> list[Spec]:
        return [s for s in self.specs if s.resource is res and (op is None or s.op == op)]


def build_family(seed: int, n_tools: int) -> Family:
    """`n_tools` tools from `seed`: one converter per quantity with units, then resources
    (drawn from the vocabulary without repeats) until the count is reached; the last
    resource keeps its find and getters first."""
    if n_tools < 12:
        raise ValueError(f"n_tools={n_tools}: the synthetic family needs at least 12 tools")
    rng = random.Random(seed)
    style = rng.choice(STYLES)
    specs = [convert_tool(q, style) for q in sorted(vocab.QUANTITIES)
             if len(vocab.QUANTITIES[q]["units"]) > 1]
    nouns = rng.sample(vocab.NOUNS, len(vocab.NOUNS))
    resources = []
    for noun in nouns:
        if len(specs) >= n_tools:
            break
        res = make_resource(rng, seed, noun)
        resources.append(res)
        specs += resource_tools(rng, res, seed)[:n_tools - len(specs)]
    if len(specs) < n_tools:
        raise ValueError(f"n_tools={n_tools}: the vocabulary gives only {len(specs)} tools")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):  # never expected: nouns, attributes and quantities differ
        raise RuntimeError("synthetic tool names repeat")
    return Family(seed, resources, specs)
