"""Round recipes from config: one settings class per recipe kind, unused keys refused before
any work, recipes by built-in name or dotted path, and the run order."""
from __future__ import annotations

import textwrap

import pytest

from pipeline import config, recipes

OUTSIDE = textwrap.dedent('''
    """A round written outside the package: grounding again, on its own task mix."""
    from pydantic import Field

    from rounds.settings import SampledRoundSettings
    from rounds.common import Candidate, accept, make_tasks, oracle_trajectories, train


    class Settings(SampledRoundSettings):
        note: str = Field("", description="a key only this recipe reads")


    class Replay:
        SETTINGS = Settings

        @staticmethod
        def run(ctx):
            tasks = make_tasks(ctx)
            accepted = accept(ctx, oracle_trajectories(tasks, ctx.number))
            ctx.stats["note"] = ctx.settings.note
            return Candidate(train(ctx, accepted, ctx.start_model), ctx.stats)


    replay = Replay()
    SETTINGS = Settings
    run = Replay.run
''')


@pytest.fixture
def outside(tmp_path, monkeypatch):
    (tmp_path / "my_rounds.py").write_text(OUTSIDE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_rounds"


@pytest.mark.parametrize("override, message", [
    ("rounds.rl_polish.oracle=true",
     "rounds.rl_polish.oracle: unknown key (recipe 'rl_polish' does not use it)"),
    ("rounds.rl_polish.k=4", "rounds.rl_polish.k: unknown key"),
    ("rounds.plan_finish.teacher={file: x.jsonl}", "rounds.plan_finish.teacher: unknown key"),
    ("rounds.grounding.context_tokens=[800]", "rounds.grounding.context_tokens: unknown key"),
    ("rounds.extra={}", "rounds.extra: no built-in recipe named 'extra'"),
    ("rounds.extra={recipe: no_such_pkg.rounds}", "cannot import 'no_such_pkg.rounds'"),
    ("rounds.extra={recipe: 'json:dumps'}", "lacks run and SETTINGS"),
])
def test_a_key_a_round_does_not_use_fails_before_work(override, message):
    with pytest.raises(config.ConfigError) as err:
        config.load(preset="tiny", overrides=[override])
    assert "tiny.yaml" in str(err.value) and message in str(err.value)


def test_each_round_gets_its_recipes_settings():
    cfg = config.load(preset="default")
    kinds = {name: type(rs).__name__ for name, rs in cfg.rounds.items()}
    assert kinds == {"grounding": "GroundingSettings", "plan_finish": "PlanFinishSettings",
                     "long_context": "LongContextSettings",
                     "self_improve": "SelfImproveSettings", "rl_polish": "RLSettings"}
    assert cfg.rounds["plan_finish"].require_plan is True     # the recipe's default
    assert cfg.rounds["grounding"].require_plan is False
    assert not hasattr(cfg.rounds["rl_polish"], "k")
    assert [name for _, name, _ in cfg.planned_rounds()] == list(recipes.BUILTIN)
    # the resolved config round-trips through its own dump
    again = config.RunConfig.model_validate(config.yaml.safe_load(config.dump(cfg)))
    assert again.model_dump() == cfg.model_dump()


def test_a_sixth_round_from_outside_the_package(outside):
    cfg = config.load(preset="tiny", overrides=[
        f"rounds.sixth={{recipe: '{outside}:replay', tasks: {{single: 2}}, note: hi}}"])
    planned = cfg.planned_rounds()
    assert [(n, name) for n, name, _ in planned][-2:] == [(5, "rl_polish"), (6, "sixth")]
    sixth = cfg.rounds["sixth"]
    assert type(sixth).__name__ == "Settings" and sixth.note == "hi"
    assert recipes.resolve(sixth.recipe).run.__qualname__ == "Replay.run"
    with pytest.raises(config.ConfigError, match=r"rounds.sixth.nope: unknown key \(recipe "
                                                 r"'my_rounds' does not use it\)"):
        config.load(preset="tiny", overrides=["rounds.sixth={recipe: my_rounds, nope: 1}"])


def test_run_order_keeps_the_configs_order_and_puts_builtins_back():
    assert recipes.ordered([]) == list(recipes.BUILTIN)
    assert recipes.ordered(["extra", "plan_finish"]) == [
        "grounding", "extra", "plan_finish", "long_context", "self_improve", "rl_polish"]
    assert recipes.ordered(["rl_polish", "grounding", "x"]) == [
        "rl_polish", "grounding", "plan_finish", "long_context", "self_improve", "x"]
