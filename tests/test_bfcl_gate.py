"""BFCL categories as gate canaries (`canaries.bfcl`), and the minimum detectable effect the
gate reports and `run --dry-run` state.

The evaluation tests use a hand-written fake backend that knows the BFCL answers, so they
run the real rollout driver, BFCL's own checkers, the paired statistics and the reports."""
import importlib.util
import json
import math
from contextlib import contextmanager

import pytest

from data.chatformat import format_call
from pipeline import config
from pipeline.config import ConfigError
from engine.sampling.base import Completion
from pipeline.recipes import CANARIES

needs_bfcl = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval is not installed (see .ci/setup)")
BFCL = {"simple_python": 3, "multi_turn_base": 2}


# ------------------------------------------------------------------------------ config

def load(*overrides):
    return config.load(preset="tiny", overrides=list(overrides))


def test_bfcl_canaries_in_the_config():
    cfg = load("canaries.bfcl={simple_python: 3, multi_turn_base: 2}",
               "gate.drop_abs={bfcl_simple_python: 0.1}",
               "gate.floors={bfcl_multi_turn_base: 0.05}",
               "rounds.plan_finish.target=bfcl_multi_turn_base")
    assert cfg.canaries.bfcl == {"simple_python": 3, "multi_turn_base": 2}
    assert cfg.canaries.size("bfcl_multi_turn_base") == 2 and cfg.canaries.size("bfcl_parallel") == 0
    assert cfg.rounds["plan_finish"].target == "bfcl_multi_turn_base"
    # the report's thresholds spell out every evaluated canary's tolerance, BFCL ones too
    tol = cfg.gate.to_dict(["bfcl_simple_python", "bfcl_multi_turn_base"])["drop_abs"]
    assert tol["bfcl_simple_python"] == 0.1 and tol["bfcl_multi_turn_base"] == 0.02
    assert tol["multi_turn"] == 0.02 and len(tol) == len(CANARIES) + 2


@pytest.mark.parametrize("override, message", [
    ("canaries.bfcl={simple_pyton: 3}",
     "canaries.bfcl: unknown BFCL category(ies) ['simple_pyton']; choose from simple_python, "),
    ("canaries.bfcl={simple_python: 0}", "canaries.bfcl: {'simple_python': 0}: a BFCL canary "
                                         "needs at least 1 item"),
    ("gate.drop_abs={bfcl_nope: 0.1}", "gate.drop_abs: {'bfcl_nope': 0.1}: keys must be "
                                       "canaries (single_turn, "),
    ("gate.floors={bfcl_parallel: 0.1}", "gate.floors: ['bfcl_parallel'] not configured; add "
                                         "the categories to canaries.bfcl"),
    ("rounds.long_context.target=bfcl_parallel",
     "rounds.long_context.target: canary 'bfcl_parallel' is not configured; add it to "
     "canaries.bfcl (e.g. canaries.bfcl: {parallel: 50})"),
    ("rounds.long_context.target=bfcl_nope",
     "rounds.long_context: target 'bfcl_nope' is not a canary; choose from single_turn, "),
])
def test_bad_bfcl_config_names_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load(override)
    assert message in str(err.value)
    assert str(err.value).startswith(str(config.PRESETS["tiny"]))


# ---------------------------------------------------------------------- minimum detectable

def test_minimum_detectable_effect():
    from gates.stats import drop_mde, items_for, keep_mde
    c2 = (2 + 0.8416) ** 2                                 # 8.0747
    assert keep_mde(12, 2) == pytest.approx(c2 / (12 + c2)) == pytest.approx(0.4022, abs=1e-4)
    assert keep_mde(100, 2) == pytest.approx(0.0747, abs=1e-4)
    assert items_for(0.10, 2) == 73                         # 8.0747 x 0.9 / 0.1 = 72.7
    assert keep_mde(73, 2) <= 0.10 < keep_mde(72, 2)
    assert drop_mde(12, 2, 0.02) == keep_mde(12, 2)         # the SE term dominates
    assert drop_mde(2000, 2, 0.02) == 0.02                  # the absolute tolerance does
    assert keep_mde(12, 0) == pytest.approx(0.8416 ** 2 / (12 + 0.8416 ** 2))


def test_keep_rule_power_at_the_mde_under_its_assumption():
    """Wins without losses: the paired SE is sqrt(p(1-p)/(n-1)) of the win share p, so the
    keep rule at 2 SE passes at p >= 4/(n+3), i.e. at 4 wins. The exact binomial power at the
    formula's effect: 78% at n=12, 91% at n=30, 95% at n=100 (the formula is cautious for
    larger n)."""
    from gates.stats import keep_mde, paired

    def power(n):
        d = keep_mde(n, 2)
        need = next(w for w in range(1, n + 1)   # fewest wins the real keep rule passes
                    if (p := paired({str(i): float(i < w) for i in range(n)},
                                    {str(i): 0.0 for i in range(n)})).delta >= 2 * p.se)
        return need, sum(math.comb(n, w) * d ** w * (1 - d) ** (n - w) for w in range(need, n + 1))

    assert [(need, round(pw, 3)) for need, pw in map(power, (12, 30, 100))] == \
        [(4, 0.779), (4, 0.906), (4, 0.946)]


