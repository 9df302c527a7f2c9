"""Benchmark plumbing: `bench rollout --background-load` starts and kills its busy processes
and tabulates loaded against unloaded tok/s per binding; `bench train` names the CPU."""
from __future__ import annotations

import os


import pytest

from pipeline.bench import rollout as bench_rollout
from pipeline.bench import train as bench_train


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_background_load_runs_busy_processes_and_kills_them():
    with bench_rollout.background_load(2) as pids:
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    assert not any(_alive(p) for p in pids)
    with pytest.raises(RuntimeError), bench_rollout.background_load(1) as pids:
        raise RuntimeError("a failed rollout")
    assert not _alive(pids[0])  # killed however the block ends


def test_load_table_pairs_each_binding_alone_and_loaded():
    rows = [{"backend": "vllm[all]", "load": 0, "tokens_per_s": 40.0},
            {"backend": "vllm[all]", "load": 1, "tokens_per_s": 10.0},
            {"backend": "vllm[nobind]", "load": 0, "tokens_per_s": 30.0},
            {"backend": "vllm[nobind]", "load": 1, "tokens_per_s": 24.0},
            {"backend": "vllm[auto]", "load": 0, "error": "BackendError: x"}]
    pairs = bench_rollout.load_rows(rows)
    fair = round(bench_rollout.fair_share(1), 3)
    assert fair == round(len(os.sched_getaffinity(0)) / (len(os.sched_getaffinity(0)) + 1), 3)
    assert [(r["backend"], r["ratio"]) for r in pairs] == [("vllm[all]", 0.25),
                                                         ("vllm[nobind]", 0.8)]
    md = bench_rollout.load_table(pairs, markdown=True).splitlines()
    assert md[0].startswith("| backend | tok/s alone | tok/s loaded") and md[1].startswith("| ---")
    assert md[2] == (f"| vllm[all] | 40.0 | 10.0 | 0.25 | {fair:.2f} | "
                     + ("within share |" if 0.25 >= fair else "loses more than its share |"))
    assert bench_rollout.fair_share(0) == 1.0


def test_markdown_needs_a_background_load():
    with pytest.raises(SystemExit):
        bench_rollout.parse_args(["--markdown", "x.md"])
    assert bench_rollout.parse_args(["--background-load", "1", "--cpu-binds",
                                     "all,auto,nobind"]).background_load == 1


def test_train_bench_table_names_the_cpu_capability():
    import torch
    from engine.machine import describe
    m = describe()
    line = bench_train.table_machine(m)
    assert torch.backends.cpu.get_cpu_capability() in line and m["cpu"] in line
    assert f"{m['cores']} cores" in line


def test_a_shared_cpu_is_said_when_an_engine_binds_its_threads():
    """Item 12: `all` keeps its default (fastest alone and beside one busy process), and an
    engine that binds threads on a busy CPU says so, with the numbers."""
    from engine.sampling.vllm_backend import shared_cpu_note
    note = shared_cpu_note(1.3, 2, "all")
    assert note and "other processes busy 1.3 of 2 cores" in note and "cpu_bind: auto" in note
    assert shared_cpu_note(None, 2, "all") is None         # not measured: quiet
    assert shared_cpu_note(0.4, 2, "all") is None          # under half the cores: quiet
    assert shared_cpu_note(3.0, 2, "auto") is None         # vLLM's own binding: not bound by us
    assert shared_cpu_note(3.0, 2, "nobind") is None
    assert "(0,1)" in shared_cpu_note(2.0, 2, "0,1").replace("threads bound ", "")


def test_busy_elsewhere_counts_other_processes_not_this_one(monkeypatch):
    """The load average still counts the training a round just finished; the engine's check
    reads the CPUs other processes keep busy now: all CPUs' busy time less this process's."""
    from engine import machine
    jiffies = iter([(1000, 4000), (1150, 4200)])        # 150 of 200 jiffies busy: 1.5 of 2 CPUs
    own = iter([(10.0, 0.0, 0.0, 0.0, 0.0), (10.5, 0.0, 0.0, 0.0, 0.0)])   # this one: 0.5 s of 1 s
    clock = iter([100.0, 101.0])
    monkeypatch.setattr(machine, "_cpu_jiffies", lambda: next(jiffies))
    monkeypatch.setattr(machine.os, "times", lambda: next(own))
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(machine.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(machine.time, "sleep", lambda s: None)
    assert machine.busy_elsewhere() == pytest.approx(1.0)


def test_busy_elsewhere_reads_this_machine():
    from engine.machine import busy_elsewhere
    busy = busy_elsewhere(0.2)
    assert busy is not None and 0.0 <= busy <= (os.cpu_count() or 1)
