"""JSONL files: atomic whole-file writes, crash-safe appends, reads that name the bad row."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class DataError(ValueError):
    """A data file is wrong; the message names the file, the line and what to do."""


def _line(obj) -> str:
    if isinstance(obj, BaseModel):
        return obj.model_dump_json()
    return json.dumps(obj, ensure_ascii=False)


def write_atomic(path: str | Path, rows: Iterable) -> int:
    """Write all rows to a temporary file, fsync, rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(_line(row) + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def write_text_atomic(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a full disk leaves the old file and no temporary one
        tmp.unlink(missing_ok=True)
        raise


class Appender:
    """Append rows to a streaming file, one flushed line each.

    A kill can leave a half-written last line; `read` with `tolerate_torn_tail=True`
    drops it, so a resumed run redoes that row instead of reading garbage.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, row) -> None:
        self._f.write(_line(row) + "\n")
        self._f.flush()

    def close(self) -> None:
        os.fsync(self._f.fileno())
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def repair_torn_tail(path: Path) -> int:
    """Cut a final line that has no newline (a write killed mid-row). Returns bytes removed."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        f.truncate(keep)
        return len(data) - keep


def read(path: str | Path, model: type[M] | None = None) -> Iterator:
    """Yield rows (dicts, or `model` instances). A bad row raises DataError naming file:line."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as err:  # JSONDecodeError, or a number too long to convert
                raise DataError(f"{path}:{lineno}: not valid JSON ({getattr(err, 'msg', err)}"
                                f" at column {getattr(err, 'colno', '?')}); fix or delete "
                                "that line") from None
            if model is None:
                yield obj
                continue
            try:
                yield model.model_validate(obj)
            except ValidationError as err:
                first = err.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "row"
                raise DataError(f"{path}:{lineno}: field {field!r}: {first['msg']}; "
                                f"fix or delete that line") from None


def read_all(path: str | Path, model: type[M] | None = None) -> list:
    return list(read(path, model))
