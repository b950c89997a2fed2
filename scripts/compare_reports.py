"""Compare the numbers of the rendered reports' tables with those of an earlier commit.

Every table a notebook shows is also written, at full precision, to ``outputs/reports/<study>/<notebook>/tables/*.csv``.
This script reads each such CSV now and at ``--rev`` (``git show``), and compares them cell by cell: numeric columns
within a relative 1e-9 (floats printed on another machine may differ in the last digit), other columns exactly, except
columns that only name record folders or files, whose paths may move (rows are compared in one order of the other
columns, since rows sorted by a folder's name move with it). It prints one line per table and exits 1 if any
number differs, so a refactoring or a re-render can be shown to change no number:

    python scripts/compare_reports.py --rev 5b69a69
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
#: Columns that hold where a record came from (folders and files move; the numbers they hold do not).
PATH_COLUMNS = {"records_dir", "records_folder", "folder", "records", "source", "path", "file"}


def _old_csv(rev: str, path: Path) -> pd.DataFrame | None:
    proc = subprocess.run(["git", "show", f"{rev}:{path.relative_to(ROOT).as_posix()}"], cwd=ROOT,
                          capture_output=True)
    return pd.read_csv(io.BytesIO(proc.stdout)) if proc.returncode == 0 else None


def _path_like(series: pd.Series) -> bool:
    text = series.dropna().astype(str)
    return series.name in PATH_COLUMNS or (len(text) > 0 and text.str.contains("outputs/|/records|\\.jsonl").all())


def compare(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """What differs between two versions of one table, ignoring path columns; empty when the numbers agree."""
    old = old.rename(columns={"records_dir": "records_folder"})
    new = new.rename(columns={"records_dir": "records_folder"})
    if list(old.columns) != list(new.columns):
        return [f"columns differ: {sorted(set(old.columns) ^ set(new.columns))}"]
    if len(old) != len(new):
        return [f"{len(old)} rows then, {len(new)} now"]
    paths = [c for c in old.columns if _path_like(old[c]) or _path_like(new[c])]
    old, new = old.drop(columns=paths), new.drop(columns=paths)
    # rows ordered by a folder's name move with it: compare the tables in one order of their other columns
    old, new = (f.iloc[np.argsort(["\x1f".join(map(str, row)) for row in f.itertuples(index=False)],
                                  kind="stable")].reset_index(drop=True) for f in (old, new))
    problems = []
    for column in old.columns:
        a, b = old[column], new[column]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
            same = np.isclose(x, y, rtol=1e-9, atol=0.0, equal_nan=True)
        else:
            same = (a.map(str) == b.map(str)).to_numpy()
        if not same.all():
            row = int(np.flatnonzero(~same)[0])
            problems.append(f"{column}: {int((~same).sum())} cells differ, first at row {row}: "
                            f"{a.iloc[row]!r} -> {b.iloc[row]!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", required=True, help="the commit to compare with, e.g. the one before a refactoring")
    parser.add_argument("--reports", default="outputs/reports", help="folder of rendered reports")
    args = parser.parse_args(argv)
    tables = sorted((ROOT / args.reports).glob("*/*/tables/*.csv"))
    changed = new_tables = 0
    for path in tables:
        old = _old_csv(args.rev, path)
        name = path.relative_to(ROOT).as_posix()
        if old is None:
            new_tables += 1
            print(f"new      {name}")
            continue
        problems = compare(old, pd.read_csv(path))
        changed += bool(problems)
        print(f"{'CHANGED' if problems else 'same':8} {name}" + "".join(f"\n         {p}" for p in problems))
    print(f"{len(tables)} tables: {len(tables) - changed - new_tables} with the same numbers, {changed} changed, "
          f"{new_tables} new (no table at {args.rev})")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
