"""Seeded task generators for every kind, each with an oracle demonstration.

`make(kind, index, split=..., namespace=...)` is a pure function: the same arguments give
the same task. Training and canary items draw from disjoint seed namespaces (`split`), and
the decontamination filter checks the prompts as well.
"""
from __future__ import annotations

import copy
import random
from typing import Iterable

from .chatformat import Call, format_call
from .environment import BACKUP, DomainEnvironment, filler
from .envs import BUILTIN, DOMAINS, resolve
from .envs.base import Example, stable_int, tool
from .trajectory import GoldCall, Task

KINDS = ("single", "parallel", "chained", "irrelevance", "recovery", "long_context", "reasoning",
         "mismatch")
# the built-in canaries, each named once here, and the generator kinds their items come from
CANARY_KINDS: dict[str, tuple[str, ...]] = {
    "reasoning": ("reasoning",), "recovery": ("recovery",),
    "single_turn": ("single", "parallel"), "multi_turn": ("chained",),
    "irrelevance": ("irrelevance",)}
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


# kinds whose tasks come from one domain: `kind@domain` pins them to that domain
PINNABLE = ("single", "parallel", "chained", "recovery", "irrelevance")


def parse_kind(spec: str) -> tuple[str, str | None]:
    """`kind`, or `kind@domain`: tasks of that kind drawn from that one domain only (a
    round's `tasks: {irrelevance@synthetic: 24}`). Raises ValueError naming the choices."""
    kind, at, domain = spec.partition("@")
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; choose from {', '.join(KINDS)} "
                         f"(or kind@domain for {', '.join(PINNABLE)})")
    if at and (not domain or kind not in PINNABLE):
        raise ValueError(f"{spec!r}: kind@domain needs a domain name and one of "
                         f"{', '.join(PINNABLE)}")
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


# kind -> the domain makers that can build it (any one of them); () = every domain can
NEEDS: dict[str, tuple[str, ...]] = {
    "single": ("single",), "parallel": ("parallel",), "chained": ("chained",),
    "recovery": ("single",), "long_context": ("single", "chained"), "irrelevance": (),
    "reasoning": (), "mismatch": ("single",)}
MISMATCH_ONE_TOOL = 0.5  # share of mismatch tasks offering a single tool, as BFCL's items do


def supports(domain: str, kind: str) -> bool:
    """Whether `domain` can make tasks of `kind`."""
    need = NEEDS[kind]
    return not need or any(k in DOMAINS[domain].makers for k in need)


def makers_for(kind: str, domains: Iterable[str]) -> list[str]:
    """The domains among `domains` that can make `kind`, sorted."""
    return sorted(d for d in domains if supports(d, kind))


def offered(dname: str, ex: Example) -> list[dict]:
    """The tools a task declares: the example's own pick, else all of its domain's."""
    return list(ex.tools) if ex.tools is not None else list(DOMAINS[dname].tools)


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


