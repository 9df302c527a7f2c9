"""Config errors fail before any work, naming file and key; the CLI lists every subcommand."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import config, recipes
from pipeline.cli import main
from engine.runstore import RunLocked, RunStore


def test_every_shipped_config_validates():
    assert set(config.PRESETS) >= {"default", "tiny"}
    for name in config.PRESETS:
        cfg = config.load(preset=name)
        assert list(cfg.rounds) == list(recipes.BUILTIN)
        assert cfg.rounds["rl_polish"].grpo is not None
    assert config.load(preset="tiny").gate.relaxed is True
    assert config.load(preset="default").gate.relaxed is False


@pytest.mark.parametrize("override, message", [
    ("rounds.grounding.sft.lrr=1", "rounds.grounding.sft.lrr: unknown key"),
    ("canaries.k=many", "canaries.k: Input should be a valid integer"),
    ("rounds.plan_finish.tasks={dance: 3}", "unknown task kind(s) ['dance']"),
    ("gate.floors={speed: 0.5}", "gate.floors"),
    ("rounds.extra={}", "rounds.extra: no built-in recipe named 'extra'"),
])
def test_bad_config_names_file_and_key(override, message):
    with pytest.raises(config.ConfigError) as err:
        config.load(preset="tiny", overrides=[override])
    assert "tiny.yaml" in str(err.value) and message in str(err.value)


def test_missing_config_file_and_dry_run(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsampler: {backend: carrier_pigeon}\n")
    assert main(["run", str(bad)]) == 2
    assert "bad.yaml: sampler.backend" in capsys.readouterr().err
    assert main(["run", "--preset", "tiny", "--run-dir", str(tmp_path / "r"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "5 rl_polish" in out and "relaxed: true" in out
    assert not (tmp_path / "r").exists()  # a dry run does no work


def test_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for cmd in ("run", "status", "report", "eval", "export", "chat", "bench", "tasks"):
        assert cmd in out


def test_tasks_command_prints_tools_and_truth(capsys):
    assert main(["tasks", "--kind", "chained", "--n", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("prompt :") == 5 and out.count("answer :") == 5 and "tools  :" in out


def test_lock_keeps_a_second_writer_out(tmp_path):
    a, b = RunStore(tmp_path), RunStore(tmp_path)
    a.lock()
    with pytest.raises(RunLocked, match="is in use by pid"):
        b.lock()
    a.unlock()
    b.lock()
    b.unlock()


def test_a_run_directory_resolves_to_its_promoted_model(tmp_path):
    """`pipeline eval RUN` / `pipeline export RUN` use the run's promoted model; a directory
    with neither config.json nor promoted.json is a clear error."""
    import json

    from engine.models import resolve
    model = tmp_path / "run" / "round-1-grounding" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (tmp_path / "run" / "promoted.json").write_text(json.dumps({"round": 1, "model": str(model)}))
    assert resolve(tmp_path / "run") == model
    with pytest.raises(FileNotFoundError, match="nor a run's promoted.json"):
        resolve(tmp_path / "run" / "round-1-grounding")


def test_a_run_started_elsewhere_resolves_from_any_directory(tmp_path, monkeypatch):
    """promoted.json records the model relative to where the run started (`runs/x/...`);
    read from another directory, the model is found inside the run."""
    import json

    from engine.models import resolve
    model = tmp_path / "runs" / "x" / "round-1-grounding" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (tmp_path / "runs" / "x" / "promoted.json").write_text(
        json.dumps({"round": 1, "model": "runs/x/round-1-grounding/model"}))
    monkeypatch.chdir(model)
    assert resolve(tmp_path / "runs" / "x") == model
    monkeypatch.chdir(tmp_path)
    assert resolve("runs/x") == Path("runs/x/round-1-grounding/model")
