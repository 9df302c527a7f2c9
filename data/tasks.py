"""Seeded task generators for every kind, each with an oracle demonstration.

`make(kind, index, split=..., namespace=...)` is a pure function: the same arguments give
the same task. Training and canary items draw from disjoint seed namespaces (`split`), and
the decontamination filter checks the prompts as well.
"""
from __future__ import annotations

import copy
import functools
import random
from typing import Iterable

from .chatformat import Call, format_call
from .environment import BACKUP, DomainEnvironment, filler
from .envs import BUILTIN, DOMAINS, NOT_DISTRACTORS, SHIPPED, resolve
from .envs.base import Example, stable_int, tool
from .kinds import KINDS, Draw, TaskKind, canary_kinds, register
from .kinds import get as get_kind
from .trajectory import GoldCall, Task
SYSTEM = ("You are a helpful assistant with access to tools. Think briefly inside <think></think>, "
          "call tools when they help, read their results, and finish with a short final answer.")

IRRELEVANT = [
    ("Write a two-line poem about {x}.", ["the sea", "autumn", "a cat", "mountains", "rain"]),
    ("Tell me a fun fact about {x}.", ["octopuses", "honey", "the moon", "owls", "volcanoes"]),
    ("Suggest a name for a {x}.", ["bakery", "puppy", "sailing boat", "chess club", "band"]),
    ("In one sentence, what is {x}?", ["photosynthesis", "gravity", "a haiku", "democracy"]),
]
IRRELEVANT_ANSWERS = {
    "Write": "Here is a short poem:\nSoft light on {x} at the close of day,\nquiet and slow, it drifts away.",
    "Tell": "A fun fact about {x}: they have surprised scientists for a very long time.",
    "Suggest": "How about \"Blue Harbor\" for your {x}?",
    "In": "{X} is a basic idea that explains how something in the world works.",
}


# How many tools a task offers at most (a round's `offered_tools`): the tools its solution needs,
# then near misses of its own domain and distractors of other domains up to a count drawn in
# [needed, OFFERED]. Users offer many tools at once; a task that offers only what fits teaches
# "an unfamiliar tool in the list means no call".
OFFERED = 6
SOLO = 0.25               # share of offers holding only what the solution needs (one tool for
                          # a single call, as in BFCL's simple items), for call and no-call alike
MANY_TOOLS = (6, 12)      # the many_tools canary's range: several domains' tools at once
MANY_TOOLS_NONE = 3       # every third many_tools item offers no fitting tool


def parse_kind(spec: str) -> tuple[str, str | None]:
    """`kind`, or `kind@domain`: tasks of that kind drawn from that one domain only (a
    round's `tasks: {irrelevance@synthetic: 24}`). Raises ValueError naming the choices."""
    kind, at, domain = spec.partition("@")
    pinnable = [k.name for k in KINDS.values() if k.pinnable]
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; choose from {', '.join(KINDS)} "
                         f"(or kind@domain for {', '.join(pinnable)})")
    if at and (not domain or kind not in pinnable):
        raise ValueError(f"{spec!r}: kind@domain needs a domain name and one of "
                         f"{', '.join(pinnable)}")
    return kind, domain or None


def seed_for(split: str, namespace: str, kind: str, index: int) -> int:
    """Seeds derive from (split, namespace, kind, index): canaries never share train seeds."""
    return stable_int(split, namespace, kind, index, mod=2**31 - 1)


def _assistant(plan: str, calls: list[tuple[str, dict]]) -> dict:
    text = f"<think>\n{plan}\n</think>\n" if plan else ""
    text += "\n".join(format_call(n, a) for n, a in calls)
    return {"role": "assistant", "content": text}


def _oracle(task: Task, turns: list[list[tuple[str, dict]]], plan: str, final: str) -> list[dict]:
    """Play the planned calls against the task's environment; results are real. A task
    with no call (irrelevance, reasoning) answers in one turn that thinks first too: every
    first turn opens with the same <think>, so "no call" is decided inside the plan rather
    than by skipping it (answering without a think invites answering without a call)."""
    if not turns:
        return [{"role": "assistant",
                 "content": (f"<think>\n{plan}\n</think>\n" if plan else "") + final}]
    env, out = DomainEnvironment.for_task(task), []
    for i, calls in enumerate(turns):
        out.append(_assistant(plan if i == 0 else "", calls))
        for name, args in calls:
            call = Call(name, args)
            out.append(env.execute(call).message(call))
    out.append({"role": "assistant", "content": final})
    return out