def test_dry_run_states_target_n_mde_and_warns(tmp_path, capsys):
    from pipeline.cli import main
    assert main(["run", "--preset", "tiny", "--run-dir", str(tmp_path / "r"), "--dry-run",
                 "-o", "gate.keep_se=2", "-o", "canaries.bfcl={multi_turn_base: 100}",
                 "-o", "rounds.plan_finish.target=bfcl_multi_turn_base"]) == 0
    plan = capsys.readouterr().out.split("plan for ")[1].splitlines()
    grounding = next(i for i, line in enumerate(plan) if " grounding " in line)
    assert "target=multi_turn   n=3    keep MDE=0.729 " in plan[grounding]
    assert plan[grounding + 1] == ("    WARNING: target multi_turn has 3 items: keep MDE 0.729 "
                                   "at keep_se 2 (80% power) cannot detect a +0.10 change; "
                                   "about 73 items would")
    plan_finish = next(i for i, line in enumerate(plan) if " plan_finish " in line)
    assert "target=bfcl_multi_turn_base n=100  keep MDE=0.075 " in plan[plan_finish]
    assert "WARNING" not in plan[plan_finish + 1]            # 100 items detect +0.10
    assert sum("WARNING" in line for line in plan) == 4       # the other four rounds
    assert " SFT k=1 " in plan[grounding]                      # how each round trains
    rl = next(line for line in plan if " rl_polish " in line)
    assert " GRPO 1x1x2 probe k=2 " in rl, rl                  # steps x tasks x group, probe


# -------------------------------------------------------------------- evaluation and gate

class Oracle:
    """A fake backend that knows BFCL's answers (found by the conversation's first user
    message) and says "Done." to everything else; `silent` answers nothing at all."""
    name = "oracle"

    def __init__(self, silent=False):
        from data.bfcl import parse_call_string
        from gates.ast_check import first_accepted
        from gates.bfcl_canary import canary_items
        version = load().canaries.version  # the tiny preset's canary items
        self.silent = silent
        self.single = {it.messages[-1]["content"]: first_accepted(it.ground_truth, it.functions)
                       for it in canary_items("simple_python", 10, version)}
        self.multi = {e.turns[0][0]["content"]:
                      [[parse_call_string(s, e.all_functions()) for s in t]
                       for t in e.ground_truth]
                      for e in canary_items("multi_turn_base", 10, version)}

    def generate(self, prompts, params, seeds, conversations=None):
        out = []
        for messages, _ in conversations:
            users = [m["content"] for m in messages if m["role"] == "user"]
            if self.silent or messages[-1]["role"] == "tool":
                calls = []
            elif users[0] in self.multi:
                calls = self.multi[users[0]][len(users) - 1]
            else:
                calls = self.single.get(users[-1], [])
            text = "\n".join(format_call(n, a) for n, a in calls) or "Done."
            out.append(Completion(text, [0], 10, "stop"))
        return out

    def close(self):
        pass


def opener(backend, opened):
    @contextmanager
    def open_backend(model_dir):
        opened.append(str(model_dir))
        yield backend
    return open_backend


def small(*overrides):
    # (multi_turn and recovery: the tiny preset's round targets need items)
    return load("canaries.sizes={single_turn: 2, multi_turn: 1, recovery: 1}", "canaries.k=1",
                "canaries.max_new_tokens=64", "canaries.bfcl={simple_python: 3, "
                "multi_turn_base: 2}", *overrides)


