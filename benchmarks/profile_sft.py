"""Where an SFT step's CPU time goes: torch's profiler over a few steps of one bench mode.

    python benchmarks/profile_sft.py --mode padded --steps 6
    python benchmarks/profile_sft.py --mode pf-rows-bf16 --steps 6

Same rows and settings as `pipeline bench train --mix grounding --lora-dropout 0`; prints the
profiler's table of operators by self CPU time (the shares of SDPA, matmuls, multiplies and
dtype copies in docs/results/benchmarks.md come from it).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def main() -> None:
    from torch.profiler import ProfilerActivity, profile
    from transformers.trainer_callback import PrinterCallback

    from pipeline.bench.train import MODES, oracle_rows, parse_args, workload
    from engine.models import EMBEDDED, resolve
    from engine.training.settings import SFTSettings
    from engine.training.sft import sft_trainer
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", default="padded", choices=list(MODES))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rows", type=int, default=25, help="operators printed")
    args = ap.parse_args()
    counts, domains, sft = workload(parse_args(["--mix", "grounding", "--steps", str(args.steps),
                                                "--lora-dropout", "0"]))
    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = sft_trainer(oracle_rows(counts, domains), Path(resolve(EMBEDDED)),
                                 Path(tmp), SFTSettings(**sft, **MODES[args.mode]),
                                 progress=False)
        trainer.remove_callback(PrinterCallback)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.train()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
