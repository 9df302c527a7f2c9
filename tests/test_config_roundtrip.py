"""A run's saved config replays the run: `dump` writes every key (round-specific ones too),
loading the dump gives the same config, and no secret is ever written in clear."""
from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from pipeline import config
from pipeline.cli import main

ALL_KEYS = """
name: every-key
run_dir: {run}
model: tiny:64
trust_remote_code: false
seed: 7
sampler: {{backend: transformers, options: {{max_batch: 8}}, max_context_tokens: 3000}}
canaries:
  version: v9
  k: 3
  sizes: {{reasoning: 4, recovery: 5, single_turn: 6, multi_turn: 7, irrelevance: 2}}
  max_new_tokens: 40
  temperature: 0.3
  files: [{gsm}]
  bfcl: {{simple_python: 3}}
gate:
  keep_se: 1.5
  drop_se: 2.5
  allow_tie: true
  drop_abs: {{reasoning: 0.1}}
  floors: {{single_turn: 0.2, bfcl_simple_python: 0.1}}
  anchored: [irrelevance]
  relaxed: true
  on_fail: skip
export: {{enabled: false, quant: Q8_0, load_check: false, check_items: 3, min_agreement: 0.25,
         check_max_tokens: 40, system: Be brief.}}
rounds:
  grounding:
    tasks: {{single: 3, chained: 1}}
    domains: [weather, currency]
    target: single_turn
    canaries: {{single_turn: 9}}
    drop_abs: {{recovery: 0.5}}
    k: 2
    temperature: 0.5
    top_p: 0.9
    max_new_tokens: 50
    require_plan: true
    oracle: true
    task_files: [{tasks}]
    filter: {{cap_per_task: 3, max_rows: 40, balance: [domain]}}
    sft: {{lr: 0.001, epochs: 2.0, max_steps: 3, batch_size: 2, grad_accum: 2, max_length: 512,
          packing: true, bf16: false, base_dtype: float32, seed: 3,
          logging_steps: 2, save_steps: 4, lora: {{r: 4, alpha: 8, dropout: 0.1,
          target_modules: [q_proj]}}}}
    teacher: {{file: {teacher}, verify: execute, model: t, api_key_env: T_KEY, k: 2}}
  plan_finish:
    enabled: false
    tasks: {{single: 2}}
    require_plan: false
    pool: {{k_probe: 1, k_max: 3, budget: 9, unsolved_weight: 0.25,
           train_on: [frontier, solved], always_train: [irrelevance]}}
  long_context: {{tasks: {{long_context: 1}}, context_tokens: [700, 900],
                 canaries: {{long_context: 2}}, replay: {{share: 0.2}}, offered_tools: 4}}
  self_improve: {{tasks: {{chained: 1}}, iterations: 2, k: 3}}
  rl_polish:
    tasks: {{single: 2}}
    grpo: {{group_size: 3, tasks_per_step: 2, beta: 0.0, epsilon: 0.1, lr: 0.0001, max_steps: 2,
           max_new_tokens: 20, max_turns: 3, temperature: 0.9, drop_zero_variance: false,
           bf16: false, seed: 5, logging_steps: 2, save_steps: 3}}
    frontier: {{enabled: false, probe_k: 3, min_tasks: 2}}
"""


@pytest.fixture
def every_key(tmp_path):
    """A config file that sets every section, most keys away from their default."""
    from data.tasks import make
    task = make("single", 0, namespace="roundtrip")
    (tmp_path / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    (tmp_path / "teacher.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n")
    (tmp_path / "gsm.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "#### 2"})
                                        + "\n")
    path = tmp_path / "every.yaml"
    path.write_text(ALL_KEYS.format(run=tmp_path / "run", gsm=tmp_path / "gsm.jsonl",
                                    tasks=tmp_path / "tasks.jsonl",
                                    teacher=tmp_path / "teacher.jsonl"))
    return path


def _fields(model: BaseModel, dumped: dict, where: str = "") -> list[str]:
    """Keys of `model` (recursively) missing from its dump."""
    missing = []
    for name in type(model).model_fields:
        if name not in dumped:
            missing.append(where + name)
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            missing += _fields(value, dumped[name], f"{where}{name}.")
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, BaseModel):
                    missing += _fields(v, dumped[name][k], f"{where}{name}.{k}.")
    return missing


def _roundtrip(cfg: config.RunConfig, tmp_path) -> config.RunConfig:
    saved = tmp_path / "run.yaml"
    saved.write_text(config.dump(cfg))
    return config.load(saved)


@pytest.mark.parametrize("preset", sorted(config.PRESETS))
def test_every_preset_dumps_and_loads_to_the_same_config(preset, tmp_path):
    cfg = config.load(preset=preset)
    again = _roundtrip(cfg, tmp_path)
    assert again == cfg
    assert config.dump(again) == config.dump(cfg)
    import yaml
    assert _fields(cfg, yaml.safe_load(config.dump(cfg))) == []
    # the round-specific keys the preset sets survive (what the old dump lost)
    assert again.rounds["grounding"].oracle == cfg.rounds["grounding"].oracle
    assert again.rounds["grounding"].sft == cfg.rounds["grounding"].sft


def test_a_config_with_every_key_dumps_and_loads_to_the_same_config(every_key, tmp_path):
    import yaml
    cfg = config.load(every_key)
    dumped = yaml.safe_load(config.dump(cfg))
    assert _fields(cfg, dumped) == []
    g = dumped["rounds"]["grounding"]
    assert g["teacher"]["verify"] == "execute" and g["task_files"] and g["oracle"] is True
    assert g["sft"]["lora"]["r"] == 4 and g["max_new_tokens"] == 50
    assert dumped["rounds"]["plan_finish"]["pool"]["budget"] == 9
    assert dumped["rounds"]["rl_polish"]["frontier"]["probe_k"] == 3
    assert _roundtrip(cfg, tmp_path) == cfg


def test_dry_run_prints_the_round_keys(tmp_path, capsys):
    assert main(["run", "--preset", "tiny", "--run-dir", str(tmp_path / "r"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    printed = yaml_block(out)
    assert printed["rounds"]["grounding"]["oracle"] is True
    assert printed["rounds"]["grounding"]["sft"]["max_steps"] == 2
    assert printed["rounds"]["rl_polish"]["grpo"]["group_size"] == 2


def yaml_block(out: str) -> dict:
    import yaml
    return yaml.safe_load(out.split("\nplan for ")[0])


@pytest.mark.parametrize("key", ["api_key", "OPENAI_API_KEY", "access_token", "password",
                                 "client_secret", "authorization"])
def test_secret_looking_sampler_options_are_refused(key, tmp_path, capsys):
    """A key in sampler.options would be written in clear to run.yaml: refused, naming the key
    and pointing at api_key_env; nothing is written."""
    with pytest.raises(config.ConfigError) as err:
        config.load(preset="tiny", overrides=[f"sampler.options.{key}=sk-live-123"])
    assert f"sampler.options.{key}" in str(err.value) and "api_key_env" in str(err.value)
    assert main(["run", "--preset", "tiny", "--run-dir", str(tmp_path / "r"),
                 "-o", f"sampler.options.{key}=sk-live-123"]) == 2
    assert "api_key_env" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_ordinary_sampler_options_pass():
    cfg = config.load(preset="tiny", overrides=["sampler.options.max_num_batched_tokens=512",
                                                "sampler.options.api_key_env=MY_KEY"])
    assert cfg.sampler.options == {"max_num_batched_tokens": 512, "api_key_env": "MY_KEY"}
    assert "MY_KEY" in config.dump(cfg)
