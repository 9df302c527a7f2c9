"""README's snippets work as written: its `mypkg/*.py` modules import, and every YAML snippet
marked `# config: NAME` loads (presets extended, user domains validated, recipes resolved)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pipeline import config

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def snippets(lang: str, marker: str) -> list[tuple[str, str]]:
    """(name after the marker on the first line, text) of README's `lang` blocks."""
    out = []
    for block_lang, text in BLOCK.findall(README.read_text()):
        first = text.split("\n", 1)[0]
        if block_lang == lang and first.startswith(marker):
            out.append((first[len(marker):].strip().split()[0], text))
    return out


@pytest.fixture
def mypkg(tmp_path, monkeypatch, forget_domains):
    """README's `# mypkg/<file>.py` blocks written as a package on sys.path; the domains they
    register are forgotten afterwards, so other tests see only the built-in ones."""
    modules = snippets("python", "# mypkg/")
    for name, text in modules:
        path = tmp_path / "mypkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield [name for name, _ in modules]
    for mod in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[mod]


def test_readme_has_the_snippets_it_promises():
    names = [name for name, _ in snippets("yaml", "# config:")]
    assert {"small.yaml", "mine.yaml"} <= set(names)
    assert {"stocks.py", "rounds.py"} <= {n for n, _ in snippets("python", "# mypkg/")}


@pytest.mark.parametrize("name, text", snippets("yaml", "# config:"))
def test_readme_config_snippet_loads(name, text, mypkg, tmp_path):
    path = tmp_path / name
    path.write_text(text)
    cfg = config.load(path)
    assert cfg.rounds, name
    if name == "mine.yaml":   # the default plus a user domain and a sixth round
        assert list(cfg.rounds)[-1] == "sixth" and len(cfg.rounds) == 6
        assert "mypkg.stocks" in cfg.rounds["grounding"].domains
        assert cfg.rounds["sixth"].sft.max_steps == 20
        assert cfg.rounds["plan_finish"] == config.load(preset="default").rounds["plan_finish"]
