"""`pipeline bench train` measures every mode on the same rows, each in a fresh process."""
import json

from pipeline.bench import train as bench


def test_bench_train_modes_side_by_side(tmp_path, capsys):
    out = tmp_path / "train.json"
    assert bench.main(["--model", "tiny:64", "--rows", "4", "--steps", "1", "--grpo-steps", "0",
                       "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert list(res["sft"]) == list(bench.MODES)
    pf, full = res["sft"]["padding-free"], res["sft"]["pf-full-head"]
    assert pf["tokens"] == full["tokens"] > 0          # same rows, same tokens, two heads
    assert all(r["steps"] == 1 and r["tokens_per_s"] > 0 for r in res["sft"].values())
    assert "pf-full-head" in capsys.readouterr().out
