"""The config reference (`pipeline config`, docs/config.md) comes from the settings classes."""
from pathlib import Path
from typing import Literal

from pipeline import config_reference as ref
from pipeline.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "config.md"


def test_every_key_has_a_type_a_default_and_help():
    keys = ref.all_keys()
    paths = [k.path for k in keys]
    assert len(paths) == len(set(paths))
    missing = [k.path for k in keys if not k.help.strip()]
    assert not missing, f"add Field(description=...) to {missing}"
    by_path = {k.path: k for k in keys}
    # each built-in round under its own name, with its recipe's own defaults
    assert by_path["rounds.grounding.require_plan"].default == "false"
    assert by_path["rounds.plan_finish.require_plan"].default == "true"
    assert by_path["rounds.rl_polish.grpo.group_size"].default == "4"
    assert by_path["rounds.grounding.sft.lora.r"].type == "int"
    assert by_path["rounds.self_improve.pool"].type == "mapping | null"
    assert "rounds.self_improve.pool.k_probe" in by_path
    assert "rounds.rl_polish.sft" not in by_path          # the RL recipe takes no sft key
    # a default that depends on the machine says so instead of this machine's value
    assert by_path["rounds.grounding.sft.bf16"].default.startswith("true where")


def test_type_names_read_as_yaml():
    assert ref.type_name(Literal["stop", "skip"]) == '"stop" | "skip"'
    assert ref.type_name(dict[str, int]) == "dict[str, int]"
    assert ref.type_name(int | None) == "int | null"


def test_docs_config_md_is_current():
    want = ref.markdown(ref.all_keys())
    assert DOC.read_text() == want, ("docs/config.md is stale: run "
                                     "`pipeline config --markdown > docs/config.md`")


def test_cli_prints_the_reference(capsys):
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("rounds.grounding.sft.lr "))
    assert "float" in line and "default 0.0002" in line and "peak learning rate" in line
    assert main(["config", "--markdown"]) == 0
    assert capsys.readouterr().out == DOC.read_text()
