"""`pipeline fork RUN NEW`: an independent copy of a run directory, for recipe experiments
(`pipeline run NEW --round N --redo STEP -o ...`, then `pipeline compare RUN NEW`).

Paths to the run inside its small text files (run.yaml's run_dir, promoted.json, state.json,
evaluation and gate reports, Modelfiles) are rewritten to NEW, so nothing in NEW points back
at RUN. Model weights (written once, never appended to) are hard-linked where the filesystem
allows; every other file is copied, so a resumed step appending to NEW's files never touches
RUN's.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import yaml

LINKED = (".safetensors", ".gguf", ".bin", ".pt", ".pth")   # weights: hard links
REWRITTEN = (".json", ".yaml", ".md")                       # small text: paths rewritten
SKIPPED = (".lock",)


class ForkError(ValueError):
    """The fork cannot be made (no run at RUN, NEW exists); the message says why."""


def _copy(src: str, dst: str) -> None:
    if src.endswith(LINKED):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def old_roots(run: Path) -> list[str]:
    """Spellings of `run` that its files may hold: as given, absolute, and run.yaml's
    run_dir (longest first, so a longer spelling is replaced before a prefix of it)."""
    names = {str(run), str(run.resolve())}
    conf = run / "run.yaml"
    if conf.exists():
        recorded = (yaml.safe_load(conf.read_text()) or {}).get("run_dir")
        if recorded:
            names.add(str(recorded).rstrip("/"))
    return sorted(names, key=len, reverse=True)


def rewrite(text: str, roots: list[str], new: Path) -> str:
    """`text` with each of `roots` (followed by a separator, a quote or the end) replaced by
    `new`: an absolute spelling by NEW's absolute path, a relative one by NEW as given."""
    for old in roots:
        to = str(new.resolve()) if os.path.isabs(old) else str(new)
        text = re.sub(re.escape(old) + r"(?=[/\"'\s,}\]]|$)", lambda _: to, text)
    return text


def fork(run: Path, new: Path) -> dict:
    """Copy `run` to `new` with its paths rewritten; returns counts of what was done."""
    run, new = Path(run), Path(new)
    if not (run / "state.json").exists():
        raise ForkError(f"{run}: no run here (no state.json) to fork")
    if new.exists():
        raise ForkError(f"{new} exists; fork into a new directory")
    shutil.copytree(run, new, copy_function=_copy,
                    ignore=lambda d, names: [n for n in names if n.endswith(SKIPPED)])
    roots, rewritten, linked = old_roots(run), 0, 0
    for path in new.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix in LINKED and path.stat().st_nlink > 1:
            linked += 1
        if path.suffix in REWRITTEN or path.name == "Modelfile":
            text = path.read_text()
            out = rewrite(text, roots, new)
            if out != text:
                path.write_text(out)
                rewritten += 1
    conf = new / "run.yaml"
    if conf.exists():  # run_dir names NEW even where the run used the default runs/<name>
        tree = yaml.safe_load(conf.read_text()) or {}
        tree["run_dir"] = str(new)
        conf.write_text(yaml.safe_dump(tree, sort_keys=False))
    return {"from": str(run), "to": str(new), "rewritten_files": rewritten,
            "linked_files": linked}
