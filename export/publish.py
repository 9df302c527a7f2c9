"""A round's export as a run makes it: built with the run's export settings, and the promoted
one mirrored at the stable path `runs/<name>/export/`, which the repository's top-level
Modelfile points at."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .settings import ExportSettings
from engine.runstore import RunStore

from .modelfile import write_modelfile
from .package import export_model


def export_round(settings: ExportSettings, model_dir: Path, out_dir: Path) -> dict:
    """`export_model` with a run's export settings; raises `ExportError` when it must not ship."""
    return export_model(model_dir, out_dir, settings.quant, load_check=settings.load_check,
                        check_items=settings.check_items, min_agreement=settings.min_agreement,
                        system=settings.system, check_max_tokens=settings.check_max_tokens)


def publish_export(store: RunStore, export_dir: Path, quant: str, system: str | None) -> Path:
    """Mirror `export_dir`'s GGUF (a hard link where possible) and a Modelfile for it at
    `runs/<name>/export/`, replacing what an earlier promotion put there."""
    src = export_dir / f"model-{quant}.gguf"
    dst_dir = store.root / "export"
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / src.name
    tmp = dst.with_name(dst.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    os.replace(tmp, dst)
    write_modelfile(dst_dir / "Modelfile", dst, system=system)
    return dst
