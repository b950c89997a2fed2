"""The one loader of record frames: the evaluations and references of run folders as pandas DataFrames (what the
analyses and notebooks read)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from kbstudy.records.store import RecordStore


def load_frames(folders: Iterable[str | os.PathLike]):
    """The evaluations and references of several run folders, concatenated in the order given, each row tagged with
    its folder (``records_folder``: the path as given). Returns ``(evaluations, references)``, DataFrames with one
    column per schema field plus ``records_folder``; empty (with those columns) when no folder holds records."""
    import pandas as pd

    evals, refs = [], []
    for folder in folders:
        store = RecordStore(folder)
        for frame, out in ((store.evaluations_frame(), evals), (store.references_frame(), refs)):
            if len(frame):
                out.append(frame.assign(records_folder=str(folder)))
    empty = RecordStore(Path("/nonexistent"))  # a folder without records: frames with the schema's columns
    return tuple(pd.concat(parts, ignore_index=True) if parts else blank.assign(records_folder=pd.Series(dtype=str))
                 for parts, blank in ((evals, empty.evaluations_frame()), (refs, empty.references_frame())))


def load_evaluations(folders: Iterable[str | os.PathLike]):
    """Concatenate the evaluations of several run folders into one DataFrame (what the notebooks read)."""
    return load_frames(folders)[0].drop(columns="records_folder")
