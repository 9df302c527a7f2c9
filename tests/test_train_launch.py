"""Shipped accelerate configs parse, and the documented launch line trains (one CPU process)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data.jsonl import write_atomic
from data.tasks import generate
from data.trajectory import Trajectory
from engine.models import tiny_model_dir

CONFIGS = Path(__file__).parents[1] / "engine" / "training" / "accelerate"


@pytest.mark.parametrize("name,kind", [("fsdp.yaml", "FSDP"),
                                       ("deepspeed_zero2.yaml", "DEEPSPEED")])
def test_accelerate_configs_parse(name, kind):
    from accelerate.commands.config.config_args import ClusterConfig
    cfg = ClusterConfig.from_yaml_file(str(CONFIGS / name))
    assert cfg.distributed_type.value == kind and cfg.mixed_precision == "bf16"
    assert "accelerate launch --config_file engine/training/accelerate/" + name in \
        (CONFIGS / name).read_text()


@pytest.mark.slow
def test_accelerate_launch_line_trains_on_cpu(tmp_path):
    rows = [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in generate({"reasoning": 2})]
    write_atomic(tmp_path / "accepted.jsonl", rows)
    (tmp_path / "sft.yaml").write_text("max_steps: 1\nbatch_size: 2\nlora: {r: 4, alpha: 8}\n")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "-m", "engine.training", "sft", "--trajectories", str(tmp_path / "accepted.jsonl"),
           "--model", str(tiny_model_dir(64)), "--out", str(tmp_path / "round"),
           "--settings", str(tmp_path / "sft.yaml")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    assert stats["steps"] == 1 and stats["rows_used"] == 2
    assert (tmp_path / "round" / "model" / "model.safetensors").exists()
    assert (tmp_path / "round" / "adapter" / "adapter_config.json").exists()
