"""The record store: one JSON line per record (:mod:`kbstudy.records.schema`), appended atomically, resumable,

exportable to Parquet.

Store layout (one *run* folder, e.g. ``outputs/records/kernelbench/h200/level1-fp32``)::

    evaluations.jsonl   one EvaluationRecord a line
    references.jsonl    one ReferenceRecord a line
    evaluations.parquet Parquet export (``kbstudy export``)

Atomicity: each record is serialised to one line and written with a single ``os.write`` on a descriptor opened with
``O_APPEND``, then ``fsync``-ed; a process killed mid-write can leave at most one torn final line, which the reader
skips with a warning. Resume: a record's :attr:`EvaluationRecord.key` identifies the evaluation; a batch skips keys
already in the store, so an interrupted run loses nothing and duplicates nothing.
"""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Iterator

from kbstudy.records.schema import JSON_COLUMNS, EvaluationRecord, ReferenceRecord, _finite_or_none, record_identity

# ----------------------------------------------------------------------------------------------------------- JSONL


def append_jsonl(path: str | os.PathLike, line: str | dict) -> None:
    """Append one JSON object as one line, atomically (single ``O_APPEND`` write, then ``fsync``).

    Raises ``ValueError`` if the serialised line contains a newline (it would not be one record).
    """
    text = line if isinstance(line, str) else json.dumps(line)
    if "\n" in text:
        raise ValueError("a record must serialise to a single line")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = (text + "\n").encode()
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # the last line was torn by a killed writer: start this record on a line of its own
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the JSON objects of a JSONL file. A torn (unparseable) line is skipped with a warning, not raised."""
    path = Path(path)
    if not path.exists():
        return
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                warnings.warn(f"{path}:{lineno}: skipping a torn or malformed line", stacklevel=2)


class RecordStore:
    """A run folder of records: ``evaluations.jsonl`` and ``references.jsonl`` (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.evaluations_path = self.folder / "evaluations.jsonl"
        self.references_path = self.folder / "references.jsonl"

    def append(self, record: EvaluationRecord | ReferenceRecord) -> None:
        path = self.references_path if isinstance(record, ReferenceRecord) else self.evaluations_path
        append_jsonl(path, record.to_json())

    def evaluation_keys(self) -> set[str]:
        """The measurement keys present (:func:`evaluation_key`: same problem, code, precision, scale, hardware and
        settings). Several records can share one: the same code submitted as several samples or configurations."""
        return {row["key"] for row in iter_jsonl(self.evaluations_path) if "key" in row}

    def evaluations_by_identity(self) -> dict[tuple, dict]:
        """The latest evaluation row per :func:`record_identity` (measurement key, model configuration, sample id)."""
        return {record_identity(row): row for row in iter_jsonl(self.evaluations_path) if "key" in row}

    def references(self) -> dict[str, dict]:
        """The latest reference row for each reference key."""
        return {row["key"]: row for row in iter_jsonl(self.references_path) if "key" in row}

    def evaluations(self) -> list[dict]:
        """All evaluation rows, one per :func:`record_identity`; if an identity appears twice (a record rewritten by
        hand), the last one wins."""
        latest: dict[tuple, dict] = {}
        for row in iter_jsonl(self.evaluations_path):
            latest[record_identity(row) if "key" in row else (str(len(latest)),)] = row
        return list(latest.values())

    def evaluations_frame(self):
        """The evaluations as a pandas DataFrame, with one column per schema field."""
        import pandas as pd  # on first use: the harness's processes write records without pandas

        columns = [f.name for f in dataclasses.fields(EvaluationRecord)]
        return pd.DataFrame(self.evaluations(), columns=columns)

    def references_frame(self):
        import pandas as pd  # on first use: the harness's processes write records without pandas

        columns = [f.name for f in dataclasses.fields(ReferenceRecord)]
        return pd.DataFrame(list(self.references().values()), columns=columns)

    def export_parquet(self) -> list[Path]:
        """Write ``evaluations.parquet`` and ``references.parquet`` beside the JSONL files; returns their paths.
        ``metadata`` and the columns of ``JSON_COLUMNS`` are stored as JSON strings."""
        written = []
        for frame, name in ((self.evaluations_frame(), "evaluations"), (self.references_frame(), "references")):
            frame = frame.copy()
            frame["metadata"] = frame["metadata"].map(lambda m: json.dumps(m or {}, sort_keys=True))
            for column in JSON_COLUMNS:
                if column in frame:
                    # a field older records lack is NaN in the frame: stored as JSON null, not as "NaN"
                    frame[column] = frame[column].map(lambda v: json.dumps(_finite_or_none(v)))
            path = self.folder / f"{name}.parquet"
            frame.to_parquet(path, index=False)
            written.append(path)
        return written
