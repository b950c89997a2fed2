"""What the structural variants found in real kernels (``kbstudy.verdict.trials.STRUCTURAL_VARIANTS``): per model
configuration, how many kernels that pass KernelBench's check are correct only at the benchmark's shape, only for
contiguous inputs or only for the initial parameter values, with examples. Notebooks 01 and 02 render these.

A record's classes are ``metadata.variant_classes`` (``kbstudy.verdict.combine.combine_extra``: the kernel passed
kbstudy's check on every trial at the benchmark's shape, layout and parameters, and failed a family's trial). A
family's status per record is read from ``kbstudy_variants``: ``failed`` if a trial of it failed, ``passed`` if one
passed and none failed, ``n.a.`` if none applied, ``not run`` where the record has none of its names (records made
before the structural variants, or with them off).
"""

from __future__ import annotations

import json
from typing import Sequence

import pandas as pd

from kbstudy.analysis.audit import candidate_records
from kbstudy.verdict.trials import FAILED, FAMILIES, FAMILY_CLASSES, NOT_APPLICABLE, PASSED

#: The status of a family on a record without any of its trials.
NOT_RUN = "not run"


def _as_dict(value) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        try:
            loaded = json.loads(value)
        except ValueError:
            return {}
        return loaded if isinstance(loaded, dict) else {}
    return {}


def family_status(kbstudy_variants, family: str) -> str:
    """``failed``, ``passed``, ``n.a.`` or ``not run`` (module docstring) of one family on one record."""
    verdicts = [v for name, v in _as_dict(kbstudy_variants).items() if FAMILIES.get(name) == family]
    if not verdicts:
        return NOT_RUN
    if FAILED in verdicts:
        return FAILED
    return PASSED if PASSED in verdicts else NOT_APPLICABLE


def record_classes(metadata) -> list[str]:
    """The classes a record carries (``metadata.variant_classes``; ``[]`` where none)."""
    return list(_as_dict(metadata).get("variant_classes") or [])


def has_variant_records(evaluations) -> bool:
    """Does any record carry structural-variant verdicts?"""
    if evaluations is None or len(evaluations) == 0 or "kbstudy_variants" not in evaluations:
        return False
    return any(family_status(v, f) != NOT_RUN for v in evaluations["kbstudy_variants"] for f in FAMILY_CLASSES)


def variant_records(evaluations, precisions: Sequence[str] | None = None):
    """The real candidates' records (``audit.candidate_records``: each attempt once) that ran the structural
    variants, with a status column per family (``shape``, ``layout``, ``params``) and ``classes``."""
    ev = candidate_records(evaluations, precisions)
    ev = ev[ev.outcome == "evaluated"].copy()
    for family in FAMILY_CLASSES:
        ev[family] = [family_status(v, family) for v in ev.kbstudy_variants]
    ev = ev[(ev[list(FAMILY_CLASSES)] != NOT_RUN).any(axis=1)]
    ev["classes"] = [record_classes(m) for m in ev.metadata]
    return ev


def variant_summary(evaluations, precisions: Sequence[str] | None = None):
    """Per (precision, problem version, model configuration): ``evaluated`` records with structural variants,
    ``kernelbench_correct``, ``kbstudy_correct``, and among the KernelBench-correct ones, per class of
    :data:`kbstudy.verdict.trials.FAMILY_CLASSES`, how many carry it (a kernel may carry several), and
    ``any_class`` (at least one). Empty frame (with these columns) where no record ran the variants."""
    classes = list(FAMILY_CLASSES.values())
    columns = ["precision", "problem_version", "model_config", "evaluated", "kernelbench_correct", "kbstudy_correct",
               *classes, "any_class"]
    ev = variant_records(evaluations, precisions) if has_variant_records(evaluations) else None
    if ev is None or ev.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (precision, version, config), g in ev.groupby(["precision", "problem_version", "model_config"], sort=True):
        kb = g[g.kernelbench_correct.fillna(False).astype(bool)]
        row = {"precision": precision, "problem_version": version, "model_config": config, "evaluated": len(g),
               "kernelbench_correct": len(kb), "kbstudy_correct": int(g.kbstudy_correct.fillna(False).astype(bool).sum())}
        for cls in classes:
            row[cls] = sum(cls in c for c in kb.classes)
        row["any_class"] = sum(bool(c) for c in kb.classes)
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def variant_examples(evaluations, per_class: int = 3, precisions: Sequence[str] | None = None):
    """Up to ``per_class`` KernelBench-correct kernels of each class: ``class``, ``model_config``,
    ``problem_version``, ``problem_name``, ``candidate_id`` and ``detail`` (the first failing variant trial,
    ``metadata.kbstudy_detail``)."""
    columns = ["class", "model_config", "problem_version", "problem_name", "candidate_id", "detail"]
    ev = variant_records(evaluations, precisions) if has_variant_records(evaluations) else None
    if ev is None or ev.empty:
        return pd.DataFrame(columns=columns)
    kb = ev[ev.kernelbench_correct.fillna(False).astype(bool)]
    rows = []
    for cls in FAMILY_CLASSES.values():
        hits = kb[[cls in c for c in kb.classes]].sort_values(["model_config", "problem_name"]).head(per_class)
        for _, r in hits.iterrows():
            rows.append({"class": cls, "model_config": r.model_config, "problem_version": r.problem_version,
                         "problem_name": r.problem_name, "candidate_id": r.candidate_id,
                         "detail": str(_as_dict(r.metadata).get("kbstudy_detail") or "")[:300]})
    return pd.DataFrame(rows, columns=columns)
