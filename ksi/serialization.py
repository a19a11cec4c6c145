"""The one converter that turns KSI's models into JSON-ready data and back.

Reading is lenient about unknown keys (a journal written by a newer KSI must
still resume); user-input validation uses its own strict converters.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import cattrs

from ksi.models import EvalResult

T = TypeVar("T")

converter = cattrs.Converter()
# An EvalResult is written as the original KSI's result dict (with its derived
# ``resolved``), which reading ignores.
converter.register_unstructure_hook(EvalResult, EvalResult.as_dict)


def to_data(obj: Any) -> Any:
    return converter.unstructure(obj)


def from_data(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


def dumps_line(obj: Any) -> str:
    """One compact JSON line (no newline inside, whatever the content)."""
    return json.dumps(to_data(obj), ensure_ascii=False, separators=(",", ":"))


def write_json_atomic(
    path: Path,
    data: Any,
    *,
    durable: bool = True,
    indent: int | None = 2,
    parents: bool = True,
) -> None:
    """Write JSON so a reader sees either the old file or the new one, never half of one.

    ``durable=False`` skips the fsync, for copies of data whose durable home
    is elsewhere (an attempt's ``record.json`` duplicates its journal line);
    ``indent=None`` writes one line with the (much faster) C encoder.
    ``parents=False`` raises ``FileNotFoundError`` rather than re-creating a
    directory that was deleted (a run directory removed while the run goes).
    A failure (a full disk...) leaves the old file as it was and no
    temporary file behind.
    """
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            # dumps, not dump: only a one-shot encode uses the C encoder
            fh.write(json.dumps(data, indent=indent, ensure_ascii=False, default=str))
            fh.write("\n")
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
