"""benchmarks/tool_choice.py: the "no call" column counts the BFCL items where the model
called nothing, read from the results file (BFCL's checkers file those under wrong_count,
beside items with too many calls)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("tool_choice", ROOT / "benchmarks" / "tool_choice.py")
tool_choice = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool_choice)


def test_no_calls_counts_items_without_a_call(tmp_path: Path):
    rows = [{"id": "a", "calls": []}, {"id": "b", "calls": [{"name": "f", "arguments": {}}]},
            {"id": "c", "calls": []}, {"id": "d", "calls": [{"name": "f", "arguments": {}}] * 2}]
    path = tmp_path / "simple_python.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    assert tool_choice._no_calls(path) == 2
