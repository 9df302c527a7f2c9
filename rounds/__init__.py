"""The five built-in round recipes. Each module has `SETTINGS` (the config keys it reads)
and `run(ctx) -> Candidate`, which reads top to bottom; `pipeline.recipes` finds them by name."""
