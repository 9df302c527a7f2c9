"""Per-round canary sizes (`rounds.<name>.canaries`): a round's gate can ask for a large
target canary while the others stay small, and items already rolled out for a model are
reused when a later gate asks for more of them.

The evaluation tests count every generate call of a hand-written backend, so they show which
items were sampled and which were read back from disk."""
import pytest

from data.trajectory import Trajectory
from data.jsonl import read_all
from gates.canaries import build_suites, builtin_suite
from pipeline import config
from pipeline.config import ConfigError
from pipeline.recipes import CANARIES
from engine.sampling.base import Completion
from tests.test_bfcl_gate import opener   # records each engine open


def load(*overrides):
    return config.load(preset="tiny", overrides=list(overrides))


def test_round_sizes_override_the_run_sizes():
    cfg = load("canaries.sizes={single_turn: 2, multi_turn: 3, recovery: 2}",
               "rounds.plan_finish.canaries={multi_turn: 30}",
               "rounds.self_improve.canaries={recovery: 40, reasoning: 5}")
    pf, si = cfg.rounds["plan_finish"], cfg.rounds["self_improve"]
    assert cfg.canaries.sizes_for(pf) == {"single_turn": 2, "multi_turn": 30, "recovery": 2}
    assert cfg.canaries.size("multi_turn", pf) == 30 and cfg.canaries.size("multi_turn") == 3
    assert cfg.canaries.sizes_for(si) == {"single_turn": 2, "multi_turn": 3, "recovery": 40,
                                          "reasoning": 5}
    assert cfg.canaries.sizes_for(cfg.rounds["grounding"]) == cfg.canaries.sizes
    assert cfg.canaries.largest_sizes(cfg.rounds.values()) == {  # long_context: tiny round 3's
        "single_turn": 2, "multi_turn": 30, "recovery": 40, "reasoning": 5, "long_context": 2}


def test_a_round_may_size_its_own_target():
    # reasoning has no items run-wide; the round that targets it gives it some
    cfg = load("canaries.sizes={single_turn: 2, multi_turn: 3, recovery: 2}",
               "rounds.long_context.target=reasoning",
               "rounds.long_context.canaries={reasoning: 80}")
    assert cfg.canaries.size("reasoning", cfg.rounds["long_context"]) == 80
    with pytest.raises(ConfigError, match=r"rounds.long_context.target: canary 'reasoning'"):
        load("canaries.sizes={single_turn: 2, multi_turn: 3, recovery: 2}",
             "rounds.long_context.target=reasoning")


