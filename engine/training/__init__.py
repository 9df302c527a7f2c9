"""Training engines: SFT and GRPO with LoRA (TRL + PEFT), merge, token consistency, curves."""
