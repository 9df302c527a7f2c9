"""The console shows the project's lines; engine logs go to every other handler (a round's
log.txt) and reach the console only with -v, or when they are errors."""
import logging
import sys

import pytest

from pipeline import console


@pytest.fixture
def log_txt(tmp_path):
    handler = logging.FileHandler(tmp_path / "log.txt")
    logging.getLogger().addHandler(handler)
    yield tmp_path / "log.txt"
    logging.getLogger().removeHandler(handler)
    handler.close()
    for h in [h for h in logging.getLogger().handlers if h.get_name() == console.HANDLER]:
        logging.getLogger().removeHandler(h)


def emit():
    logging.getLogger("toolsmith").info("rollouts: 6 rollouts, 2 verified successes")
    logging.getLogger("vllm.engine.core").info("Automatically detected platform cpu.")
    logging.getLogger("peft.tuners").warning("a trainer warning")
    logging.getLogger("vllm.engine.core").error("EngineCore failed to start")


@pytest.mark.parametrize("vllm_configured_first", [False, True])
@pytest.mark.parametrize("verbose", [False, True])
def test_engine_logs_go_to_log_txt_and_to_the_console_only_with_verbose(
        verbose, vllm_configured_first, log_txt, capsys, monkeypatch):
    if vllm_configured_first:   # as vLLM's import does when nothing turned it off first, at
        own = logging.StreamHandler(sys.stdout)   # the level VLLM_LOGGING_LEVEL names
        monkeypatch.setattr(logging.getLogger("vllm"), "handlers", [own])
        monkeypatch.setattr(logging.getLogger("vllm"), "propagate", False)
        for name in ("vllm", "vllm.engine.core"):
            logger = logging.getLogger(name)
            monkeypatch.setattr(logger, "level", logger.level)   # restored after the test
            logger.setLevel(logging.WARNING)                      # setLevel clears the caches
    console.setup(verbose=verbose)
    console.setup(verbose=verbose)   # a second call replaces the handler, no doubled lines
    emit()
    err = capsys.readouterr().err
    assert err.count("rollouts: 6 rollouts, 2 verified successes") == 1
    assert err.count("EngineCore failed to start") == 1            # errors always show
    assert ("Automatically detected platform" in err) is verbose
    assert ("a trainer warning" in err) is verbose
    saved = log_txt.read_text()
    for line in ("rollouts: 6 rollouts", "Automatically detected platform", "a trainer warning",
                 "EngineCore failed to start"):
        assert line in saved


def test_run_takes_verbose():
    from pipeline.cli import build_parser
    assert build_parser().parse_args(["run", "--preset", "tiny", "-v"]).verbose is True
    assert build_parser().parse_args(["run", "--preset", "tiny"]).verbose is False


def test_engine_processes_write_to_log_txt_not_the_console(log_txt, monkeypatch, capfd):
    """vLLM's engine process prints through Python's bare last-resort handler (a hundred
    weight-loading warnings per start): a process started while the quiet console holds a
    log file writes there for its whole life; this process's own stderr is back afterwards."""
    import subprocess

    from engine.sampling.vllm_backend import child_output, quiet_log_file
    monkeypatch.setenv("VLLM_CONFIGURE_LOGGING", "1")
    assert quiet_log_file() is None                       # verbose: vLLM prints as it does
    monkeypatch.setenv("VLLM_CONFIGURE_LOGGING", "0")
    assert quiet_log_file() == str(log_txt)
    code = ("import logging, sys, time; logging.getLogger('vllm').warning('Attempted to load "
            "weight'); print('banner'); sys.stdout.flush(); time.sleep(1); "
            "print('later', file=sys.stderr)")
    with child_output(quiet_log_file()):
        child = subprocess.Popen([sys.executable, "-c", code])
    print("after the block", file=sys.stderr)
    child.wait(timeout=60)
    saved, err = log_txt.read_text(), capfd.readouterr().err
    for line in ("Attempted to load weight", "banner", "later"):   # even after the block
        assert line in saved and line not in err
    assert "after the block" in err and "after the block" not in saved
