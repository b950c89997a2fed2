"""``kbstudy.analysis.end_to_end``: the tolerant reader of substitution records, eager against production, projected
against measured, and the answer's numbers."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from support.committed import committed_records

from kbstudy.analysis import end_to_end as e2e
from kbstudy.analysis import profiles
from kbstudy.analysis import projection as proj


def _write(folder, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "records.jsonl").write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))


def test_substitution_records_are_read_in_every_form(tmp_path):
    _write(tmp_path / "a", [
        {"workload": "bert_infer", "config": "production", "mode": "infer", "kernel_source": "llm",
         "baseline_ms": {"median": 10.0, "ci": [9.8, 10.2]}, "substituted_ms": {"median": 10.5, "ci": [10.3, 10.7]},
         "places_substituted": ["encoder.0.ln"], "places_not_applicable": {"float32-only kernel in bf16": 3},
         "e2e_rel_l2": 2e-3},
        "not json",
        {"no_workload": True},
    ])
    _write(tmp_path / "b" / "deeper", [
        {"workload": "gpt2_train@small", "kernel_source": "llm", "baseline_ms_median": 40.0,
         "baseline_ms_ci_low": 39.0, "baseline_ms_ci_high": 41.0, "substituted_ms_median": 38.0, "saving": 0.05,
         "places_substituted": 4, "places_not_applicable": [{"place": "x", "reason": "shape not verified"},
                                                            {"place": "y", "reason": "shape not verified"}]},
    ])
    m = e2e.load_substitution_records([tmp_path / "a", tmp_path / "b", tmp_path / "absent"])
    assert list(m.columns) == e2e.MEASURED_COLUMNS and len(m) == 2
    a, b = m.iloc[0], m.iloc[1]
    assert (a["baseline_ms"], a["baseline_ms_ci_low"], a["substituted_ms_ci_high"]) == (10.0, 9.8, 10.7)
    assert a["saving"] == pytest.approx(-0.05) and a["places_substituted"] == 1 and a["places_not_applicable"] == 3
    assert "float32-only" in a["not_applicable_reasons"] and a["config"] == "production"
    assert b["config"] == "eager" and b["saving"] == 0.05 and b["baseline_ms_ci_high"] == 41.0
    assert b["places_not_applicable"] == 2 and b["not_applicable_reasons"] == "shape not verified"
    assert math.isnan(b["e2e_rel_l2"])
    assert e2e.load_substitution_records([]).empty


def test_setups_projected_and_measured_side_by_side(tmp_path):
    folder = committed_records("profiles/cpu/study", file="workloads.jsonl")
    kernels, workloads = profiles.load_profile_records(folder)
    keys = list(workloads.loc[workloads["role"] == "seven", "workload_key"])
    both = e2e.setup_comparison({"eager": (kernels, workloads), "production": (kernels, workloads)}, keys)
    assert list(both["setup"].unique()) == ["eager", "production"] and len(both) == 2 * len(keys)
    e, p = both[both["setup"] == "eager"], both[both["setup"] == "production"]
    assert e["addressable_fraction"].to_numpy() == pytest.approx(p["addressable_fraction"].to_numpy())
    assert (both["triton_share"] == 0).all()

    att = pd.DataFrame({"category": ["activation", "activation", "reduction"], "speedup": [2.0, 0.5, 1.5],
                        "won": [True, False, True]})
    rates = proj.kernel_category_rates(att)
    llm = proj.workload_projection(proj.category_projection(kernels, workloads, rates, keys=keys), rates, workloads)
    measured = pd.DataFrame([{**dict.fromkeys(e2e.MEASURED_COLUMNS), "workload": "bert_infer", "config": "eager",
                              "kernel_source": "llm", "saving": 0.01, "mode": "infer"}])
    table = e2e.projected_vs_measured({("eager", "llm"): llm}, measured)
    assert len(table) == len(keys) and table["measured_saving"].notna().sum() == 1
    row = table[table["workload_key"] == "bert_infer@tiny"].iloc[0]
    assert row["difference_pp"] == pytest.approx(100 * (0.01 - row["projected_of_step"]))
    assert row["kernel_source"] == "LLM-written"
    text = e2e.answer(llm, rates, rates.assign(wins=0), None, table, "CPU")
    assert "2 of 3" in text and "0 of 3" in text and "bert_infer@tiny (eager, LLM-written) 1.0%" in text
