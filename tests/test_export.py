"""Export: a real tiny model through the real converter, quantizer, read-back and load check."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.chatformat import chat_template
from data.tasks import make
from data.trajectory import Trajectory
from data.verify import verify
from export import ExportError, export_model, lint_modelfile
from export.convert import convert_to_f16, gguf_library
from export.loadcheck import compare
from export.quantize import quantize
from export.readback import quant_summary, read_gguf
from engine.models import embedded_model_dir, tiny_model_dir


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("export")
    report = export_model(tiny_model_dir(256), out, check_items=2, check_max_tokens=8,
                          keep_f16=True)
    return out, report


def test_tiny_model_exports_to_q6k(tiny_export):
    out, report = tiny_export
    assert report["passed"] and report["reasons"] == []
    # width 256: every 2-d tensor (7 per layer x 2 layers + embeddings) is really Q6_K,
    # the 5 norms stay F32
    info = read_gguf(out / "model-Q6_K.gguf")
    assert info["tensor_types"] == {"Q6_K": 15, "F32": 5}
    assert report["tensors"]["really_requested_type"] == 15
    assert report["tensors"]["note"] == ""
    assert report["files"]["bytes"] == (out / "model-Q6_K.gguf").stat().st_size
    assert report["files"]["bytes"] < report["files"]["f16_bytes"] / 2
    # metadata read back from the file: the project's template and ChatML special tokens
    meta = report["metadata"]
    assert meta["chat_template"] == chat_template()
    assert meta["special_tokens"]["eos"]["text"] == "<|im_end|>"
    assert meta["chatml_token_ids"] == {"<|im_start|>": 1, "<|im_end|>": 2}
    # check.json on disk is the returned report; no temporary files are left behind
    assert json.loads((out / "check.json").read_text()) == report
    assert sorted(p.name for p in out.iterdir()) == ["Modelfile", "check.json",
                                                     "model-Q6_K.gguf", "model-f16.gguf"]


def test_load_check_ran_both_models_on_canary_items(tiny_export):
    _, report = tiny_export
    check = report["load_check"]
    assert check["items"] == 2 and check["passed"]
    assert [i["task"] for i in check["per_item"]] == ["canary-export-single-0",
                                                      "canary-export-chained-0"]
    assert check["seconds"]["gguf"] > 0 and check["seconds"]["hf"] > 0
    # the random model makes no call through either engine: same outcome, same first call
    assert check["agreement"] == 1.0 and check["markup_lost"] == 0


def test_modelfile_of_export_lints_clean(tiny_export):
    out, _ = tiny_export
    text = (out / "Modelfile").read_text()
    assert "FROM ./model-Q6_K.gguf" in text
    assert lint_modelfile(out / "Modelfile") == []


@pytest.mark.parametrize("quant,main_type,count", [("Q8_0", "Q8_0", 15), ("Q4_K_M", "Q4_K", None)])
def test_other_quant_types(tiny_export, tmp_path, quant, main_type, count):
    out, _ = tiny_export
    result = quantize(out / "model-f16.gguf", tmp_path / f"m-{quant}.gguf", quant)
    info = read_gguf(tmp_path / f"m-{quant}.gguf")
    assert result["bytes"] == info["bytes"]
    assert info["tensor_types"]["F32"] == 5
    if count is not None:
        assert info["tensor_types"][main_type] == count
    else:  # K_M mixes: mostly Q4_K, a few tensors kept at Q6_K
        assert info["tensor_types"].get(main_type, 0) > 0
    summary = quant_summary(info, quant)
    assert summary["really_requested_type"] == 15 and summary["note"] == ""


def test_compare_fails_when_tool_call_markup_is_lost():
    tasks = [make("single", i, split="canary", namespace="export") for i in range(2)]

    def traj(task, assistant_turns):
        msgs = task.messages() + assistant_turns
        return Trajectory(id=task.id, task_id=task.id, domain=task.domain, kind=task.kind,
                          messages=msgs, tools=task.tools, finish="answer",
                          verification=verify(task, msgs))
    hf = [traj(t, t.oracle) for t in tasks]  # calls the tool, answers correctly
    gg = [traj(tasks[0], tasks[0].oracle),
          traj(tasks[1], [{"role": "assistant", "content": "I think it is sunny."}])]
    report = compare(tasks, hf, gg, min_agreement=0.75)
    assert report["success"] == {"hf": 2, "gguf": 1}
    assert report["markup_lost"] == 1 and report["agreement"] == 0.5
    assert not report["passed"]
    # one of two tool-call items lost: a flipped decision, not broken tags; agreement fails it
    assert not any("markup lost" in r for r in report["reasons"])
    assert any("below the threshold 0.75" in r for r in report["reasons"])
    assert compare(tasks, hf, gg, min_agreement=0.5)["passed"]
    # both lost: the GGUF breaks the tags
    no_calls = [traj(t, [{"role": "assistant", "content": "I think it is sunny."}])
                for t in tasks]
    report = compare(tasks, hf, no_calls, min_agreement=0.0)
    assert report["markup_lost"] == 2 and not report["passed"]
    assert any("markup lost" in r and "2 of its 2" in r for r in report["reasons"])
    assert compare(tasks, hf, hf, 0.75)["passed"]


def test_bad_inputs_raise_clear_export_errors(tmp_path):
    with pytest.raises(ExportError, match="unknown quantization 'Q3_X'"):
        export_model(tmp_path, tmp_path / "out", quant="Q3_X")
    with pytest.raises(ExportError, match="no config.json"):
        convert_to_f16(tmp_path, tmp_path / "x.gguf")
    with pytest.raises(ExportError, match="does not exist"):
        quantize(tmp_path / "missing.gguf", tmp_path / "y.gguf")


def test_gguf_module_is_the_converters_newer_copy():
    gguf = gguf_library()
    assert hasattr(gguf.MODEL_ARCH, "EAGLE3")


@pytest.mark.slow
def test_embedded_default_exports_with_q8_0_fallback_reported(tmp_path):
    report = export_model(embedded_model_dir(), tmp_path, check_items=2, check_max_tokens=16)
    types = report["tensors"]["types"]
    # SmolLM2's width 576 is not a multiple of 256: most tensors fall back to q8_0
    assert types["Q6_K"] == report["tensors"]["really_requested_type"] == 30
    assert types["Q8_0"] == 181 and types["F32"] == 61
    assert "fell back to q8_0 on 181" in report["tensors"]["note"]
    assert report["metadata"]["chat_template"] == chat_template()
    assert report["load_check"]["items"] == 2 and report["passed"]
    assert not (tmp_path / "model-f16.gguf").exists()