def supports(domain: str, kind: str) -> bool:
    """Whether `domain` can make tasks of `kind`."""
    need = get_kind(kind).needs
    return not need or any(k in DOMAINS[domain].makers for k in need)


def makers_for(kind: str, domains: Iterable[str]) -> list[str]:
    """The domains among `domains` that can make `kind`, sorted."""
    return sorted(d for d in domains if supports(d, kind))


def offered(dname: str, ex: Example) -> list[dict]:
    """The tools a task declares: the example's own pick, else all of its domain's."""
    return list(ex.tools) if ex.tools is not None else list(DOMAINS[dname].tools)


@functools.lru_cache(maxsize=64)
def _distractor_pool(exclude: frozenset[str]) -> dict[str, tuple[dict, ...]]:
    """Shipped domains other than `exclude`, name -> tools that may stand beside another
    domain's request without serving it (the synthetic family's unit converters could convert
    currency or units, so they never do; NOT_DISTRACTORS never stand in). Cached: every task
    draws from it; read-only."""
    return {n: tuple(t for t in d.tools if n != "synthetic"
                     or "convert" not in t["function"]["name"].lower())
            for n, d in SHIPPED.items() if n not in exclude and n not in NOT_DISTRACTORS}


def mix(rng: random.Random, needed: list[dict], near: list[dict], size: int,
        exclude: set[str], least: int = 0) -> list[dict]:
    """A shuffled offered tool set: `needed`, some of the same-domain `near` misses, and tools
    of other shipped domains (not in `exclude`) up to a count drawn in [max(len(kept), least),
    size]; for a SOLO share of offers (when `least` <= 1) only `needed`, or one stranger when
    nothing is needed, so the count says nothing of whether to call. Names never repeat, so a
    call always dispatches to the tool the model read."""
    tools = list(needed)
    names = {t["function"]["name"] for t in tools}
    near = [t for t in near if t["function"]["name"] not in names]
    if least <= 1 and rng.random() < SOLO:
        near, size, least = [], max(len(tools), 1), 1
    keep = near if rng.random() < 0.5 else rng.sample(near, rng.randint(0, len(near)))
    tools += keep
    names |= {t["function"]["name"] for t in keep}
    low = max(len(tools), least)
    want = rng.randint(low, max(low, size))
    pool = _distractor_pool(frozenset(exclude))
    sources = sorted(pool)
    for _ in range(8 * max(0, want - len(tools))):
        if len(tools) >= want or not sources:
            break
        t = rng.choice(pool[rng.choice(sources)])
        if t["function"]["name"] not in names:
            tools.append(t)
            names.add(t["function"]["name"])
    rng.shuffle(tools)
    return tools


def _mixed(rng: random.Random, dname: str, ex: Example, size: int,
           extra: list[dict] = ()) -> list[dict]:
    """The offered tools of a call task from `dname`: what its steps call (plus `extra`, such
    as a backup endpoint), the rest of its own offer as near misses, other domains' tools."""
    own = offered(dname, ex) + list(extra)
    used = {n for turn in ex.steps for n, _ in turn} | {t["function"]["name"] for t in extra}
    needed = [t for t in own if t["function"]["name"] in used]
    return mix(rng, needed, [t for t in own if t not in needed], size, {dname})


def _domain_example(kind: str, rng: random.Random, domains: list[str]) -> tuple[str, Example]:
    able = makers_for(kind, domains)
    if not able:
        raise ValueError(f"none of the domains {domains} makes {kind!r} tasks")
    name = rng.choice(able)
    return name, DOMAINS[name].makers[kind](rng)


def _task(id_, domain, kind, seed, ex: Example, tools, **kw) -> Task:
    first = ex.steps[0] if ex.steps else []
    return Task(id=id_, domain=domain, kind=kind, seed=seed, system=SYSTEM, prompt=ex.prompt,
                tools=tools, answer=ex.answer,
                gold_calls=[GoldCall(name=n, arguments=a) for n, a in first],
                min_calls=sum(len(t) for t in ex.steps), max_turns=len(ex.steps) + 3, **kw)


