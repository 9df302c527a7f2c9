"""A run starts only on inputs that check out, writes nothing before, promotes in one atomic
step, gates a `--from` round against its start model, records its machine, and says the state
is intact when the disk refuses a write."""
from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from pipeline import config
from pipeline.cli import main
from rounds.grounding import GroundingSettings
from rounds.common import Candidate


class Copy:
    """A round recipe that trains nothing: its candidate is a copy of the start model (the
    relaxed tiny gate promotes a tie). Keeps the tests about the loop, not about training."""
    SETTINGS = GroundingSettings

    @staticmethod
    def run(ctx) -> Candidate:
        out = ctx.dir / "model"
        if not out.exists():
            shutil.copytree(ctx.start_model, out)
        return Candidate(out, {"copied": str(ctx.start_model)})


COPY = Copy()
QUICK = ["--no-progress", "--round", "1", "-o", "rounds.grounding.recipe=tests.test_run_start:COPY",
         "-o", "export.enabled=false",
         "-o", "canaries.sizes={reasoning: 1, recovery: 1, single_turn: 2, multi_turn: 1, "
               "irrelevance: 1}", "-o", "canaries.max_new_tokens=8"]


def _existing_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.yaml").write_text("name: earlier\n")
    (run / "state.json").write_text(json.dumps(  # done: a start that got through does nothing
        {"rounds": {str(n): {"status": "promoted"} for n in range(1, 6)}}))
    return run


def _snapshot(run: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file()}


def test_a_model_without_safetensors_is_refused_before_any_write(tmp_path, tiny_model, capsys):
    run = _existing_run(tmp_path)
    before = _snapshot(run)
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    shutil.copy(tiny_model / "config.json", no_weights)
    assert main(["run", "--preset", "tiny", "--run-dir", str(run), "-o",
                 f"model={no_weights}"]) == 2
    err = capsys.readouterr().err
    assert "model:" in err and "safetensors" in err and "Traceback" not in err
    assert _snapshot(run) == before  # run.yaml and state.json untouched, no lock file


def test_a_missing_canary_file_is_refused_before_the_run_directory_exists(tmp_path, capsys):
    run = tmp_path / "fresh"
    assert main(["run", "--preset", "tiny", "--run-dir", str(run), "-o",
                 f"canaries.files=[{tmp_path / 'gone-gsm8k.jsonl'}]"]) == 2
    assert "canaries.files[0]" in capsys.readouterr().err
    assert not run.exists()


@pytest.mark.parametrize("override, key", [
    ("canaries.sizes.reasoning=0", "canaries.sizes"),
    ("canaries.sizes.multi_turn=-3", "canaries.sizes"),
    ("rounds.grounding.tasks.single=-2", "rounds.grounding"),
    ("canaries.max_new_tokens=0", "canaries.max_new_tokens"),
    ("model=tiny:abc", "tiny:W takes a width"),
])
def test_bad_sizes_are_refused_with_rc_2(override, key, tmp_path, capsys):
    run = tmp_path / "r"
    dry = ["--dry-run"] if not override.startswith("model=") else []  # (model: at the start)
    assert main(["run", "--preset", "tiny", "--run-dir", str(run), "-o", override, *dry]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err
    assert not run.exists()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_refused_write_says_the_state_is_intact(code, tmp_path, monkeypatch, capsys):
    """A full disk or a read-only run directory: rc 2, no traceback, and the message says the
    state is intact, which it is. Read-only by chmod where that binds (not as root); as root
    the write layer is made to fail with the same error instead."""
    run = _existing_run(tmp_path)
    before = _snapshot(run)
    if code == errno.EROFS and os.geteuid() != 0:
        run.chmod(0o555)
    else:
        real = os.replace

        def refuse(src, dst, *a, **kw):
            if str(dst).startswith(str(run)):
                raise OSError(code, os.strerror(code), str(dst))
            return real(src, dst, *a, **kw)
        monkeypatch.setattr(os, "replace", refuse)
    try:
        rc = main(["run", "--preset", "tiny", "--run-dir", str(run), "--no-progress"])
    finally:
        run.chmod(0o755)
    err = capsys.readouterr().err
    assert rc == 2 and "intact" in err and "Traceback" not in err
    after = _snapshot(run)
    after.pop(".lock", None)
    assert after == before and not list(run.glob("*.tmp"))


def test_a_kill_between_promoted_json_and_the_round_status_resumes_promoted(tmp_path,
                                                                            monkeypatch):
    """Before: promoted.json named round 1 while state.json had no status, so the resumed
    round gated against itself, rewrote its gate report and came out rejected."""
    from engine.runstore import RunStore
    run = tmp_path / "run"

    class Killed(BaseException):
        pass

    real = RunStore.promote

    def promote_then_die(self, info):
        real(self, info)
        raise Killed
    monkeypatch.setattr(RunStore, "promote", promote_then_die)
    with pytest.raises(Killed):
        main(["run", "--preset", "tiny", "--run-dir", str(run), *QUICK])
    monkeypatch.setattr(RunStore, "promote", real)
    report = run / "round-1-grounding" / "gate" / "report.json"
    written = report.read_bytes()
    assert main(["run", "--preset", "tiny", "--run-dir", str(run), *QUICK]) == 0
    state = json.loads((run / "state.json").read_text())
    assert state["rounds"]["1"]["status"] == "promoted"
    assert report.read_bytes() == written  # the gate did not run again
    promoted = json.loads((run / "promoted.json").read_text())
    assert promoted["round"] == 1 and len(promoted["history"]) == 1  # promoted once
    assert state["promotion"]["published"] is True


def test_a_round_from_a_model_is_gated_against_that_model(tmp_path, tiny_model):
    run = tmp_path / "run"
    assert main(["run", "--preset", "tiny", "--run-dir", str(run), *QUICK,
                 "--from", str(tiny_model)]) == 0
    report = json.loads((run / "round-1-grounding" / "gate" / "report.json").read_text())
    meta = report.get("meta", report)
    assert meta["baseline_model"] == str(tiny_model)
    assert meta["candidate_model"] == str(run / "round-1-grounding" / "model")
    evals = sorted(p.name for p in (run / "evals").iterdir())
    assert evals and all(e.startswith("from-") for e in evals)  # the base was not evaluated


def test_a_run_records_its_machine_and_report_prints_it(tmp_path, capsys):
    from pipeline.loop import open_run
    from engine.runstore import RunStore
    cfg = config.load(preset="tiny", overrides=[f"run_dir={tmp_path / 'run'}"])
    open_run(cfg, RunStore(cfg.directory()), force=False, progress=False)
    open_run(cfg, RunStore(cfg.directory()), force=False, progress=False)  # a resume
    import torch
    machines = json.loads((tmp_path / "run" / "state.json").read_text())["machines"]
    assert len(machines) == 1  # the same machine is recorded once
    m = machines[0]
    assert m["capability"] == torch.backends.cpu.get_cpu_capability()
    assert m["cores"] == len(os.sched_getaffinity(0)) and m["cpu"]
    assert m["versions"]["torch"] == torch.__version__.split("+")[0] or \
        m["versions"]["torch"] == torch.__version__
    assert {"vllm", "trl", "transformers", "peft"} <= set(m["versions"])
    assert main(["report", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert f"machine: {m['cpu']} ({m['capability']}), {m['cores']} cores; torch " in out