@pytest.mark.parametrize("override, message", [
    ("rounds.plan_finish.canaries={multi_turns: 30}", r"unknown built-in canary.*multi_turns"),
    ("rounds.plan_finish.canaries={multi_turn: -1}", r"size must be >= 0"),
    ("rounds.plan_finish.canaries={bfcl_simple_python: 10}", r"sized in canaries.bfcl"),
])
def test_bad_round_sizes_name_the_round(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load(override)
    assert "plan_finish" in str(err.value)


@pytest.mark.parametrize("name", CANARIES)
def test_canaries_are_prefix_stable(name):
    """The first n items of a larger suite are the suite of n: a gate's small suite is a
    prefix of a later gate's large one (so rollouts carry over and decontamination at the
    largest size covers every round)."""
    small, large = builtin_suite(name, 7), builtin_suite(name, 30)
    assert large.items[:7] == small.items
    assert len({t.id for t in large.items}) == 30


def test_decontamination_covers_the_largest_round_sizes(tmp_path):
    from pipeline.loop import open_run, round_suites
    from engine.runstore import RunStore
    cfg = load(f"run_dir={tmp_path / 'r'}", "canaries.sizes={single_turn: 2, multi_turn: 3, "
               "recovery: 2}", "rounds.plan_finish.canaries={multi_turn: 30}")
    run = open_run(cfg, RunStore(cfg.directory()), force=False, progress=False)
    sizes = {s.name: len(s.items) for s in run.suites}
    assert sizes == {"single_turn": 2, "multi_turn": 30, "recovery": 2, "long_context": 2}
    far = builtin_suite("multi_turn", 30).items[-1]          # only the 30-item suite has it
    assert run.decontaminator.hit(far.prompt) is not None
    pf = {s.name: len(s.items) for s in round_suites(run, cfg.rounds["plan_finish"])}
    gr = {s.name: len(s.items) for s in round_suites(run, cfg.rounds["grounding"])}
    assert pf == {"single_turn": 2, "multi_turn": 30, "recovery": 2}  # long_context: round 3's
    assert gr == {"single_turn": 2, "multi_turn": 3, "recovery": 2}


class Counting:
    """A fake backend that answers "Done." and counts the conversations it was asked about."""
    name = "counting"

    def __init__(self):
        self.asked: list[str] = []

    def generate(self, prompts, params, seeds, conversations=None):
        self.asked += [m[0]["content"] for m, _ in conversations]
        return [Completion("Done.", [0], 2, "stop") for _ in prompts]

    def close(self):
        pass


def test_a_larger_gate_samples_only_the_new_items(tmp_path):
    from gates.gate import evaluate_model
    cfg = load("canaries.k=1", "canaries.max_new_tokens=16")
    opened, backend = [], Counting()
    out = tmp_path / "eval"

    def evaluate(sizes):
        return evaluate_model(cfg, tmp_path / "m", out, build_suites(sizes, "v1"),
                              progress=False, open_backend=opener(backend, opened))

    first = evaluate({"multi_turn": 4, "recovery": 3})
    assert len(opened) == 1 and len(backend.asked) == 7
    # a gate with a larger multi_turn canary: the 4 items already there are not sampled again
    second = evaluate({"multi_turn": 10, "recovery": 3})
    assert len(opened) == 2 and len(backend.asked) == 7 + 6
    assert second["suites"]["multi_turn"]["n_items"] == 10
    assert second["rollout"]["resumed"] == 7
    for item, row in first["suites"]["multi_turn"]["items"].items():
        assert second["suites"]["multi_turn"]["items"][item] == row
    # a smaller gate afterwards: everything is on disk, scored without starting an engine
    third = evaluate({"multi_turn": 2, "recovery": 3})
    assert len(opened) == 2 and len(backend.asked) == 13 and third["backend"] == "from-disk"
    assert third["suites"]["multi_turn"]["n_items"] == 2
    # ... and the 8 items it does not use are kept for a later, larger gate
    assert len(read_all(out / "rollouts.jsonl", Trajectory)) == 13
    fourth = evaluate({"multi_turn": 10, "recovery": 3})
    assert len(opened) == 2 and fourth["suites"]["multi_turn"] == second["suites"]["multi_turn"]


def test_other_sampling_settings_sample_everything_again(tmp_path):
    from gates.gate import evaluate_model
    opened, backend = [], Counting()
    suites = build_suites({"multi_turn": 3}, "v1")
    for tokens in (16, 24):
        cfg = load("canaries.k=1", f"canaries.max_new_tokens={tokens}")
        evaluate_model(cfg, tmp_path / "m", tmp_path / "e", suites, progress=False,
                       open_backend=opener(backend, opened))
    assert len(opened) == 2 and len(backend.asked) == 6


def test_dry_run_states_the_rounds_own_target_size(tmp_path, capsys):
    from pipeline.cli import main
    assert main(["run", "--preset", "tiny", "--run-dir", str(tmp_path / "r"), "--dry-run",
                 "-o", "gate.keep_se=2", "-o", "rounds.plan_finish.canaries={multi_turn: 100}"]) == 0
    plan = capsys.readouterr().out.split("plan for ")[1].splitlines()
    at = next(i for i, line in enumerate(plan) if " plan_finish " in line)
    assert "target=multi_turn   n=100  keep MDE=0.075 " in plan[at]
    assert "WARNING" not in plan[at + 1]
    self_improve = next(line for line in plan if " self_improve " in line)
    assert "target=recovery     n=3 " in self_improve          # the run-wide size