def task_from(d: Draw, domain: str, category: str, ex: Example,
              tools: list[dict] | None = None) -> tuple[Task, Example]:
    """For a user kind's builder: the task of `ex` (an example of `domain`) recorded under
    `category` (a task category such as "chained"), offering `tools` (default: a mix like the
    built-in call tasks'). `make` attaches the oracle."""
    if tools is None:
        tools = _mixed(d.rng, domain, ex, d.offered_tools)
    return _task(d.id, domain, category, d.seed, ex, tools), ex


def _calls(kind: str):
    """The builder of a kind whose tasks are one domain's example of that kind."""
    def build(d: Draw) -> tuple[Task, Example]:
        dname, ex = _domain_example(kind, d.rng, d.domains)
        return _task(d.id, dname, kind, d.seed, ex, _mixed(d.rng, dname, ex, d.offered_tools)), ex
    return build


def _recovery(d: Draw) -> tuple[Task, Example]:
    """A single call that fails first (an alias the domain rejects, or a transient fault with
    a backup endpoint) and succeeds on the retry the error points to."""
    id_, seed, rng, domains, size = d.id, d.seed, d.rng, d.domains, d.offered_tools
    for _ in range(50):  # find a domain example that supports an alias fault, or use a transient
        dname, ex = _domain_example("single", rng, domains)
        if ex.fault_arg and rng.random() < 0.5:
            tname, arg, bad, good = ex.fault_arg
            bad_args = {**ex.steps[0][0][1], arg: bad}
            prompt = ex.prompt.replace(good, bad, 1)
            ex2 = Example(prompt, ex.answer, [[(tname, bad_args)], ex.steps[0]], ex.final,
                          ex.plan, tools=ex.tools)
            task = _task(id_, dname, "recovery", seed, ex2, _mixed(rng, dname, ex2, size),
                         faults={"mode": "alias", "tool": tname, "arg": arg, "bad": bad,
                                 "good": good})
            task.gold_calls = [GoldCall(name=tname, arguments=ex.steps[0][0][1])]
            task.min_calls = 1
            return task, ex2
        if not ex.fault_arg or rng.random() < 0.5:
            (tname, args), mode = ex.steps[0][0], rng.choice(["timeout", "rate_limit"])
            base = next(t for t in DOMAINS[dname].tools if t["function"]["name"] == tname)
            backup = copy.deepcopy(base)
            backup["function"]["name"] = tname + BACKUP
            backup["function"]["description"] = f"Backup endpoint of {tname}: same arguments."
            ex2 = Example(ex.prompt, ex.answer, [[(tname, args)], [(tname + BACKUP, args)]],
                          ex.final, ex.plan, tools=ex.tools)
            task = _task(id_, dname, "recovery", seed, ex2,
                         _mixed(rng, dname, ex, size, extra=[backup]),
                         faults={"mode": mode, "tool": tname})
            task.min_calls = 1
            return task, ex2
    raise RuntimeError("no recovery example found")  # unreachable with the built-in domains


def _irrelevance(d: Draw) -> tuple[Task, Example]:
    """A domain's own irrelevance maker when it has one (its offer: near misses by design,
    then other domains' tools), else a generic off-topic prompt offered a mix of tools."""
    id_, seed, rng, domains, size = d.id, d.seed, d.rng, d.domains, d.offered_tools
    template, subjects = rng.choice(IRRELEVANT)
    x = rng.choice(subjects)
    dname = rng.choice(domains)
    own = DOMAINS[dname].makers.get("irrelevance")
    if own is not None:
        ex = own(rng)
        return _task(id_, dname, "irrelevance", seed, ex,
                     mix(rng, offered(dname, ex), [], size, {dname})), ex
    final = IRRELEVANT_ANSWERS[template.split()[0]].format(x=x, X=x[0].upper() + x[1:])
    ex = Example(template.format(x=x), None, [], final,
                 "None of the tools fits this request; I answer directly.")
    return _task(id_, dname, "irrelevance", seed, ex,
                 mix(rng, [], list(DOMAINS[dname].tools), size, set(), least=1)), ex


