"""Commands other than `run` refuse bad input the way `run` does, before any work: rc 2 and
an error that names the domain, module or model and what to do; never a traceback."""
from __future__ import annotations

import importlib.util

import pytest

from pipeline.cli import main
from tests.test_user_domain import STOCKS

RAISER = STOCKS + '''
RAISER = Domain("raiser", TOOLS[:1], {"get_price": get_price},  # its maker crashes
                {"single": lambda rng: 1 / 0})
'''


@pytest.fixture
def user_domains(tmp_path, monkeypatch, forget_domains):
    (tmp_path / "my_domains.py").write_text(RAISER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_domains"


@pytest.mark.parametrize("domain, message", [
    ("LIAR", "domain 'my_domains:LIAR' failed validation: domain liar, kind single: the "
             "oracle of task 0 scores"),
    ("RAISER", "domain 'my_domains:RAISER' failed validation: domain raiser, kind single: "
               "the maker failed: ZeroDivisionError"),
])
def test_tasks_runs_the_domain_checks_of_run(user_domains, domain, message, capsys):
    assert main(["tasks", "--kind", "single", "--n", "1", "--domains",
                 f"{user_domains}:{domain}"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "prompt :" not in captured.out


def test_tasks_with_a_good_user_domain_still_prints(user_domains, capsys):
    assert main(["tasks", "--kind", "single", "--n", "2", "--domains", user_domains]) == 0
    assert capsys.readouterr().out.count("prompt :") == 2


def test_chat_with_an_unknown_domain_module_is_a_named_error(tmp_path, capsys):
    assert main(["chat", str(tmp_path / "model.gguf"), "--prompt", "hi",
                 "--domains", "bad.module"]) == 2
    err = capsys.readouterr().err
    assert "bad.module" in err and "Traceback" not in err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_eval_refuses_a_head_size_vllm_cpu_cannot_run(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("vLLM on a GPU runs head size 16")
    out = tmp_path / "eval"
    assert main(["eval", "tiny:64", "--bfcl", "simple_python", "--limit", "1",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "head size 16" in err and "--preset tiny" in err and "Traceback" not in err
    assert not out.exists()  # refused before any engine or evaluation started
