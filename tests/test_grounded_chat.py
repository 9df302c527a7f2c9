"""After grounding, the embedded default answers a weather question through a real tool call,
from its Q6_K GGUF, through `pipeline chat --prompt` (llama.cpp, tools executed for real)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from data import tasks
from data.envs.weather import get_weather
from rounds.common import oracle_trajectories


@pytest.mark.slow
def test_grounded_embedded_model_calls_the_weather_tool(tmp_path):
    from export import export_model
    from engine.models import embedded_model_dir
    from engine.training.settings import SFTSettings
    from engine.training.sft import train_sft

    # grounding data: oracle demonstrations of the weather domain, as round 1 uses them
    demo = tasks.generate({"single": 24, "parallel": 6, "chained": 6, "recovery": 6},
                          namespace="grounded-chat", domains=["weather"])
    rows = [t for t in oracle_trajectories(demo, 1) if t.success]
    assert len(rows) == 42
    stats = train_sft(rows, embedded_model_dir(), tmp_path / "r1",
                      SFTSettings(epochs=2, lr=3e-4, batch_size=4, max_length=1024),
                      progress=False)
    assert stats["final_loss"] < stats["first_loss"]
    info = export_model(tmp_path / "r1" / "model", tmp_path / "export", "Q6_K", load_check=False)
    gguf = tmp_path / "export" / "model-Q6_K.gguf"
    assert gguf.exists() and info["passed"]
    # a request of the kind it trained on (single requests come in several wordings)
    asked = next(t for t in demo if t.kind == "single")
    args = asked.gold_calls[0].arguments
    want = get_weather(**args)["temperature"]
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "chat", str(gguf), "--domains",
                          "weather", "--prompt", asked.prompt],
                         capture_output=True, text=True, timeout=600).stdout
    print(out)
    assert re.search(r"\[call\] get_weather\(.*%s" % re.escape(args["city"]), out), out
    assert '"temperature": %d' % want in out  # the real tool result came back
    answer = out.split("assistant>")[-1]
    assert str(want) in answer, answer
