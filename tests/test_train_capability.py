"""The `auto` training dtype follows the CPU capability torch dispatches (bf16 only on AVX-512
with BF16/AMX), and `pipeline bench train --from-json ... --markdown` writes the table that
measured it."""
import json
import os
import subprocess
import sys

import pytest

from engine.training.settings import bf16_native
from pipeline.bench.capability import auto_settings
from pipeline.bench.train import main

FLAGS = "fpu sse avx2 avx512f avx512_bf16 amx_tile"


def test_bf16_is_native_only_on_avx512_with_bf16_units():
    assert bf16_native("AVX512", FLAGS)
    assert bf16_native("AVX512", "avx512f amx_bf16")
    assert not bf16_native("AVX2", FLAGS)                  # emulated AVX2 on an AVX-512 CPU
    assert not bf16_native("AVX512", "avx2 avx512f")       # AVX-512 without BF16 or AMX
    assert not bf16_native("DEFAULT", FLAGS)


def test_an_avx2_capability_turns_auto_bf16_off():
    """ATEN_CPU_CAPABILITY=avx2 makes torch dispatch AVX2 kernels: the SFT default is fp32
    there, whatever /proc/cpuinfo lists."""
    code = ("from engine.training.settings import SFTSettings, bf16_supported;"
            "s = SFTSettings(); print(bf16_supported(), s.bf16, s.base_weights_dtype)")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "float32"]


def run(capability: str, bf16: bool, modes: dict[str, float]) -> dict:
    args = {"bf16": bf16, "batch_size": 4, "max_length": 1280, "lora": {"r": 32},
            "max_steps": 2}
    sft = {m: {"steps": 2, "tokens": 6000, "tokens_per_s": v, "repeats_tokens_per_s": [v, v],
               "losses": [1.13, 0.85]} for m, v in modes.items()}
    return {"args": args, "sft": sft, "load_before": 0.4,
            "machine": {"cpu": "test CPU", "capability": capability, "cores": 2,
                        "versions": {"torch": "x"}}}


def slow(r: dict) -> dict:
    r["sft"]["pf-rows-bf16"] = {"mode": "pf-rows-bf16", "failed": "did not finish in 900 s"}
    return r


def test_markdown_lists_every_setting_and_whether_auto_picks_the_fastest(tmp_path, capsys):
    paths = []
    for name, r in {"avx512-bf16": run("AVX512", True, {"pf-rows": 210.0, "pf-rows-bf16": 240.0}),
                    "avx512-fp32": run("AVX512", False, {"pf-rows": 190.0}),
                    "avx2-bf16": slow(run("AVX2", True, {"pf-rows": 20.0})),
                    "avx2-fp32": run("AVX2", False, {"pf-rows": 120.0})}.items():
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(r))
    out = tmp_path / "capability.md"
    argv = [a for p in paths for a in ("--from-json", str(p))] + ["--markdown", str(out)]
    assert main(argv) == 0
    text = out.read_text()
    assert "| AVX2 | fp32, float32 base | pf-rows | 2 | 6000 | 120.0 | 120.0, 120.0 | 1.1300 |" \
        in text
    assert "| AVX2 | bf16 autocast, float32 base | pf-rows | 2 | 6000 | 20.0 |" in text
    fastest = [line for line in text.splitlines() if line.startswith("| AVX2 | fp32, float32 "
                                                                      "base (120.0")]
    assert fastest and fastest[0].endswith(f"| {auto_settings()['AVX2']} | yes |")
    assert "avx2-fp32.json: 0.4" in text
    assert "| AVX2 | bf16 autocast, bfloat16 base | pf-rows-bf16 | 2 | - | did not finish in " \
        "900 s |" in text                             # a mode stopped by --timeout is listed


def test_markdown_needs_saved_runs(tmp_path):
    with pytest.raises(SystemExit, match="--from-json"):
        main(["--markdown", "x.md"])
    with pytest.raises(SystemExit, match="no such file .*gone.json"):
        main(["--from-json", str(tmp_path / "gone.json"), "--markdown", "x.md"])


def _sleepy(seconds):
    import time
    time.sleep(seconds)
    return "woke"


def test_a_mode_past_its_timeout_is_stopped_and_recorded():
    import time

    from pipeline.bench import train
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError):
        train._in_fresh_process(_sleepy, 60, timeout=3)
    assert time.perf_counter() - t0 < 30                  # the child was killed, not awaited
    assert train._in_fresh_process(_sleepy, 0, timeout=30) == "woke"
