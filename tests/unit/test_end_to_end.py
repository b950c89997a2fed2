"""``kbstudy.analysis.end_to_end``: the tolerant reader of substitution records, eager against production, projected
against measured, and the answer's numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from support.committed import committed_records

from kbstudy.analysis import end_to_end as e2e
from kbstudy.analysis import profiles
from kbstudy.analysis import projection as proj


def test_substitution_records_are_read_from_the_store(tmp_path):
    """The committed H100 records, one row per case; a later record of a case replaces the earlier one."""
    folder = committed_records("substitution/h100/first", file="substitutions.jsonl")
    m = e2e.load_substitution_records([folder, tmp_path / "absent"])
    assert list(m.columns) == e2e.MEASURED_COLUMNS and len(m) == 18
    assert set(m["outcome"]) == {"timed", "nothing_applicable", "check_failed"}
    timed = m[m["outcome"] == "timed"]
    assert ((timed["baseline_ms_ci_low"] <= timed["baseline_ms"]) & (timed["baseline_ms"] <= timed["baseline_ms_ci_high"])).all()
    # the record's saving is 1 - 1/speedup of the medians' ratio; the step medians give it within a few percent
    assert timed["saving"].to_numpy() == pytest.approx((1 - timed["substituted_ms"] / timed["baseline_ms"]).to_numpy(),
                                                       rel=0.05)
    assert (m.loc[m["outcome"] != "timed", "saving"] == 0).all()
    assert m.loc[m["outcome"] == "check_failed", "e2e_rel_l2"].gt(0.02).all()
    assert m.loc[m["outcome"] == "timed", "places_substituted"].eq(1).all()
    lines = (folder / "substitutions.jsonl").read_text().splitlines()
    newer = json.loads(lines[1])
    newer.update(created_utc="2999-01-01T00:00:00+00:00", saving_fraction=0.5)
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "substitutions.jsonl").write_text(json.dumps(newer) + "\n")
    m2 = e2e.load_substitution_records([folder, tmp_path / "later"])
    assert len(m2) == 18
    row = m2[(m2["workload"] == newer["workload"]) & (m2["config"] == newer["config"])
             & (m2["kernel_source"] == newer["kernel_source"])]
    assert row["saving"].iloc[0] == 0.5
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
    assert "2 of 3" in text and "0 of 3" in text and "LLM-written kernels in bert_infer@tiny (eager): 1.0% of step time" in text


def test_closest_setup_names_the_setup_nearer_the_papers_share():
    """On the committed H100 profiles the transformers' GEMM+attention share is nearer the paper's 80-86% under
    torch.compile than eager; with the interval moved below both setups' shares, eager is the nearer one."""
    setups = {s: profiles.load_profile_records(committed_records(f"profiles/h100/{s}")) for s in ("eager", "production")}
    keys = ["gpt2_train@small", "llama_infer@1b", "bert_infer@base"]
    both = e2e.setup_comparison(setups, keys)
    assert "closest to the production setup" in e2e.closest_setup(both, keys)
    assert "closest to the eager setup" in e2e.closest_setup(both, keys, paper=(0.0, 0.45))
    assert e2e.closest_setup(both, ["absent"]) == "No transformer profile in the records."
