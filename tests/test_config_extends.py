"""A user config builds on a preset (`extends:` or `--preset X CONFIG`) and overrides a few keys."""
from __future__ import annotations

import pytest
import yaml

from pipeline import config
from pipeline.cli import main


def write(path, text):
    path.write_text(text)
    return path


def test_extends_a_preset_and_merges_mappings(tmp_path):
    mine = write(tmp_path / "mine.yaml", """
extends: tiny
name: mine
canaries: {sizes: {multi_turn: 5}}
rounds:
  grounding: {sft: {lr: 0.001}}
  sixth: {recipe: plan_finish, tasks: {chained: 2}}
""")
    cfg, tiny = config.load(mine), config.load(preset="tiny")
    assert cfg.name == "mine" and cfg.model == tiny.model == "tiny:256"
    # a mapping merges key by key: the other canary sizes and sft keys stay the preset's
    assert cfg.canaries.sizes == {**tiny.canaries.sizes, "multi_turn": 5}
    sft, base = cfg.rounds["grounding"].sft, tiny.rounds["grounding"].sft
    assert sft.lr == 0.001 and (sft.max_steps, sft.batch_size) == (base.max_steps, 2)
    assert cfg.rounds["grounding"].tasks == tiny.rounds["grounding"].tasks
    assert list(cfg.rounds) == [*tiny.rounds, "sixth"]            # a new round runs last
    assert cfg.gate == tiny.gate


def test_preset_beside_a_config_file_is_its_base(tmp_path):
    mine = write(tmp_path / "mine.yaml", "rounds: {rl_polish: {enabled: false}}\n")
    cfg = config.load(mine, preset="tiny")
    assert cfg.model == "tiny:256" and cfg.rounds["rl_polish"].enabled is False
    assert cfg.rounds["plan_finish"].tasks == config.load(preset="tiny").rounds[
        "plan_finish"].tasks
    # without a base the file alone is the config (built-in defaults underneath)
    assert config.load(mine).model == "embedded:smollm2-135m"


def test_extends_a_file_relative_to_the_one_naming_it(tmp_path):
    (tmp_path / "team").mkdir()
    write(tmp_path / "team" / "base.yaml", "extends: tiny\nseed: 3\nexport: {quant: Q8_0}\n")
    mine = write(tmp_path / "mine.yaml", "extends: team/base.yaml\nexport: {check_items: 2}\n")
    cfg = config.load(mine, overrides=["export.min_agreement=0.25"])
    assert (cfg.seed, cfg.model) == (3, "tiny:256")
    assert (cfg.export.quant, cfg.export.check_items, cfg.export.min_agreement) == \
        ("Q8_0", 2, 0.25)


@pytest.mark.parametrize("text, preset, message", [
    ("extends: nosuch\n", None, "extends: 'nosuch' is neither a preset"),
    ("extends: [tiny]\n", None, "extends: give a preset name"),
    ("extends: default\n", "tiny", "extends: 'default', but --preset tiny"),
    ("extends: loop.yaml\n", None, "a cycle"),
])
def test_bad_extends_names_the_file(tmp_path, text, preset, message):
    path = write(tmp_path / "loop.yaml", text)
    with pytest.raises(config.ConfigError) as err:
        config.load(path, preset=preset)
    assert "loop.yaml" in str(err.value) and message in str(err.value)


def test_cli_runs_a_config_on_a_preset(tmp_path, capsys):
    mine = write(tmp_path / "mine.yaml", "name: mine\nrounds: {grounding: {k: 3}}\n")
    assert main(["run", str(mine), "--preset", "tiny", "--run-dir", str(tmp_path / "r"),
                 "--dry-run"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out.split("plan for")[0])
    assert (resolved["name"], resolved["model"]) == ("mine", "tiny:256")
    assert resolved["rounds"]["grounding"]["k"] == 3
    assert resolved["rounds"]["grounding"]["tasks"] == config.load(preset="tiny").rounds[
        "grounding"].tasks
    assert main(["run", str(mine), "--preset", "nosuch", "--dry-run"]) == 2
    assert "unknown preset 'nosuch'" in capsys.readouterr().err


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_the_resolved_config_keeps_every_round_key_and_reloads(tmp_path, preset):
    cfg = config.load(preset=preset, overrides=["rounds.grounding.k=3"])
    run_yaml = write(tmp_path / "run.yaml", config.dump(cfg))
    dumped = yaml.safe_load(run_yaml.read_text())
    assert dumped["rounds"]["grounding"]["k"] == 3
    assert dumped["rounds"]["rl_polish"]["grpo"]["group_size"] == \
        cfg.rounds["rl_polish"].grpo.group_size
    pooled = [name for name, rs in cfg.rounds.items() if getattr(rs, "pool", None)]
    assert all(dumped["rounds"][name]["k"] == 1 for name in pooled)   # its default: reads back
    assert pooled or preset == "tiny"
    assert config.load(run_yaml) == cfg
