"""Benchmarks (`pipeline bench ...`): small, repeatable measurements on this machine."""
