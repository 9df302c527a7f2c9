"""`pipeline eval --bfcl` end to end on a tiny random model (real SmolLM2 tokenizer, the
transformers backend): every multi-turn category plays all its turns in BFCL's own classes,
single-turn categories go through the rollout driver, BFCL's checkers score, the report and
its files are written."""
import importlib.util
import json

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval is not installed (see .ci/setup)")


class Recording:
    """The real backend, with the prompts it was sent kept for inspection."""

    def __init__(self, backend):
        self.inner, self.name, self.prompts = backend, backend.name, []
        self.tokenizer = backend.tokenizer

    def generate(self, prompts, params, seeds, conversations=None):
        self.prompts += prompts
        return self.inner.generate(prompts, params, seeds, conversations)

    def close(self):
        self.inner.close()


@pytest.fixture(scope="module")
def backend(tiny_model):
    from engine.sampling import make_backend
    b = Recording(make_backend("transformers", tiny_model, dtype="float32"))
    yield b
    b.close()


def test_tiny_model_plays_every_multi_turn_category(backend, tmp_path):
    from data.bfcl import ADDED_FUNCTIONS_PROMPT, MULTI_TURN, live_instances, load_multi_turn
    from gates.bfcl import evaluate_bfcl, params_for, select
    report = evaluate_bfcl(backend, list(MULTI_TURN), model="tiny:64", limit=1, seed=3,
                           params=params_for(max_tokens=6), out_dir=tmp_path)
    assert [r["category"] for r in report["categories"]] == list(MULTI_TURN)
    for row in report["categories"]:
        category = row["category"]
        entry = load_multi_turn(category)[select(200, 1, 3, category)[0]]
        result, = [json.loads(line) for line in (tmp_path / f"{category}.jsonl").open()]
        assert result["id"] == entry.id
        assert len(result["finishes"]) == len(entry.turns)  # every user turn was played
        users = [m["content"] for m in result["messages"] if m["role"] == "user"]
        assert len(users) == len(entry.turns)
        if entry.held_out:
            assert users[min(entry.held_out)] == ADDED_FUNCTIONS_PROMPT
        assert row["n"] == 1 and 0.0 <= row["accuracy"] <= 1.0 and row["wall_s"] > 0
        lo, hi = row["ci95"]
        assert 0.0 <= lo <= row["accuracy"] <= hi <= 1.0
        assert result["valid"] or result["kind"]  # a failure names its kind
    assert any('"name": "cd"' in p for p in backend.prompts)  # BFCL's tools were declared
    assert live_instances() == 0
    assert (tmp_path / "report.json").exists() and "published, not re-run here" in \
        (tmp_path / "report.md").read_text()


def test_tiny_model_single_turn_scored_by_bfcl(backend):
    from data.bfcl import SINGLE_TURN
    from gates.bfcl import evaluate_bfcl, params_for
    report = evaluate_bfcl(backend, list(SINGLE_TURN), limit=1, params=params_for(max_tokens=6))
    for row in report["categories"]:
        assert row["n"] == 1 and row["project_checker_agrees"] == 1
        if "irrelevance" not in row["category"]:
            assert row["published"]["note"] == "published, not re-run here"


def test_cli_eval_bfcl(tiny_model, tmp_path, capsys):
    from pipeline.cli import main
    rc = main(["eval", "tiny:64", "--bfcl", "simple_python,live_irrelevance", "--limit", "2",
               "--seed", "1", "--preset", "tiny", "--out", str(tmp_path),
               "-o", "canaries.max_new_tokens=8", "-o", "sampler.max_context_tokens=8192"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "simple_python" in out and "live_irrelevance" in out and "95% CI" in out
    assert "published, not re-run here" in out and "BFCL v4" in out
    report = json.loads((tmp_path / "bfcl" / "report.json").read_text())
    assert report["seed"] == 1 and report["max_context_tokens"] == 8192
    assert main(["eval", "tiny:64", "--bfcl", "nonsense", "--preset", "tiny"]) == 2


def test_wilson_interval_and_published_columns():
    from gates.bfcl_report import published, wilson
    # 0 of 5: centre = (z^2/2n)/(1+z^2/n) = 0.38416/1.76832 = 0.21724, half the same -> [0, 0.4345]
    lo, hi = wilson(0, 5)
    assert lo == 0.0 and hi == pytest.approx(0.4345, abs=1e-4)
    # 2 of 10: p=0.2, den=1.38416, centre=0.39208/1.38416=0.28326, half=0.22657
    lo, hi = wilson(2, 10)
    assert (lo, hi) == (pytest.approx(0.0567, abs=1e-4), pytest.approx(0.5098, abs=1e-4))
    base = published("multi_turn_base")
    assert base["scores"]["xLAM-2-1b-fc-r"] == 45.5 and base["scores"]["Qwen3-0.6B (FC)"] is None
    assert published("live_parallel")["column"] == "live"
    assert published("live_irrelevance")["column"] is None
    assert {published(c)["bfcl_version"] for c in ("simple_python", "irrelevance")} == {"BFCL v4"}
