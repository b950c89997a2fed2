"""The one loader of record frames: the evaluations and references of run folders as pandas DataFrames (what the
analyses and notebooks read), with the options its readers need: which folders hold runs (:func:`run_folders`),
how a row names its folder, the setting a record was made in, and each attempt once (:func:`load_frames`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, NamedTuple

from kbstudy.records.store import RecordStore

#: The columns that identify one attempt across runs: two records with the same values are the same measurement
#: repeated (e.g. a smoke run and the full run re-evaluating the same kernel); ``load_frames(first_attempts=True)``
#: keeps one.
ATTEMPT_IDENTITY = ("model_config", "candidate_sha256", "problem_version", "problem_sha256", "level", "problem_id",
                    "sample_id", "precision", "size_scale", "hardware")
#: How ``records_folder`` names a row's folder (:func:`load_frames`): the path as given, the folder's name, or its
#: path relative to ``root`` (the folder's name where it lies outside).
FOLDER_LABELS = ("path", "name", "relative")
#: The columns of :attr:`RecordFrames.repeats`.
REPEAT_COLUMNS = ["records_folder", "model_config", "problem_name", "problem_version", "precision", "kept_from"]


class RecordFrames(NamedTuple):
    """What :func:`load_frames` returns."""

    #: one row per evaluation record (one column per ``EvaluationRecord`` field, plus ``records_folder``)
    evaluations: object
    #: one row per reference record (one column per ``ReferenceRecord`` field, plus ``records_folder``)
    references: object
    #: the evaluation rows left out as repeats of an earlier attempt (:data:`REPEAT_COLUMNS`; ``kept_from`` names the
    #: folder whose record was kept); empty unless ``first_attempts``
    repeats: object


def run_folders(entries: Iterable[str | os.PathLike], root: str | os.PathLike) -> tuple[list[Path], list[str]]:
    """Resolve record folders. Each entry is a run folder (holding ``evaluations.jsonl``) or a folder of run folders
    (every immediate subfolder holding one is used, sorted by name). Relative entries resolve against ``root`` (the
    caller's: notebooks pass the repository root).

    Returns ``(found, missing)``: the run folders (absolute when ``root`` is) and the entries, as given, that hold no
    records (absent folders included: a GPU run that has not happened yet is reported, not an error).
    """
    found, missing = [], []
    for entry in entries:
        path = Path(entry) if Path(entry).is_absolute() else Path(root) / entry
        if (path / "evaluations.jsonl").is_file():
            found.append(path)
            continue
        subs = sorted(p for p in path.iterdir() if (p / "evaluations.jsonl").is_file()) if path.is_dir() else []
        if subs:
            found.extend(subs)
        else:
            missing.append(str(entry))
    return found, missing


def setting_label(hardware, size_scale) -> str:
    """The setting a record was made in, as tables name it: ``"<hardware>, full size"`` or ``"<hardware>, 1/<n> size"``
    (``n = 1 / size_scale`` when a whole number), else ``"<hardware>, size x<size_scale>"``."""
    scale = float(size_scale)
    if scale == 1.0:
        size = "full size"
    elif abs(1 / scale - round(1 / scale)) < 1e-9:
        size = f"1/{round(1 / scale)} size"
    else:
        size = f"size x{scale:g}"
    return f"{hardware}, {size}"


def repeated_attempts(frame):
    """Per row of ``frame``: whether an earlier row holds the same attempt (:data:`ATTEMPT_IDENTITY`, over the columns
    the frame has). Keeping the rows where this is False keeps the first record of each attempt in row order."""
    import pandas as pd  # on first use: the harness's processes import the records layer without pandas

    ident = [c for c in ATTEMPT_IDENTITY if c in frame.columns]
    if not ident or frame.empty:
        return pd.Series(False, index=frame.index)
    return frame.duplicated(ident, keep="first")


#: The speedup fields of a record, by baseline: the ratio and its interval, then its significance.
SPEEDUP_FIELDS = (("speedup_vs_eager", "speedup_vs_eager_ci_low", "speedup_vs_eager_ci_high", "speedup_significant"),
                  ("speedup_vs_compile", "speedup_vs_compile_ci_low", "speedup_vs_compile_ci_high",
                   "speedup_vs_compile_significant"))


def withdraw_event_only_speedups(frame):
    """``frame`` (evaluation rows) with no speedup where the event timing disagreed with the host-synchronised time
    (``timing_discrepancy`` true: work the CUDA events did not see, e.g. left running on a side stream). Such a
    speedup rests on the event time alone, so no table, median or count may use it: its ratio and interval become
    missing and its significance false (the host time is no per-call time of the baseline's kind, so no speedup
    replaces it). Records made since the rule hold it already (``kbstudy.harness.assemble``); older ones kept the
    ratio beside ``speedup_significant = false``. Returns ``frame`` itself when nothing changes, else a copy."""
    if "timing_discrepancy" not in frame.columns or frame.empty:
        return frame
    flagged = frame["timing_discrepancy"].map(lambda v: v is True or (isinstance(v, (bool, int)) and bool(v)))
    flagged = flagged.astype(bool)
    if not flagged.any():
        return frame
    frame = frame.copy()
    for *values, significance in SPEEDUP_FIELDS:
        for column in values:
            if column in frame.columns:
                frame[column] = frame[column].astype(object)
                frame.loc[flagged, column] = None
        if significance in frame.columns:
            frame[significance] = frame[significance].astype(object)
            frame.loc[flagged, significance] = False
    return frame


def _folder_label(folder: str, label: str, root: str | os.PathLike | None) -> str:
    if label == "path":
        return folder
    if label == "relative":
        try:
            return str(Path(folder).resolve().relative_to(Path(root).resolve()))
        except ValueError:
            pass
    return Path(folder).name


def load_frames(folders: Iterable[str | os.PathLike], *, label: str = "path", root: str | os.PathLike | None = None,
                settings: bool = False, first_attempts: bool = False) -> RecordFrames:
    """The evaluations and references of several run folders, concatenated in the order given (a missing folder
    holds none).

    Args:
        folders: run folders (:func:`run_folders` expands folders of run folders).
        label: how the ``records_folder`` column names each row's folder (:data:`FOLDER_LABELS`): ``"path"`` as given,
            ``"name"`` the folder's name, ``"relative"`` its path relative to ``root`` (its name outside ``root``).
        root: the folder ``label="relative"`` is relative to (required for it).
        settings: add ``setting``, the hardware and size scale a record was made in (:func:`setting_label`).
        first_attempts: keep each attempt once (:data:`ATTEMPT_IDENTITY`): where two folders hold the same attempt,
            the record of the folder listed first; duplicate references (same ``key``) likewise. The evaluation rows
            left out are returned as ``repeats``.
    Returns :class:`RecordFrames` ``(evaluations, references, repeats)``: DataFrames with one column per schema field
    plus ``records_folder`` (and ``setting``), with no speedup where the event timing disagreed with the host time
    (:func:`withdraw_event_only_speedups`); empty, with those columns, when no folder holds records. Raises
    ``ValueError`` for an unknown ``label`` or ``label="relative"`` without ``root``.
    """
    import pandas as pd  # on first use: the harness's processes import the records layer without pandas

    if label not in FOLDER_LABELS or (label == "relative" and root is None):
        raise ValueError(f"label must be one of {FOLDER_LABELS} (\"relative\" with a root), not {label!r}")
    evals, refs = [], []
    for folder in folders:
        store = RecordStore(folder)
        name = _folder_label(str(folder), label, root)
        for frame, out in ((store.evaluations_frame(), evals), (store.references_frame(), refs)):
            if len(frame):
                out.append(frame.assign(records_folder=name))
    empty = RecordStore(Path("/nonexistent"))  # a folder without records: frames with the schema's columns
    evaluations, references = (
        pd.concat(parts, ignore_index=True) if parts else blank.assign(records_folder=pd.Series(dtype=str))
        for parts, blank in ((evals, empty.evaluations_frame()), (refs, empty.references_frame())))
    evaluations = withdraw_event_only_speedups(evaluations)
    if settings:
        for frame in (evaluations, references):
            frame["setting"] = [setting_label(h, s) for h, s in zip(frame["hardware"], frame["size_scale"])]
    repeats = pd.DataFrame(columns=REPEAT_COLUMNS)
    if first_attempts:
        ident = [c for c in ATTEMPT_IDENTITY if c in evaluations.columns]
        repeat = repeated_attempts(evaluations)
        kept_from = evaluations.groupby(ident, dropna=False, sort=False)["records_folder"].transform("first")
        repeats = evaluations[repeat].assign(kept_from=kept_from[repeat])[REPEAT_COLUMNS].reset_index(drop=True)
        evaluations = evaluations[~repeat].reset_index(drop=True)
        references = references.drop_duplicates("key", keep="first").reset_index(drop=True)
    return RecordFrames(evaluations, references, repeats)


def load_evaluations(folders: Iterable[str | os.PathLike]):
    """The evaluations of several run folders as one DataFrame, without the ``records_folder`` column
    (:func:`load_frames`)."""
    return load_frames(folders).evaluations.drop(columns="records_folder")