def _recovery(id_, seed, rng, domains) -> Task:
    for _ in range(50):  # find a domain example that supports an alias fault, or use a transient
        dname, ex = _domain_example("single", rng, domains)
        if ex.fault_arg and rng.random() < 0.5:
            tname, arg, bad, good = ex.fault_arg
            bad_args = {**ex.steps[0][0][1], arg: bad}
            prompt = ex.prompt.replace(good, bad, 1)
            ex2 = Example(prompt, ex.answer, [[(tname, bad_args)], ex.steps[0]], ex.final,
                          ex.plan, tools=ex.tools)
            task = _task(id_, dname, "recovery", seed, ex2, offered(dname, ex),
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
            task = _task(id_, dname, "recovery", seed, ex2, offered(dname, ex) + [backup],
                         faults={"mode": mode, "tool": tname})
            task.min_calls = 1
            return task, ex2
    raise RuntimeError("no recovery example found")  # unreachable with the built-in domains


def _irrelevance(id_, seed, rng, domains) -> Task:
    """A domain's own irrelevance maker when it has one, else a generic off-topic prompt
    (drawn first either way, so built-in tasks stay as they were)."""
    template, subjects = rng.choice(IRRELEVANT)
    x = rng.choice(subjects)
    dname = rng.choice(domains)
    own = DOMAINS[dname].makers.get("irrelevance")
    if own is not None:
        ex = own(rng)
        return _task(id_, dname, "irrelevance", seed, ex, offered(dname, ex)), ex
    final = IRRELEVANT_ANSWERS[template.split()[0]].format(x=x, X=x[0].upper() + x[1:])
    ex = Example(template.format(x=x), None, [], final,
                 "None of the tools fits this request; I answer directly.")
    return _task(id_, dname, "irrelevance", seed, ex, DOMAINS[dname].tools), ex


def _mismatch(id_, seed, rng, domains) -> Task:
    """A task-shaped request offered the wrong tools: one domain's single-call request with
    another domain's tools (all its offered ones, or one, as in BFCL's irrelevance items).
    No call is right. Off-topic chat alone teaches "no tool for small talk"; this teaches
    that the tools' names and descriptions, not the request's shape, decide whether to call.
    The task belongs to the tools' domain (a call that is made runs there). Task kind
    `irrelevance`: it is verified and counted as one."""
    able = makers_for("single", domains)
    if len(able) < 2:
        raise ValueError(f"mismatch tasks need two domains that make single tasks; got {able}")
    asked = rng.choice(able)
    dname = rng.choice([d for d in able if d != asked])
    want, other = DOMAINS[asked].makers["single"](rng), DOMAINS[dname].makers["single"](rng)
    tools = offered(dname, other)
    if rng.random() < MISMATCH_ONE_TOOL:
        first = other.steps[0][0][0]
        tools = [t for t in tools if t["function"]["name"] == first][:1] or tools[:1]
    names = [t["function"]["name"] for t in tools]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    ex = Example(want.prompt, None, [],
                 f"None of the available tools can do this: {listed} "
                 f"{'is' if len(names) == 1 else 'are'} for something else, so I cannot "
                 "answer it with them.",
                 "The request needs a tool the offered ones do not provide; I answer without "
                 "calling.", tools=tools)
    return _task(id_, dname, "irrelevance", seed, ex, tools), ex


def _reasoning(id_, seed, rng) -> Task:
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


def _long_context(id_, seed, rng, domains, context_tokens: int) -> Task:
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
         domains: Iterable[str] | None = None, context_tokens: int = 2000) -> Task:
    """Build task `index` of `kind` (or `kind@domain`), with its oracle demonstration
    attached."""
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
    if kind in ("single", "parallel", "chained"):
        dname, ex = _domain_example(kind, rng, domains)
        task = _task(id_, dname, kind, seed, ex, offered(dname, ex))
    elif kind == "recovery":
        task, ex = _recovery(id_, seed, rng, domains)
    elif kind == "irrelevance":
        task, ex = _irrelevance(id_, seed, rng, domains)
    elif kind == "mismatch":
        task, ex = _mismatch(id_, seed, rng, domains)
    elif kind == "reasoning":
        task, ex = _reasoning(id_, seed, rng)
    else:
        task, ex = _long_context(id_, seed, rng, domains, context_tokens)
    task.oracle = _oracle(task, ex.steps, ex.plan, ex.final)
    return task


BALANCED_KINDS = ("single", "parallel", "chained", "recovery")


def domain_cycle(kind: str, index: int, domains: Iterable[str] | None = None) -> list[str] | None:
    """The one domain task `index` of `kind` is drawn from, cycling through `domains`, so a
    round's training tasks cover every domain evenly (a random draw gave 7 to 16 of 58 chained
    tasks per domain). None for kinds whose content is not tied to one domain; the pinned
    domain for `kind@domain`."""
    kind, pinned = parse_kind(kind)
    if pinned:
        return [pinned]
    if kind not in BALANCED_KINDS:
        return list(domains) if domains else None
    named = [resolve(d).name for d in domains] if domains else list(BUILTIN)
    names = makers_for(kind, named) or sorted(named)
    return [names[index % len(names)]]


def generate(kinds: dict[str, int], split: str = "train", namespace: str = "default",
             domains: Iterable[str] | None = None, context_tokens: int = 2000,
             start: int = 0) -> list[Task]:
    """Tasks for a mix such as {"single": 10, "chained": 5}."""
    return [make(k, start + i, split, namespace, domains, context_tokens)
            for k, n in kinds.items() for i in range(n)]


def validate_domain(name: str, per_kind: int = 3) -> list[str]:
    """Make `per_kind` tasks of every kind `name` supports (irrelevance too when it has its
    own maker) and check each oracle scores 1.0; returns the failures, each naming the domain
    and the kind."""
    from .verify import verify
    bad, own = [], DOMAINS[name].makers
    kinds = (k for k in KINDS if k != "mismatch" and ((NEEDS[k] and supports(name, k))
                                                      or k in own))  # mismatch: two domains
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
