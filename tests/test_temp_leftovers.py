"""A step killed mid-write leaves its temporary files under a fixed name, and the step run
again removes them: nothing a kill or a full disk left behind outlives the resumed run."""
from __future__ import annotations

from engine.models import atomic_dir


def _stale_dir(path):
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"half written" * 100)
    return path


def test_a_rebuilt_directory_removes_what_a_killed_build_left(tmp_path):
    target = tmp_path / "round-1" / "model"
    stale = _stale_dir(tmp_path / "round-1" / "model.tmp")          # a killed merge
    legacy = _stale_dir(tmp_path / "round-1" / "model.tmp4242")     # an older version's name
    other = _stale_dir(tmp_path / "round-1" / "adapter.tmp")        # another step's: kept

    atomic_dir(target, lambda tmp: (tmp / "config.json").write_text("{}"))

    assert (target / "config.json").read_text() == "{}"
    assert not stale.exists() and not legacy.exists() and other.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["adapter.tmp", "model"]


def test_a_resumed_export_removes_the_temporary_ggufs_a_kill_left(tmp_path, tiny_model):
    from export import export_model
    out = tmp_path / "export"
    out.mkdir()
    leftovers = [out / ".tmp-model-f16.gguf", out / ".tmp-model-Q6_K.gguf",
                 out / ".tmp31337-model-f16.gguf"]
    for p in leftovers:
        p.write_bytes(b"GGUF" + b"\0" * 4096)          # what a kill mid-write leaves
    _stale_dir(out / ".tmp-hf-stage")

    export_model(tiny_model, out, "Q8_0", load_check=False)

    assert (out / "model-Q8_0.gguf").stat().st_size > 100_000
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".tmp")) == []
