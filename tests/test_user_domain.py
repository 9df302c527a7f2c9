"""A user's own tool domain, written outside the package: named in the config, checked when
the config loads, and used by round 1 (its tasks, its oracles, its implementation)."""
from __future__ import annotations

import json
import textwrap

import pytest

from data import jsonl
from data.envs import BUILTIN, SHIPPED, problems, resolve
from data.tasks import make, validate_domain
from data.trajectory import Task, Trajectory
from pipeline import config

STOCKS = textwrap.dedent('''
    """Stocks: prices and holdings over a fixed table (the README's worked example)."""
    import random

    from data.envs.base import Domain, Example, S, ToolError, tool

    PRICES = {"ACME": 12.5, "GLOBEX": 48.0, "INITECH": 7.25, "UMBRELLA": 101.0}
    HOLDINGS = {("alice", "ACME"): 40, ("alice", "GLOBEX"): 3, ("bob", "INITECH"): 120,
                ("bob", "UMBRELLA"): 2}
    CALLS = []  # what the implementation was asked, for the test


    def get_price(symbol: str) -> dict:
        CALLS.append(("get_price", symbol))
        if symbol not in PRICES:
            raise ToolError("not_found", f"no stock {symbol!r}; known: {sorted(PRICES)}")
        return {"symbol": symbol, "price": PRICES[symbol]}


    def holding(account: str, symbol: str) -> dict:
        CALLS.append(("holding", symbol))
        return {"account": account, "symbol": symbol,
                "shares": HOLDINGS.get((account, symbol), 0)}


    TOOLS = [tool("get_price", "Latest price of a stock in dollars.", {"symbol": S}),
             tool("holding", "Shares of a stock an account holds.", {"account": S, "symbol": S})]


    def single(rng: random.Random) -> Example:
        sym = rng.choice(sorted(PRICES))
        return Example(f"What does one share of {sym} cost?", PRICES[sym],
                       [[("get_price", {"symbol": sym})]], f"One share of {sym} costs "
                       f"{PRICES[sym]} dollars.", f"Look up the price of {sym}.")


    def chained(rng: random.Random) -> Example:
        (account, sym), shares = rng.choice(sorted(HOLDINGS.items()))
        value = shares * PRICES[sym]
        return Example(f"What is {account}'s {sym} position worth in dollars?", value,
                       [[("holding", {"account": account, "symbol": sym})],
                        [("get_price", {"symbol": sym})]],
                       f"{account} holds {shares} shares worth {value} dollars.",
                       "Find the shares held, then the price, and multiply.")


    from data.kinds import TaskKind, register
    from data.tasks import task_from


    def _price_check(d):  # a kind of the module's own, drawn from its single-call examples
        ex = single(d.rng)
        return task_from(d, "stocks", "single", ex)


    KIND = TaskKind("price_check", _price_check, needs=("single",), doc="one price lookup")


    DOMAIN = Domain("stocks", TOOLS, {"get_price": get_price, "holding": holding},
                    {"single": single, "chained": chained})
    BROKEN = Domain("broken", TOOLS, {"get_price": get_price}, {"single": single})
    LIAR = Domain("liar", TOOLS[:1], {"get_price": get_price},  # its oracle answers wrong
                  {"single": lambda rng: Example("Price of ACME?", 12.5,
                                                 [[("get_price", {"symbol": "ACME"})]],
                                                 "No idea.", "Look it up.")})
''')


