"""Task makers over a synthetic family: every prompt carries the values a call needs (ids,
names, units as words, dates, options), and every task offers only the tools it needs plus a
few others of the family, sibling tools of the same thing among them, so the model has to read
the schemas to pick.

Irrelevance examples are of two sorts: a question no tool is needed for (general knowledge,
small arithmetic, word puzzles), and a request about a thing of the family that none of the
offered tools can serve (its getter is left out, or the action exists nowhere).
"""
from __future__ import annotations

import random
from typing import Callable

from ..base import Example, fmt_num
from . import vocab
from .family import Family, Record, Spec, a_

EXTRA_TOOLS = (1, 2)   # tools offered beside the relevant ones
MAX_TOOLS = 4


def _unit_word(unit: str) -> str:
    return vocab.UNIT_WORDS.get(unit, unit)


def _value(v) -> str:
    return fmt_num(v) if isinstance(v, float) else str(v)


def offer(rng: random.Random, fam: Family, relevant: list[Spec], exclude=()) -> list[dict]:
    """The task's tools: `relevant`, one or two siblings (same thing, other operations), and
    tools of other things, shuffled; never more than MAX_TOOLS, never one of `exclude`."""
    skip = {s.name for s in relevant} | {s.name for s in exclude}
    n = min(MAX_TOOLS - len(relevant), rng.randint(*EXTRA_TOOLS))
    things = {s.resource.noun for s in relevant if s.resource}
    siblings = [s for s in fam.specs if s.resource and s.resource.noun in things
                and s.name not in skip]
    others = [s for s in fam.specs if s.name not in skip and s not in siblings]
    picked = rng.sample(siblings, min(len(siblings), rng.randint(0, 2), n))
    picked += rng.sample(others, n - len(picked))
    tools = [s.decl for s in relevant + picked]
    rng.shuffle(tools)
    return tools


