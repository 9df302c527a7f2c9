"""The engine: sampling backends and the multi-turn rollout driver, training (SFT, GRPO, LoRA,
merge), models, the run store and timing. It imports only `data/`; `gates/`, `rounds/` and
`export/` build on it, and the roof (`pipeline/`: CLI, round loop, status, bench, config
assembly) sits on top."""