@needs_bfcl
def test_evaluate_model_merges_bfcl_and_reuses_only_same_hashes(tmp_path):
    from gates.bfcl_canary import canary_items, suite_hash
    from gates.gate import evaluate_model, suites_for
    cfg, opened = small(), []
    suites = suites_for(cfg)
    res = evaluate_model(cfg, tmp_path / "m", tmp_path / "e", suites, progress=False,
                         open_backend=opener(Oracle(), opened))
    assert opened == [str(tmp_path / "m")]                # one engine for every suite
    assert list(res["suites"]) == ["single_turn", "multi_turn", "recovery",
                                   "bfcl_simple_python", "bfcl_multi_turn_base"]
    for cat, n in BFCL.items():
        s = res["suites"]["bfcl_" + cat]
        assert s["n_items"] == n and s["primary"] == "accuracy"
        assert s["hash"] == suite_hash(cat, canary_items(cat, n, cfg.canaries.version))
        assert s["metrics"] == {"accuracy": 1.0, "pass@k": 1.0}
        assert res["settings"]["hashes"]["bfcl_" + cat] == s["hash"]
    assert res["suites"]["single_turn"]["metrics"]["exact"] == 0.0   # "Done." calls nothing
    on_disk = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert on_disk["suites"] == res["suites"]

    # the same BFCL suites: reused, no engine start
    again = evaluate_model(cfg, tmp_path / "m", tmp_path / "e", suites, progress=False,
                           open_backend=opener(Oracle(), opened))
    assert again == res and len(opened) == 1
    # another BFCL size (another hash): evaluated again
    cfg2 = small("canaries.bfcl={simple_python: 4, multi_turn_base: 2}")
    res2 = evaluate_model(cfg2, tmp_path / "m", tmp_path / "e", suites, progress=False,
                          open_backend=opener(Oracle(), opened))
    assert len(opened) == 2 and res2["suites"]["bfcl_simple_python"]["n_items"] == 4
    assert res2["suites"]["bfcl_multi_turn_base"] == res["suites"]["bfcl_multi_turn_base"]
    # BFCL canaries dropped from the config: evaluated again, without them
    res3 = evaluate_model(small("canaries.bfcl={}"), tmp_path / "m", tmp_path / "e", suites,
                          progress=False, open_backend=opener(Oracle(), opened))
    # (every built-in item is on disk: scored from it, no engine)
    assert len(opened) == 2 and list(res3["suites"]) == ["single_turn", "multi_turn", "recovery"]


@needs_bfcl
def test_gate_flags_a_bfcl_drop_and_reports_it(tmp_path):
    from gates.gate import evaluate_model, suites_for
    from gates.html import write_run_report
    from gates.promote import decide
    from gates.report import summary_table, write_gate_report
    cfg = small("gate={keep_se: 2, drop_se: 2}")                   # the default thresholds
    suites, opened = suites_for(cfg), []
    base = evaluate_model(cfg, tmp_path / "base", tmp_path / "evals" / "base", suites,
                          progress=False, open_backend=opener(Oracle(), opened))
    gate = tmp_path / "round-1-grounding" / "gate"
    cand = evaluate_model(cfg, tmp_path / "cand", gate / "candidate", suites, progress=False,
                          open_backend=opener(Oracle(silent=True), opened))

    d = decide(cand, base, cfg.gate, "single_turn")
    failed = {(r.name, r.canary) for r in d.failures()}
    assert failed == {("target", "single_turn"), ("no-drop", "bfcl_simple_python"),
                      ("no-drop", "bfcl_multi_turn_base")}
    drop = next(r for r in d.rules if r.name == "no-drop" and r.canary == "bfcl_simple_python")
    assert drop.detail == ("bfcl_simple_python.accuracy: delta -1.000, tolerance -0.020 = "
                           "max(2 x SE 0.000, abs 0.020)")
    # a BFCL target is compared like any: the oracle over the silent model, 3 wins of 3
    up = decide(base, cand, cfg.gate, "bfcl_simple_python")
    assert up.target == "bfcl_simple_python.accuracy" and up.comparisons[
        "bfcl_simple_python"]["accuracy"].wins == 3
    assert [r.passed for r in up.rules if r.name == "target"] == [True]

    json_path, md_path = write_gate_report(gate, d, cand, base, {"round": 1, "name": "grounding"})
    rep = json.loads(json_path.read_text())
    c = rep["canaries"]
    assert c["bfcl_simple_python"]["verdict"] == "FAIL (no-drop)"
    assert c["bfcl_simple_python"]["n_items"] == 3
    # drop MDE of 3 items: 8.0747 / 11.0747; keep MDE of the 2-item target: 8.0747 / 10.0747
    assert c["bfcl_simple_python"]["mde"] == {"rule": "drop", "value": 0.7291}
    assert c["single_turn"]["mde"] == {"rule": "keep", "value": 0.8015}
    assert rep["thresholds"]["drop_abs"]["bfcl_multi_turn_base"] == 0.02
    md = md_path.read_text()
    assert "## bfcl_multi_turn_base: FAIL (no-drop)" in md
    assert f"n = 2 items, suite {cfg.canaries.version} " in md and "; MDE 0.801 (drop rule)" in md
    assert "primary metric `exact`; MDE 0.801 (keep rule)" in md

    table = summary_table(tmp_path)
    assert "bfcl_simple_python" in table and "0.000 (-1.000) !" in table
    html = write_run_report(tmp_path).read_text()
    assert "bfcl_multi_turn_base" in html