def _date(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _unit(rng: random.Random, spec: Spec) -> str:
    return rng.choice(list(vocab.QUANTITIES[spec.quantity]["units"]) or [""])


def _in(unit: str) -> str:
    return f" in {_unit_word(unit)}" if unit else ""


def _get_args(spec: Spec, rec: Record, unit: str) -> dict:
    return {spec.params["id"]: rec.id, **({"unit": unit} if unit else {})}


# --------------------------------------------------------------------------- single calls

def _single_get(rng, fam, spec):
    rec, unit = rng.choice(spec.resource.records), _unit(rng, spec)
    v = spec.run(**_get_args(spec, rec, unit))[spec.attr.replace(" ", "_")]
    return Example(f"What is the {spec.attr} of {spec.resource.noun} {rec.id}{_in(unit)}?", v,
                   [[(spec.name, _get_args(spec, rec, unit))]],
                   f"The {spec.attr} of {spec.resource.noun} {rec.id} is {_value(v)}"
                   f"{' ' + _unit_word(unit) if unit else ''}.",
                   f"{spec.name} gives the {spec.attr} of {a_(spec.resource.noun)} by id.",
                   (spec.name, spec.params["id"], rec.id.lower(), rec.id))


def _single_find(rng, fam, spec):
    res = spec.resource
    rec = rng.choice(res.records)
    label = res.cat_param.replace("_", " ")
    args = {spec.params["name"]: rec.name}
    return Example(f"Which {label} is the {res.noun} named '{rec.name}' in?", rec.category,
                   [[(spec.name, args)]],
                   f"The {res.noun} '{rec.name}' is in the {rec.category} {label}.",
                   f"Look up the {res.noun} named '{rec.name}' with {spec.name}.",
                   (spec.name, spec.params["name"], rec.name.lower(), rec.name))


def _list_args(rng, spec) -> tuple[dict, str, int, bool]:
    res, p = spec.resource, spec.params
    cat = rng.choice(sorted({r.category for r in res.records if r.active}))
    limit, inc = rng.randint(1, 8), rng.random() < 0.5
    return {p["category"]: cat, p["limit"]: limit, p["include_inactive"]: inc}, cat, limit, inc


def _single_list(rng, fam, spec):
    res = spec.resource
    args, cat, limit, inc = _list_args(rng, spec)
    label = res.cat_param.replace("_", " ")
    which = "including inactive ones" if inc else "active ones only"
    out = spec.run(**args)
    if rng.random() < 0.5:
        return Example(f"List up to {limit} {res.plural} in the {cat} {label} ({which}). "
                       "Which one comes first alphabetically?", out["items"][0],
                       [[(spec.name, args)]], f"The first one is {out['items'][0]}.",
                       f"{spec.name} lists {res.plural} by {label}.")
    return Example(f"How many {res.plural} are there in the {cat} {label}, {which}? Ask for at "
                   f"most {limit} names.", out["total"], [[(spec.name, args)]],
                   f"There are {out['total']} {res.plural} in the {cat} {label}.",
                   f"{spec.name} counts the matching {res.plural}.")


def _single_count(rng, fam, spec):
    res, q = spec.resource, spec.quantity
    base = next(iter(vocab.QUANTITIES[q]["units"]), "")
    rec = rng.choice(res.records)  # the threshold sits just below one record's value
    low = rec.values[spec.attr]
    low = int(low) if vocab.QUANTITIES[q]["dp"] == 0 else round(low - rng.random() * 5, 1)
    args = {spec.params["min"]: low}
    scope = ""
    if rng.random() < 0.5:
        args[spec.params["category"]] = rec.category
        scope = f" in the {rec.category} {res.cat_param.replace('_', ' ')}"
    n = spec.run(**args)["count"]
    return Example(f"How many {res.plural}{scope} have {a_(spec.attr)} of at least "
                   f"{_value(low)}{' ' + _unit_word(base) if base else ''}?", n,
                   [[(spec.name, args)]], f"{n} {res.plural} match.",
                   f"{spec.name} counts {res.plural} by {spec.attr}.")


def _single_total(rng, fam, spec):
    res = spec.resource
    recs = rng.sample(res.records, rng.randint(2, 3))
    unit = _unit(rng, spec)
    ids = [r.id for r in recs]
    args = {spec.params["ids"]: ids, **({"unit": unit} if unit else {})}
    total = spec.run(**args)["total"]
    return Example(f"What is the combined {spec.attr} of the {res.plural} "
                   f"{', '.join(ids[:-1])} and {ids[-1]}{_in(unit)}?", total,
                   [[(spec.name, args)]],
                   f"Together they have {a_(spec.attr)} of {_value(total)}"
                   f"{' ' + _unit_word(unit) if unit else ''}.",
                   f"{spec.name} sums the {spec.attr} over several ids at once.")


def _create_request(rng, spec: Spec, rec_text: str) -> tuple[str, dict]:
    """The request's wording and its arguments (without the id)."""
    p = spec.params
    date, prio, notify = _date(rng), rng.choice(["low", "normal", "high"]), rng.random() < 0.4
    tags = rng.sample(vocab.TAGS, rng.randint(0, 2))
    args = {p["date"]: date}
    if prio != "normal" or notify or rng.random() < 0.3:
        args[p["options"]] = {p["priority"]: prio, **({p["notify"]: True} if notify else {})}
    if tags:
        args[p["tags"]] = tags
    words = [f"{a_(prio)}-priority {spec.obj} for {rec_text} on {date}"]
    if tags:
        words.append(f"tagged {' and '.join(repr(t) for t in tags)}")
    if notify:
        words.append("and notify me")
    return ", ".join(words), args


def _single_create(rng, fam, spec):
    rec = rng.choice(spec.resource.records)
    text, args = _create_request(rng, spec, f"{spec.resource.noun} {rec.id}")
    args = {spec.params["id"]: rec.id, **args}
    ticket = spec.run(**args)["ticket"]
    return Example(f"Please set up {text}. What is the ticket number?", ticket,
                   [[(spec.name, args)]], f"Done: the ticket is {ticket}.",
                   f"{spec.name} creates the {spec.obj}; options and tags as asked.",
                   (spec.name, spec.params["id"], rec.id.lower(), rec.id))


def _single_convert(rng, fam, spec):
    units = list(vocab.QUANTITIES[spec.quantity]["units"])
    src, dst = rng.sample(units, 2)
    value = round(rng.uniform(1, 500), rng.choice([0, 1, 2]))
    value = int(value) if value == int(value) else value
    p = spec.params
    args = {p["value"]: value, p["from"]: src, p["to"]: dst}
    out = spec.run(**args)["value"]
    return Example(f"Convert {_value(value)} {_unit_word(src)} to {_unit_word(dst)}.", out,
                   [[(spec.name, args)]],
                   f"{_value(value)} {_unit_word(src)} is {_value(out)} {_unit_word(dst)}.",
                   f"{spec.name} converts {spec.quantity} units.")


SINGLE: dict[str, Callable] = {"get": _single_get, "find": _single_find, "list": _single_list,
                               "count": _single_count, "total": _single_total,
                               "create": _single_create, "convert": _single_convert}
SINGLE_WEIGHTS = {"get": 3, "find": 1, "list": 2, "count": 1, "total": 1, "create": 2,
                  "convert": 1}


def single(fam: Family, rng: random.Random) -> Example:
    ops = sorted(SINGLE_WEIGHTS)
    op = rng.choices(ops, weights=[SINGLE_WEIGHTS[o] for o in ops])[0]
    spec = rng.choice([s for s in fam.specs if s.op == op])
    ex = SINGLE[op](rng, fam, spec)
    ex.tools = offer(rng, fam, [spec])
    return ex


# --------------------------------------------------------------------------- several calls

def parallel(fam: Family, rng: random.Random) -> Example:
    """The same getter on two records in one turn; their sum or difference."""
    spec = rng.choice([s for s in fam.specs if s.op == "get"])
    res, unit = spec.resource, _unit(rng, spec)
    a, b = rng.sample(res.records, 2)
    key = spec.attr.replace(" ", "_")
    va = spec.run(**_get_args(spec, a, unit))[key]
    vb = spec.run(**_get_args(spec, b, unit))[key]
    dp = vocab.QUANTITIES[spec.quantity]["dp"]
    u = f" {_unit_word(unit)}" if unit else ""
    if rng.random() < 0.5:
        ans, how = round(va + vb, dp), "sum"
        prompt = f"What is the combined {spec.attr} of {res.plural} {a.id} and {b.id}{_in(unit)}?"
    else:
        ans, how = round(abs(va - vb), dp), "difference"
        prompt = (f"How far apart are {res.plural} {a.id} and {b.id} in {spec.attr}"
                  f"{_in(unit)}?")
    ans = int(ans) if dp == 0 else ans
    return Example(prompt, ans,
                   [[(spec.name, _get_args(spec, a, unit)), (spec.name, _get_args(spec, b, unit))]],
                   f"{a.id} has {_value(va)}{u} and {b.id} has {_value(vb)}{u}; the {how} is "
                   f"{_value(ans)}{u}.",
                   f"Call {spec.name} for both ids at once, then take the {how}.",
                   tools=offer(rng, fam, [spec]))


def chained(fam: Family, rng: random.Random) -> Example:
    """find by name -> get by id; find -> create; or list -> find -> get."""
    res = rng.choice([r for r in fam.resources if fam.of(r, "get")])
    find, get = fam.of(res, "find")[0], rng.choice(fam.of(res, "get"))
    forms = ["get", "get"] + (["create"] if fam.of(res, "create") else []) + \
            (["list"] if fam.of(res, "list") else [])
    form = rng.choice(forms)
    rec = rng.choice(res.records)
    find_args = {find.params["name"]: rec.name}
    unit = _unit(rng, get)
    key = get.attr.replace(" ", "_")
    u = f" {_unit_word(unit)}" if unit else ""
    if form == "create":
        make = fam.of(res, "create")[0]
        text, args = _create_request(rng, make, f"the {res.noun} named '{rec.name}'")
        args = {make.params["id"]: rec.id, **args}
        ticket = make.run(**args)["ticket"]
        return Example(f"Please set up {text}. What is the ticket number?", ticket,
                       [[(find.name, find_args)], [(make.name, args)]],
                       f"Done: the ticket for {rec.name} ({rec.id}) is {ticket}.",
                       f"Find the id of '{rec.name}' with {find.name}, then {make.name}.",
                       tools=offer(rng, fam, [find, make]))
    v = get.run(**_get_args(get, rec, unit))[key]
    if form == "list":
        lister = fam.of(res, "list")[0]
        p = lister.params
        first = sorted(r.name for r in res.records if r.category == rec.category and r.active)
        if first:  # the first active record of rec's category, alphabetically
            rec = res.by_name()[first[0]]
            v = get.run(**_get_args(get, rec, unit))[key]
            label = res.cat_param.replace("_", " ")
            largs = {p["category"]: rec.category, p["limit"]: 1}
            return Example(
                f"Take the alphabetically first active {res.noun} in the {rec.category} {label}. "
                f"What is its {get.attr}{_in(unit)}?", v,
                [[(lister.name, largs)], [(find.name, {find.params["name"]: rec.name})],
                 [(get.name, _get_args(get, rec, unit))]],
                f"The first one is {rec.name} ({rec.id}); its {get.attr} is {_value(v)}{u}.",
                f"List the {rec.category} {res.plural}, find the first one's id, then get its "
                f"{get.attr}.", tools=offer(rng, fam, [lister, find, get]))
    return Example(f"What is the {get.attr} of the {res.noun} named '{rec.name}'{_in(unit)}?", v,
                   [[(find.name, find_args)], [(get.name, _get_args(get, rec, unit))]],
                   f"{rec.name} is {rec.id}; its {get.attr} is {_value(v)}{u}.",
                   f"Find the id of '{rec.name}' with {find.name}, then {get.name}.",
                   tools=offer(rng, fam, [find, get]))


# --------------------------------------------------------------------------- no call

def _off_topic(rng: random.Random) -> tuple[str, str]:
    form = rng.randrange(4)
    if form == 0:
        return rng.choice(vocab.OFF_TOPIC)
    if form == 1:
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        if rng.random() < 0.5:
            return f"What is {a} times {b}?", f"{a} times {b} is {a * b}."
        return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    w = rng.choice(vocab.WORDS)
    if form == 2:
        return f"Spell the word '{w}' backwards.", f"'{w}' backwards is '{w[::-1]}'."
    words = rng.sample(vocab.WORDS, 3)
    return (f"Sort these words alphabetically: {', '.join(words)}.",
            f"In alphabetical order: {', '.join(sorted(words))}.")


def irrelevance(fam: Family, rng: random.Random) -> Example:
    """No call is right: an off-topic question, an attribute none of the offered tools
    gives, or an action no tool of the family performs."""
    form = rng.randrange(3)
    if form == 0:
        prompt, final = _off_topic(rng)
        return Example(prompt, None, [], final,
                       "This needs no tool; none of the offered tools is about it.",
                       tools=offer(rng, fam, rng.sample(fam.specs, 1)))
    res = rng.choice([r for r in fam.resources if fam.of(r, "get")])
    rec = rng.choice(res.records)
    if form == 1:  # the getter exists in the family but is not offered
        get = rng.choice(fam.of(res, "get"))
        answerers = [s for s in fam.of(res) if s.attr == get.attr]
        others = [s for s in fam.of(res) if s.attr != get.attr] or \
            [s for s in fam.specs if s.resource is not res][:1]
        tools = offer(rng, fam, rng.sample(others, 1), exclude=answerers)
        return Example(f"What is the {get.attr} of the {res.noun} {rec.id}?", None, [],
                       f"None of the available tools gives the {get.attr} of {a_(res.noun)}, "
                       "so I cannot look it up with them.",
                       f"The tools offered do not report the {get.attr} of {a_(res.noun)}; "
                       "I answer without calling.", tools=tools)
    template, what = rng.choice(vocab.UNSUPPORTED)
    prompt = template.format(noun=res.noun, id=rec.id, person=rng.choice(vocab.PEOPLE),
                             new=f"{rng.choice(vocab.FIRST)} {rng.choice(vocab.SECOND)}")
    what = what.format(noun=res.noun)
    return Example(prompt, None, [],
                   f"None of the available tools can {what}, so I cannot do that here.",
                   f"No offered tool can {what}; I answer without calling.",
                   tools=offer(rng, fam, rng.sample(fam.of(res), 1)))


def makers(fam: Family) -> dict[str, Callable[[random.Random], Example]]:
    return {"single": lambda rng: single(fam, rng), "parallel": lambda rng: parallel(fam, rng),
            "chained": lambda rng: chained(fam, rng),
            "irrelevance": lambda rng: irrelevance(fam, rng)}
