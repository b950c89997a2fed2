"""Substitution records: one JSON object a line in ``outputs/records/substitution/<hardware>/<purpose>/substitutions.jsonl``
(fields: ``docs/reference/substitution.md``), and a loader for the analyses and notebook 05."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from kbstudy.records.store import append_jsonl, iter_jsonl

RECORDS_FILE = "substitutions.jsonl"


def append_record(out_dir: str | Path, record: dict) -> Path:
    """Append ``record`` to ``out_dir/substitutions.jsonl`` (atomic line append); returns the file."""
    path = Path(out_dir) / RECORDS_FILE
    append_jsonl(path, record)
    return path


def iter_records(paths: Iterable[str | Path] | str | Path) -> list[dict]:
    """The records of each folder (its ``substitutions.jsonl``) or file, in order; missing paths give none."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[dict] = []
    for p in map(Path, paths):
        out.extend(iter_jsonl(p / RECORDS_FILE if p.is_dir() else p))
    return out


#: What one case is: a substitution record is superseded by a newer one of the same case.
CASE_KEY = ("workload", "config", "kernel_source", "hardware")

#: The columns of :func:`load_substitutions`, one row per case.
FRAME_COLUMNS = ("workload", "config", "mode", "kernel_source", "outcome", "hardware", "baseline_ms_median",
                 "baseline_ms_ci_low", "baseline_ms_ci_high", "substituted_ms_median", "substituted_ms_ci_low",
                 "substituted_ms_ci_high", "speedup", "saving_fraction", "saving_ci_low", "saving_ci_high",
                 "n_places_substituted", "n_places_not_applicable", "e2e_passed", "git_commit")


def latest_records(paths: Iterable[str | Path] | str | Path) -> list[dict]:
    """The newest record of each case (:data:`CASE_KEY`), in order of creation."""
    ordered = sorted(iter_records(paths), key=lambda r: r.get("created_utc") or "")
    last = {tuple(r.get(k) for k in CASE_KEY): i for i, r in enumerate(ordered)}
    return [ordered[i] for i in sorted(last.values())]


def load_substitutions(paths: Iterable[str | Path] | str | Path) -> pd.DataFrame:
    """One row per case (:func:`latest_records`), with the counts of places substituted and refused; the lists
    themselves stay in the records."""
    rows = []
    for r in latest_records(paths):
        row = {k: r.get(k) for k in FRAME_COLUMNS}
        row["n_places_substituted"] = len(r.get("places_substituted") or [])
        row["n_places_not_applicable"] = len(r.get("places_not_applicable") or [])
        row["created_utc"] = r.get("created_utc")
        rows.append(row)
    return pd.DataFrame(rows, columns=[*FRAME_COLUMNS, "created_utc"])