def test_a_user_module_adds_a_task_kind_a_round_can_name(stocks):
    """A kind registered by a domain module (no edit of the package) is asked for by name in a
    round's tasks; its tasks verify like built-in ones."""
    from data import kinds
    from data.verify import validate
    mod = __import__(stocks)
    kinds.register(mod.KIND)
    try:
        cfg = config.load(None, "tiny", [f"rounds.grounding.domains=[{stocks}]",
                                          "rounds.grounding.tasks={price_check: 3}"])
        assert cfg.rounds["grounding"].tasks == {"price_check": 3}
        made = [make("price_check", i, domains=[stocks]) for i in range(3)]
        assert all(t.domain == "stocks" and "get_price" in {x["function"]["name"]
                   for x in t.tools} for t in made)
        assert validate(made) == []
        with pytest.raises(ValueError, match="registered already"):
            kinds.register(kinds.TaskKind("price_check", lambda d: None))
    finally:
        kinds.KINDS.pop("price_check", None)
    with pytest.raises(ValueError, match="unknown task kind 'price_check'"):
        make("price_check", 0, domains=[stocks])


@pytest.fixture
def stocks(tmp_path, monkeypatch, forget_domains):
    """The module on the path; the domains it registers are forgotten afterwards, so other
    tests see only the built-in ones."""
    (tmp_path / "my_stocks.py").write_text(STOCKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_stocks"


def test_a_user_domain_resolves_makes_tasks_and_validates(stocks):
    dom = resolve(stocks)
    assert dom.name == "stocks" and "stocks" not in BUILTIN and problems(dom) == []
    task = make("chained", 0, domains=[stocks])
    assert task.domain == "stocks"
    offered = {t["function"]["name"] for t in task.tools}
    assert {"get_price", "holding"} <= offered      # its own tools, maybe shipped strangers
    assert offered - {"get_price", "holding"} <= {n for d in SHIPPED.values()
                                                  for n in d.tool_names()}
    assert validate_domain("stocks") == []
    assert "declared tools without an implementation: ['holding']" in str(
        pytest.raises(ValueError, resolve, f"{stocks}:BROKEN").value)
    resolve(f"{stocks}:LIAR")
    assert "domain liar, kind single: the oracle of task 0 scores" in validate_domain("liar")[0]


@pytest.mark.parametrize("domains, message", [
    ("[my_stocks]", "no configured domain makes task kind(s) ['parallel']"),
    ("['my_stocks:BROKEN']", "declared tools without an implementation"),
    ("['my_stocks:LIAR', weather]", "domain 'my_stocks:LIAR' failed validation: domain liar, "
                                    "kind single"),
    ("[stockz]", "unknown domain 'stockz'"),
])
def test_bad_domains_fail_when_the_config_loads(stocks, domains, message):
    with pytest.raises(config.ConfigError) as err:
        config.load(preset="tiny", overrides=[f"rounds.plan_finish.domains={domains}",
                                              "rounds.plan_finish.tasks={single: 1, parallel: 1}"])
    assert "rounds.plan_finish" in str(err.value) and message in str(err.value)


def test_round_one_trains_on_a_user_domain(stocks, tmp_path):
    from pipeline.loop import run
    cfg = config.load(preset="tiny", overrides=[
        f"run_dir={tmp_path / 'run'}", "export.enabled=false",
        f"rounds.grounding.domains=[{stocks}]",
        "rounds.grounding.tasks={single: 2, chained: 2, recovery: 1}"])
    assert run(cfg, only_round=1, progress=False) == {"grounding": "promoted"}
    r1 = tmp_path / "run" / "round-1-grounding"
    tasks = jsonl.read_all(r1 / "tasks.jsonl", Task)
    assert [t.domain for t in tasks] == ["stocks"] * 5
    rollouts = jsonl.read_all(r1 / "rollouts.jsonl", Trajectory)
    assert {t.domain for t in rollouts} == {"stocks"} and len(rollouts) == 5
    accepted = jsonl.read_all(r1 / "accepted.jsonl", Trajectory)
    assert accepted and all(t.success and t.domain == "stocks" for t in accepted)
    # the oracle's tool results came from the user's implementation
    import my_stocks
    results = [json.loads(m["content"]) for t in accepted for m in t.messages
               if m["role"] == "tool" and m["ok"]]
    assert any(r.get("price") == my_stocks.PRICES.get(r.get("symbol")) for r in results)
    assert {name for name, _ in my_stocks.CALLS} == {"get_price", "holding"}
