"""The released dataset: every evaluation of a set of record folders as one table, and the record-folder merge the GPU
scripts use.

``kbstudy release --records DIR [--records DIR ...] --out outputs/release/<name>`` writes::

    evaluations.jsonl     one EvaluationRecord a line (docs/reference/record_schema.md) plus the derived columns below
    evaluations.parquet   the same rows; dict/list columns (metadata, coverage_sentinels) as JSON strings
    references.jsonl      one ReferenceRecord a line (eager and torch.compile timings per problem)
    references.parquet    the same rows; dict/list columns as JSON strings
    schema.json           every column: name, JSON type, Parquet type, meaning (from docs/reference/record_schema.md)
    README.md             what it holds: sources, commits, hardware, counts by configuration, version, precision,
                          outcome and verdict, and the command that regenerates it

Each attempt appears once (``kbstudy.records.frames.load_frames``, ``first_attempts``: where folders repeat an
attempt, the folder listed first wins). Derived columns: ``records_folder`` (the folder a row came from), ``paper_category`` (the paper's operator
category) and ``dtype_status`` (``kbstudy.analysis.headline.dtype_status``: float32-only kernels at bf16). Rows are sorted by
(hardware, problem_version, precision, model_config, level, problem_id, sample_id), so the same records give the same
JSONL bytes.

``kbstudy throughput DIR...`` prints kernels evaluated per GPU-minute (``kbstudy.analysis.headline.throughput``).

The module imports only the core dependencies, so the GPU image runs :func:`merge_record_folders`. Its command line is
:mod:`kbstudy.cli.release`.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from pathlib import Path
from typing import Iterable

import pyarrow.parquet as pq

from kbstudy.analysis.headline import dtype_status
from kbstudy.harness.problems import paper_category
from kbstudy.pipeline.paths import find_project_root, relative_to_root
from kbstudy.records.frames import load_frames
from kbstudy.records.schema import JSON_COLUMNS, record_identity
from kbstudy.records.store import iter_jsonl

RECORD_FILES = ("evaluations.jsonl", "references.jsonl")
#: The derived columns a release adds to the evaluation records, with their meaning (also in schema.json).
DERIVED_COLUMNS = {
    "records_folder": ("str", "name of the record folder the row was read from"),
    "paper_category": ("str", "operator category of the paper's table (matmul, convolution, activation, "
                              "normalization, pooling, reduction, loss, other; kbstudy.harness.problems.paper_category)"),
    "dtype_status": ("str", "not_applicable (fp32), ran, float32_only (kernel hard-coded to float32: skipped for it, "
                            "its dtype error, or a failure the static scan explains), failed "
                            "(kbstudy.analysis.headline.dtype_status)"),
}
_JSON_COLUMNS = ("metadata", *JSON_COLUMNS, "coverage_sentinels", "degenerate_inputs")
_SORT = ["hardware", "problem_version", "precision", "model_config", "level", "problem_id", "sample_id", "key"]


# ------------------------------------------------------------------------------------------------ merge


def orphan_evaluations(evaluations, references):
    """The timed evaluation records (``eager_ms_median`` present) whose ``reference_key`` names no record of
    ``references``: their problem's reference timing, with its samples and flags, is missing from the folders (a record
    file copied back without its references; a resumed ``kbstudy eval`` measures a reference only for a problem with a
    pending candidate, so it does not repair this). Returns those rows of ``evaluations`` (DataFrames)."""
    if "reference_key" not in evaluations.columns or "eager_ms_median" not in evaluations.columns:
        return evaluations.iloc[0:0]
    known = set(references["key"]) if "key" in references.columns else set()
    timed = evaluations["eager_ms_median"].notna() & evaluations["reference_key"].notna()
    return evaluations[timed & ~evaluations["reference_key"].isin(known)]


def merge_record_folders(dest: str | os.PathLike, sources: Iterable[str | os.PathLike]) -> dict[str, int]:
    """Merge the record files of ``sources`` into ``dest`` (``evaluations.jsonl``, ``references.jsonl``): one record per
    identity -- an evaluation's ``(key, model_config, sample_id)`` (``kbstudy.records.schema.record_identity``: the same code
    under two configurations is two records), a reference's ``key`` -- and of several, the newest by ``created_utc``
    (ISO 8601 UTC with whole seconds, as ``kbstudy.records.provenance`` writes it, so text order is time order as far as the
    machines' clocks agree; on a tie or with no time, the first in source order). Each kept row is written with
    ``json.dumps`` (the records' own format), at the position of the identity's first occurrence; rows without a
    ``key`` are not records and are left out. ``dest``'s own records are kept only if ``dest`` is listed among the
    sources (the scripts list it first). Files are replaced atomically (written beside, then renamed). Returns
    ``{file name: records written}``.

    What the GPU scripts run after evaluations into separate folders, each begun as a copy of ``dest``. The newest
    wins because a retried record (``kbstudy eval --retry-outcome``) is appended under the key of the one it
    replaces, and a folder copied before that retry still holds the old one; keeping the first copy instead
    drops the records of such retries."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    sources = [Path(s) for s in sources]
    counts = {}
    for name in RECORD_FILES:
        chosen: dict[tuple, dict] = {}  # insertion order: each identity's first occurrence
        for src in sources:
            for row in iter_jsonl(src / name):
                if row.get("key") is None:
                    continue
                ident = record_identity(row) if name == "evaluations.jsonl" else (row["key"],)
                kept = chosen.get(ident)
                if kept is None or str(row.get("created_utc") or "") > str(kept.get("created_utc") or ""):
                    chosen[ident] = row
        tmp = dest / f".{name}.merge"
        tmp.write_text("".join(json.dumps(row) + "\n" for row in chosen.values()))
        os.replace(tmp, dest / name)
        counts[name] = len(chosen)
    return counts


# ------------------------------------------------------------------------------------------------ schema


def _schema_rows(doc: Path, section: str) -> dict[str, tuple[str, str]]:
    """``{field: (type, meaning)}`` from the markdown table under ``## `<section>``` of docs/reference/record_schema.md."""
    if not doc.is_file():
        return {}
    text = doc.read_text()
    m = re.search(rf"^## `{section}`\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    rows = {}
    for line in (m.group(1) if m else "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], " | ".join(cells[2:]))
    return rows


def _markdown(frame) -> str:
    """A pandas frame as a GitHub markdown table (no index; missing as ``-``)."""
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = ["-" if (v is None or (isinstance(v, float) and v != v)) else
                 (f"{v:.3g}" if isinstance(v, float) else str(v)) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ release


def _as_jsonl(frame, path: Path) -> None:
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
            v = v.item()
            return None if isinstance(v, float) and not math.isfinite(v) else v
        return v

    with path.open("w") as fh:
        for row in frame.to_dict("records"):
            fh.write(json.dumps({k: clean(v) for k, v in row.items()}) + "\n")


def _as_parquet(frame, path: Path):
    out = frame.copy()
    for col in _JSON_COLUMNS:
        if col in out.columns:
            # None, or NaN where a record predates the field (e.g. problem_flags before schema 3): a null, not "NaN"
            out[col] = out[col].map(lambda v: None if v is None or (isinstance(v, float) and v != v)
                                    else json.dumps(v, sort_keys=True))
    out.to_parquet(path, index=False)
    return pq.read_schema(path)


def write_release(records: Iterable[str | os.PathLike], out: str | os.PathLike, *, name: str | None = None,
                  command: str | None = None, root: str | os.PathLike | None = None) -> dict[str, Path]:
    """Write the dataset of the record folders ``records`` into ``out`` (layout in the module docstring).

    Args:
        records: record folders, in priority order (a repeated attempt is taken from the first).
        out: the release folder (created; its files replaced).
        name: the dataset's name in the README (default: ``out``'s name).
        command: the command line written into the README (default: the ``kbstudy release`` call that regenerates it).
        root: the repository root, for repo-relative folder names in the README and for docs/reference/record_schema.md.

    Returns ``{file name: path}``. Raises ``ValueError`` if the folders hold no evaluation records.
    """
    root = Path(root) if root is not None else find_project_root(Path(__file__).parent)
    records = [Path(r) for r in records]
    out = Path(out)
    name = name or out.name

    def rel(p: Path) -> str:
        return relative_to_root(p, root)

    evaluations, references, dropped = load_frames(records, label="name", first_attempts=True)
    if evaluations.empty:
        raise ValueError(f"no evaluation records in {', '.join(rel(r) for r in records)}")
    evaluations["paper_category"] = evaluations["problem_name"].map(paper_category)
    evaluations["dtype_status"] = dtype_status(evaluations)
    evaluations = evaluations.sort_values([c for c in _SORT if c in evaluations.columns]).reset_index(drop=True)
    references = references.sort_values([c for c in ("hardware", "problem_version", "precision", "level",
                                                      "problem_id", "key") if c in references.columns])
    references = references.reset_index(drop=True)
    out.mkdir(parents=True, exist_ok=True)
    paths = {n: out / n for n in ("evaluations.jsonl", "evaluations.parquet", "references.jsonl",
                                  "references.parquet", "schema.json", "README.md")}
    _as_jsonl(evaluations, paths["evaluations.jsonl"])
    _as_jsonl(references, paths["references.jsonl"])
    eval_schema = _as_parquet(evaluations, paths["evaluations.parquet"])
    ref_schema = _as_parquet(references, paths["references.parquet"])

    doc = root / "docs" / "reference" / "record_schema.md"
    described = {"evaluations": {**_schema_rows(doc, "EvaluationRecord"), **DERIVED_COLUMNS},
                 "references": {**_schema_rows(doc, "ReferenceRecord"),
                                "records_folder": DERIVED_COLUMNS["records_folder"]}}
    schema = {}
    for table, arrow in (("evaluations", eval_schema), ("references", ref_schema)):
        schema[table] = [{"name": f.name, "type": described[table].get(f.name, ("", ""))[0],
                          "parquet_type": str(f.type), "description": described[table].get(f.name, ("", ""))[1]
                          + (" (JSON string in Parquet)" if f.name in _JSON_COLUMNS else "")}
                         for f in arrow if not f.name.startswith("__")]
    paths["schema.json"].write_text(json.dumps(schema, indent=1) + "\n")

    ev = evaluations
    counts = (ev.groupby(["hardware", "problem_version", "precision", "model_config"], dropna=False)
              .agg(records=("key", "size"),
                   evaluated=("outcome", lambda s: int((s == "evaluated").sum())),
                   kernelbench_correct=("kernelbench_correct", lambda s: int((s == True).sum())),  # noqa: E712
                   kbstudy_correct=("kbstudy_correct", lambda s: int((s == True).sum())),  # noqa: E712
                   float32_only=("dtype_status", lambda s: int((s == "float32_only").sum())))
              .reset_index())
    outcomes = (ev.groupby(["hardware", "problem_version", "precision", "outcome"], dropna=False).size()
                .unstack("outcome", fill_value=0).reset_index().rename_axis(columns=None))
    command = command or ("python -m kbstudy release " + " ".join(f"--records {rel(r)}" for r in records)
                          + f" --out {rel(out)}")
    commits = sorted({str(c) for c in ev["git_commit"].dropna()})
    absent = [r for r in records if not (r / "evaluations.jsonl").exists()]
    lines = [
        f"# {name}",
        "",
        f"KernelBench-format evaluations by kbstudy: {len(ev)} evaluation records ({ev['model_config'].nunique()} "
        f"model configurations, {ev[['level', 'problem_id']].drop_duplicates().shape[0]} problems) and "
        f"{len(references)} reference timings, from the record folders "
        + ", ".join(f"`{rel(r)}`" for r in records if r not in absent) + "."
        + (f" Not there yet: {', '.join(f'`{rel(r)}`' for r in absent)}." if absent else ""),
        "",
        "Regenerate (from the repository root):",
        "",
        f"    {command}",
        "",
        "Files: `evaluations.jsonl` / `evaluations.parquet` (one row per candidate x problem x precision), "
        "`references.jsonl` / `references.parquet` (PyTorch eager and torch.compile timings per problem), "
        "`schema.json` (every column). Times in ms; speedup = baseline median / candidate median. Field meanings: "
        "`docs/reference/record_schema.md`; derived columns: " + ", ".join(f"`{c}`" for c in DERIVED_COLUMNS) + ".",
        "",
        f"Hardware: {', '.join(sorted(ev['hardware'].dropna().unique()))}. Size scales: "
        f"{', '.join(str(s) for s in sorted(ev['size_scale'].dropna().unique()))}. torch: "
        f"{', '.join(sorted(ev['torch_version'].dropna().unique()))}. Commits: "
        f"{', '.join(c[:12] for c in commits) if commits else 'unknown'}"
        + (" (`unknown`: records made on a machine without git and without `KBSTUDY_GIT_COMMIT` set, e.g. the first "
           "GPU runs)" if "unknown" in commits else "") + ".",
        "",
        "## Records by model configuration",
        "",
        "`evaluated` counts the outcome `evaluated`; the two correct columns count each verdict wherever a record "
        "has one, so a record whose timing failed after its verdicts were reached (outcome `timeout`, or "
        "`reference_error` when the reference's timing ran out of memory) is counted correct but not evaluated.",
        "",
        _markdown(counts),
        "",
        "## Outcomes",
        "",
        _markdown(outcomes),
        "",
    ]
    if len(dropped):
        lines += [f"{len(dropped)} records repeated an attempt of an earlier folder and were left out "
                  f"(from {', '.join(sorted(dropped['records_folder'].unique()))}).", ""]
    orphans = orphan_evaluations(ev, references)
    if len(orphans):
        lines += [f"**{len(orphans)} timed evaluation records point at a reference timing that is not in the "
                  "release** (`reference_key`; the eager and compile medians they carry are kept): "
                  + ", ".join(f"{v} {p} L{lvl}/{pid}" for v, p, lvl, pid in orphans[
                      ["problem_version", "precision", "level", "problem_id"]].drop_duplicates().itertuples(
                          index=False)) + ".", ""]
        warnings.warn(f"{len(orphans)} evaluation records have no reference record in {', '.join(map(rel, records))}",
                      stacklevel=2)
    # a folder written in phases (scripts/h200_leaderboard.sh) may be a snapshot of an unfinished run: say which phases
    # it holds, up front (the folder's README says whether they are all of them)
    snapshot = []
    for folder in records:
        done = folder / "phases_done.txt"
        if done.exists():
            phases = sorted(set(done.read_text().split()))
            snapshot += [f"**A phased run:** `{rel(folder)}` had {len(phases)} phases done when this release "
                         f"was made (`phases_done.txt`: {', '.join(phases) if phases else 'none'}); the folder's "
                         "README says whether that is the whole run or what is left. The counts below are of what "
                         "was done.", ""]
    lines[2:2] = snapshot  # after the title and before the opening paragraph
    paths["README.md"].write_text("\n".join(lines))
    return paths
