"""`pipeline bench train` measures every mode on the same rows, each in a fresh process."""
import json

from pipeline.bench import train as bench


def test_bench_train_modes_side_by_side(tmp_path, capsys):
    out = tmp_path / "train.json"
    assert bench.main(["--model", "tiny:64", "--rows", "4", "--steps", "1", "--grpo-steps", "0",
                       "--lora-dropout", "0", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    sft = res["sft"]
    assert list(sft) == list(bench.MODES)
    pf, full = sft["pf-rows"], sft["pf-full-head"]
    assert pf["tokens"] == full["tokens"] > 0          # same rows, same tokens, two heads
    assert pf["tokens"] == sft["padded"]["tokens"]     # padding is not counted
    assert all(r["steps"] == 1 and r["tokens_per_s"] > 0 for r in sft.values())
    # random batches in the same order: padding-free (either head) reproduces padded
    for mode in ("pf-full-head", "pf-rows"):
        assert sft[mode]["loss_max_diff"] < 1e-3, mode
    # a bfloat16 base rounds the residual stream too: close, not equal
    assert sft["pf-rows-bf16"]["loss_max_diff"] < 2e-2
    assert sft["padded"]["vs_baseline"] == 1.0
    printed = capsys.readouterr().out
    assert "pf-full-head" in printed and "vs padded" in printed


def test_scaled_keeps_the_mix():
    grounding = {"single": 14, "parallel": 8, "chained": 84, "recovery": 60, "irrelevance": 8,
                 "reasoning": 14}
    # 47 / 188 = 1/4 of each (3.5 rounds to 4; irrelevance 2 stays)
    assert bench.scaled(grounding, 47) == {"single": 4, "parallel": 2, "chained": 21,
                                           "recovery": 15, "irrelevance": 2, "reasoning": 4}
    assert bench.scaled({"single": 1, "chained": 99}, 10) == {"single": 1, "chained": 10}


def test_mix_takes_the_round_tasks_domains_and_settings():
    from pipeline import config
    grounding = config.load(preset="default").rounds["grounding"]
    counts, domains, sft = bench.workload(bench.parse_args(["--mix", "grounding", "--steps", "3",
                                                            "--lora-dropout", "0"]))
    assert counts == grounding.tasks and domains == grounding.domains
    assert (sft["lr"], sft["batch_size"], sft["max_length"]) == (1e-3, 4, grounding.sft.max_length)
    assert (sft["lora"]["r"], sft["lora"]["alpha"], sft["lora"]["dropout"]) == (32, 64, 0.0)
    assert sft["max_steps"] == 3
    assert sft["bf16"] == grounding.sft.bf16                      # --bf16 auto
    for flag, want in (("off", False), ("on", True)):
        args = bench.parse_args(["--mix", "grounding", "--bf16", flag])
        assert bench.workload(args)[2]["bf16"] is want
    rows = bench.oracle_rows({"chained": 7}, domains)
    # cycled, one each over the domains that make chained tasks (not the calculators)
    assert {r.domain for r in rows} == set(grounding.domains) - {"formulas"}
    offers = bench.round_offers(bench.parse_args(["--mix", "grounding"]))
    pairs = bench.oracle_rows({"contrast": grounding.tasks["contrast"]}, domains, offers)
    # offered as the round offers: up to its per-kind count, which the round's pairs reach
    assert max(len(r.tools) for r in pairs) == grounding.offer_for("contrast") > 6


def test_summary_takes_medians_and_skips_a_killed_mode():
    def run(mode, tps, cpu, losses):
        return {"mode": mode, "tokens_per_s": tps, "tokens_per_cpu_s": cpu, "losses": losses}
    runs = [{"padded": run("padded", 100.0, 50.0, [2.0, 1.5]),
             "packing": run("packing", 120.0, 60.0, [2.1, 1.6]),
             "pf-rows": run("pf-rows", 180.0, 90.0, [2.0004, 1.5])},
            {"padded": run("padded", 50.0, 40.0, [2.0, 1.5]),
             "packing": {"mode": "packing", "failed": "killed"},
             "pf-rows": run("pf-rows", 80.0, 80.0, [2.0, 1.5])}]
    res = bench.summarise(runs, loss_steps=2)
    rows = res["sft"]["pf-rows"]
    assert rows["tokens_per_s"] == 130.0                    # median of 180 and 80
    assert rows["vs_baseline"] == 1.7                       # median of 1.8 and 1.6
    assert rows["cpu_vs_baseline"] == 1.9                   # median of 1.8 and 2.0
    assert res["sft"]["packing"]["vs_baseline"] == 1.2      # the finished repeat only
    # every mode against its same-batch reference, from the repeats where both finished
    assert abs(rows["loss_max_diff"] - 4e-4) < 1e-9
    assert res["sft"]["padded"]["loss_max_diff"] is None            # the reference itself
    assert res["sft"]["packing"]["loss_max_diff"] is None           # other batches: none
    runs[0]["packing"] = runs[1]["packing"]
    res = bench.summarise(runs, loss_steps=2)
    assert res["sft"]["packing"]["failed"] == "killed"