def _no_fit(want: Example, tools: list[dict], dname: str, id_, seed) -> tuple[Task, Example]:
    """A no-call task: `want`'s request offered `tools`, none of which serves it; the task
    belongs to `dname` (a call that is made runs there)."""
    names = [t["function"]["name"] for t in tools]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    ex = Example(want.prompt, None, [],
                 f"None of the available tools can do this: {listed} "
                 f"{'is' if len(names) == 1 else 'are'} for something else, so I cannot "
                 "answer it with them.",
                 "The request needs a tool the offered ones do not provide; I answer without "
                 "calling.", tools=tools)
    return _task(id_, dname, "irrelevance", seed, ex, tools, decline=True), ex


def _mismatch(d: Draw) -> tuple[Task, Example]:
    """A task-shaped request offered the wrong tools: one domain's single-call request with a
    mix of other domains' tools drawn like a call task's offer (one tool for a SOLO share, as
    in BFCL's irrelevance items). No call is right. Since call tasks offer unrelated tools too, only the
    tools' names and descriptions tell the two apart, never the presence of a stranger. Task
    kind `irrelevance`: it is verified and counted as one."""
    id_, seed, rng, domains, size = d.id, d.seed, d.rng, d.domains, d.offered_tools
    able = makers_for("single", domains)
    if len(able) < 2:
        raise ValueError(f"mismatch tasks need two domains that make single tasks; got {able}")
    asked = rng.choice(able)
    dname = rng.choice([d for d in able if d != asked])
    want, other = DOMAINS[asked].makers["single"](rng), DOMAINS[dname].makers["single"](rng)
    mine = {t["function"]["name"] for t in DOMAINS[asked].tools}
    tools = [t for t in _mixed(rng, dname, other, size) if t["function"]["name"] not in mine]
    tools = tools or mix(rng, [], [], size, {asked}, least=1)
    return _no_fit(want, tools, dname, id_, seed)


