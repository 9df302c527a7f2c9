"""The training step on its own, for several GPUs or nodes under `accelerate launch`.

The round loop samples, filters and gates in one process; only training is worth spreading.
Run the round up to its accepted set, then:

    accelerate launch --config_file engine/training/accelerate/fsdp.yaml \\
        -m engine.training sft --trajectories RUN/round-1-grounding/accepted.jsonl \\
        --model embedded:smollm2-135m --out RUN/round-1-grounding --settings sft.yaml

`--settings` is a YAML mapping of SFTSettings (or GRPOSettings) fields. Outputs are those of
`train_sft` / `train_grpo` (adapter/, model/, logs); a relaunch resumes from the checkpoint.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.training", description=__doc__.split("\n")[0])
    ap.add_argument("method", choices=["sft", "grpo"])
    ap.add_argument("--trajectories", type=Path, help="accepted.jsonl (sft)")
    ap.add_argument("--tasks", type=Path, help="tasks.jsonl (grpo)")
    ap.add_argument("--model", required=True, help="model reference or HF directory")
    ap.add_argument("--out", type=Path, required=True, help="round directory to write into")
    ap.add_argument("--settings", type=Path, help="YAML file of training settings")
    args = ap.parse_args(argv)

    import yaml
    from data.jsonl import read_all
    from data.trajectory import Task, Trajectory
    from engine.models import resolve
    from engine.training.settings import GRPOSettings, SFTSettings
    raw = yaml.safe_load(args.settings.read_text()) if args.settings else {}
    if args.method == "sft":
        from engine.training.sft import train_sft
        if not args.trajectories:
            raise SystemExit("sft needs --trajectories (an accepted.jsonl)")
        stats = train_sft(read_all(args.trajectories, Trajectory), resolve(args.model), args.out,
                          SFTSettings(**(raw or {})))
    else:
        from engine.training.grpo import train_grpo
        if not args.tasks:
            raise SystemExit("grpo needs --tasks (a tasks.jsonl)")
        stats = train_grpo(read_all(args.tasks, Task), resolve(args.model), args.out,
                           GRPOSettings(**(raw or {})))
    print(json.dumps(stats, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