def _contrast(d: Draw) -> tuple[Task, Example]:
    """Minimal pairs: tasks 2i and 2i+1 share one request and one set of other domains' tools;
    the even one also offers the tool that serves the request (call it), the odd one a further
    stranger in its place (no call), so the two offer as many tools. Only whether the serving
    tool is there tells them apart: the model has to read the offered tools, where separately
    drawn call and no-call tasks let the request alone predict the answer. A SOLO share of
    pairs offers no strangers: the serving tool alone against one stranger alone, the shape of
    BFCL's simple and irrelevance items."""
    rng = random.Random(stable_int("contrast", d.id.rsplit("-", 1)[0], d.index // 2))
    dname, ex = _domain_example("single", rng, d.domains)
    used = {n for turn in ex.steps for n, _ in turn}
    needed = [t for t in offered(dname, ex) if t["function"]["name"] in used]
    size = max(d.offered_tools, len(needed) + 1)
    serving = {t["function"]["name"] for t in needed}
    strangers = [t for t in mix(rng, needed, [], size, {dname}, least=1)
                 if t["function"]["name"] not in serving]
    extra = mix(rng, [], [], size, {dname}, least=size)
    names = {t["function"]["name"] for t in strangers}
    spare = [t for t in extra if t["function"]["name"] not in names][:len(needed)]
    if d.index % 2:
        tools = strangers + spare
        rng.shuffle(tools)
        return _no_fit(ex, tools, dname, d.id, d.seed)
    tools = strangers + needed
    rng.shuffle(tools)
    return _task(d.id, dname, "single", d.seed, ex, tools), ex


def _many_tools(d: Draw) -> tuple[Task, Example]:
    """The many_tools canary: a single-call request offered several domains' tools
    (MANY_TOOLS), exactly one of which serves it, or, for every MANY_TOOLS_NONE-th item, the
    same kind of mix with no tool of the request's domain (no call is right)."""
    id_, seed, rng, domains, index = d.id, d.seed, d.rng, d.domains, d.index
    lo, hi = MANY_TOOLS
    size = rng.randint(lo, hi)
    dname, ex = _domain_example("single", rng, domains)
    if index % MANY_TOOLS_NONE == MANY_TOOLS_NONE - 1:
        return _no_fit(ex, mix(rng, [], [], size, {dname}, least=lo), dname, id_,
                       seed)
    own = offered(dname, ex)
    used = {n for turn in ex.steps for n, _ in turn}
    needed = [t for t in own if t["function"]["name"] in used]
    tools = mix(rng, needed, [], size, {dname}, least=lo)
    return _task(id_, dname, "single", seed, ex, tools), ex


def _reasoning(d: Draw) -> tuple[Task, Example]:
    """Grade-school arithmetic with no tools: the reasoning the tool rounds must not erode."""
    id_, seed, rng = d.id, d.seed, d.rng
    a, b, c = rng.randint(2, 9), rng.randint(3, 12), rng.randint(20, 99)
    item, person = rng.choice(["pencils", "apples", "tickets", "stamps"]), rng.choice(
        ["Tom", "Mia", "Ravi", "Lena"])
    form = rng.randrange(3)
    if form == 0:  # the payment covers the price: c, else the next multiple of 50 above it
        paid = c if a * b < c else (a * b // 50 + 1) * 50
        prompt = (f"{person} buys {a} {item} at {b} dollars each and pays with {paid} dollars. "
                  f"How much change does {person} get?")
        ans, plan = paid - a * b, f"{a} x {b} = {a * b}; {paid} - {a * b} = {paid - a * b}."
    elif form == 1:
        prompt = (f"A box holds {b} {item}. {person} has {a} full boxes and {c} loose {item}. "
                  f"How many {item} in total?")
        ans, plan = a * b + c, f"{a} x {b} = {a * b}; {a * b} + {c} = {a * b + c}."
    else:
        prompt = (f"{person} reads {b} pages a day for {a} days, then {c} pages on the last day. "
                  "How many pages in all?")
        ans, plan = a * b + c, f"{b} x {a} = {a * b}; {a * b} + {c} = {a * b + c}."
    ex = Example(prompt, ans, [], f"The answer is {ans}.", plan)
    return _task(id_, "math", "reasoning", seed, ex, []), ex


def _distractors(rng: random.Random, keep: list[dict], n: int) -> list[dict]:
    others = [t for d in BUILTIN.values() for t in d.tools if t not in keep]
    rng.shuffle(others)
    picked = others[:n]
    for i in range(len(picked), n):  # synthetic decoys beyond the built-in tools
        picked.append(tool(f"lookup_record_{i}", f"Look up archive record set {i}.",
                           {"record_id": {"type": "string"}}))
    tools = keep + picked
    rng.shuffle(tools)
    return tools


def _long_context(d: Draw) -> tuple[Task, Example]:
    """A single or chained task inside a long context: distractor tools, earlier turns and
    long tool outputs, sized by `d.context_tokens`."""
    id_, seed, rng, domains, context_tokens = (d.id, d.seed, d.rng, d.domains,
                                               d.context_tokens)
    base_kind = rng.choice([k for k in ("single", "chained") if makers_for(k, domains)]
                           or ["single"])
    dname, ex = _domain_example(base_kind, rng, domains)
    budget = max(context_tokens, 600)
    n_tools = min(40, max(4, budget // 400))
    pad = max(0, budget // 6)  # chars of log per tool result (about 4 chars a token)
    history_turns = max(0, min(6, budget // 1500))
    history = []
    for h in range(history_turns):
        history += [{"role": "user", "content": f"Note {h + 1}: " + filler(400, seed + h)},
                    {"role": "assistant", "content": "Noted."}]
    tools = _distractors(rng, offered(dname, ex), n_tools)
    task = _task(id_, dname, "long_context", seed, ex, tools, history=history,
                 faults={"pad_chars": pad}, difficulty=1 + budget // 2000)
    return task, ex


def make(kind: str, index: int, split: str = "train", namespace: str = "default",
         domains: Iterable[str] | None = None, context_tokens: int = 2000,
         offered_tools: int = OFFERED) -> Task:
    """Build task `index` of `kind` (or `kind@domain`), with its oracle demonstration
    attached; it offers at most `offered_tools` tools (long-context tasks: by length)."""
    spec = kind
    kind, pinned = parse_kind(spec)
    if pinned:
        domains = [pinned]
    domains = sorted(resolve(d).name for d in domains) if domains else sorted(BUILTIN)
    if not makers_for(kind, domains):
        raise ValueError(f"none of the domains {domains} makes {kind!r} tasks")
    seed = seed_for(split, namespace, spec, index)
    rng = random.Random(seed)
    id_ = f"{split}-{namespace}-{spec}-{index}"
    task, ex = KINDS[kind].build(Draw(id_, seed, rng, domains, index, offered_tools,
                                      context_tokens))
    task.oracle = _oracle(task, ex.steps, ex.plan, ex.final)
    return task


def domain_cycle(kind: str, index: int, domains: Iterable[str] | None = None) -> list[str] | None:
    """The one domain task `index` of `kind` is drawn from, cycling through `domains`, so a
    round's training tasks cover every domain evenly (a random draw gave 7 to 16 of 58 chained
    tasks per domain). None for kinds whose content is not tied to one domain; the pinned
    domain for `kind@domain`."""
    kind, pinned = parse_kind(kind)
    if pinned:
        return [pinned]
    if not KINDS[kind].balanced:
        return list(domains) if domains else None
    named = [resolve(d).name for d in domains] if domains else list(BUILTIN)
    names = makers_for(kind, named) or sorted(named)
    return [names[index % len(names)]]


def generate(kinds: dict[str, int], split: str = "train", namespace: str = "default",
             domains: Iterable[str] | None = None, context_tokens: int = 2000,
             start: int = 0, offered_tools: int = OFFERED) -> list[Task]:
    """Tasks for a mix such as {"single": 10, "chained": 5}."""
    return [make(k, start + i, split, namespace, domains, context_tokens, offered_tools)
            for k, n in kinds.items() for i in range(n)]


def validate_domain(name: str, per_kind: int = 3) -> list[str]:
    """Make `per_kind` tasks of every kind `name` supports (irrelevance too when it has its
    own maker) and check each oracle scores 1.0; returns the failures, each naming the domain
    and the kind."""
    from .verify import verify
    bad, own = [], DOMAINS[name].makers
    kinds = (k.name for k in KINDS.values() if k.per_domain
             and ((k.needs and supports(name, k.name)) or k.name in own))
    for kind in kinds:
        for i in range(per_kind):
            try:
                task = make(kind, i, split="validate", namespace=name, domains=[name])
            except Exception as err:  # a user's maker may raise anything: report, don't crash
                bad.append(f"domain {name}, kind {kind}: the maker failed: {err!r}")
                break
            v = verify(task, task.messages() + task.oracle, require_plan=True)
            if not v.success or v.score != 1.0:
                bad.append(f"domain {name}, kind {kind}: the oracle of task {i} scores "
                           f"{v.score} ({'; '.join(v.reasons)})")
                break
    return bad


# The built-in kinds. `balanced`: a round cycles these over
# its domains; `pinnable`: `kind@domain` draws from that domain only.
for _kind in (
        TaskKind("single", _calls("single"), needs=("single",), pinnable=True, balanced=True,
                 canaries=("single_turn",), doc="one call, then the answer"),
        TaskKind("parallel", _calls("parallel"), needs=("parallel",), pinnable=True,
                 balanced=True, canaries=("single_turn",), doc="several calls in one turn"),
        TaskKind("chained", _calls("chained"), needs=("chained",), pinnable=True,
                 balanced=True, canaries=("multi_turn",),
                 doc="calls whose arguments come from earlier results"),
        TaskKind("irrelevance", _irrelevance, pinnable=True, canaries=("irrelevance",),
                 doc="no tool fits: answer without a call"),
        TaskKind("recovery", _recovery, needs=("single",), pinnable=True, balanced=True,
                 canaries=("recovery",), doc="a tool error, then the retry it points to"),
        TaskKind("long_context", _long_context, needs=("single", "chained"),
                 canaries=("long_context",), doc="a task inside long tool outputs, histories and distractor tools"),
        TaskKind("reasoning", _reasoning, canaries=("reasoning",), doc="arithmetic, no tools"),
        TaskKind("mismatch", _mismatch, needs=("single",), per_domain=False,
                 doc="a request offered other domains' tools: no call"),
        TaskKind("contrast", _contrast, needs=("single",), pinnable=True, per_domain=False,
                 doc="minimal pairs: one request offered the same tools with and without the "
                     "one that serves it"),
        TaskKind("many_tools", _many_tools, needs=("single",), per_domain=False,
                 canaries=("many_tools",),
                 doc="several domains' tools, one fitting or none")):
    register(_kind)

# the built-in canaries and the kinds their items come from
CANARY_KINDS: dict[str, tuple[str, ...]] = canary_kinds()
