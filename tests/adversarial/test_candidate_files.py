"""Every adversarial candidate file (``candidates/*.py``) gets the verdict its header states.

Each cheat we defend against has a file there that must fail for the stated reason (``# expect:`` names the record's
``outcome``, ``kbstudy_failure`` and, where it matters, ``kernelbench_correct``: the cheats KernelBench's own check
misses say ``kernelbench_correct=True``); the honest controls beside them must pass. One ``evaluate_batch`` per
problem (module-scoped), on a CPU at 1/100 size, with the timed calls on (some cheats are caught only there).
The specific assertions on these candidates (which trials, which checks, what the record holds) are in
``test_anticheat.py``, ``test_hardening.py`` and ``tests/integration/test_verdicts.py``.
"""

from __future__ import annotations

import ast

import pytest
from support.adversarial import candidate_files
from support.helpers import cpu_config, records_by_config

from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.records.store import RecordStore

FILES = candidate_files()
#: The verdicts do not depend on the size (as in test_verdicts.py): 1/100 keeps the batch short.
SIZE_SCALE = 0.01


@pytest.fixture(scope="module")
def rows_of(all_problems, tmp_path_factory):
    """``rows_of(level, problem_id)``: the records of every candidate file for that problem by model configuration,
    from one batch per problem (run on first use)."""
    by_key = {(p.level, p.problem_id): p for p in all_problems}
    batches: dict[tuple[int, int], dict] = {}

    def rows_of(level: int, problem_id: int) -> dict:
        key = (level, problem_id)
        if key not in batches:
            files = [f for f in FILES if (f.level, f.problem_id) == key]
            tmp = tmp_path_factory.mktemp(f"adversarial_level{level}_problem{problem_id}")
            store = RecordStore(tmp / "records")
            summary = evaluate_batch([by_key[key]], [f.candidate() for f in files], store,
                                     cpu_config(size_scale=SIZE_SCALE, cache_dir=str(tmp / "cache")))
            assert summary.written == len(files)
            batches[key] = records_by_config(store)
        return batches[key]

    return rows_of


def test_the_folder_holds_cheats_and_honest_controls():
    kinds = {f.kind for f in FILES}
    assert kinds == {"cheat", "control"}, kinds
    assert len({f.source for f in FILES}) == len(FILES)


@pytest.mark.parametrize("cand", FILES, ids=[f.name for f in FILES])
def test_header_states_a_verdict_that_fits_its_kind(cand):
    tree = ast.parse(cand.source)
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), "no ModelNew class"
    if cand.kind == "cheat":
        assert cand.expect["kbstudy_correct"] is False and cand.expect["kbstudy_failure"] is not None
    else:
        assert cand.expect["kbstudy_correct"] is True and cand.expect["kbstudy_failure"] is None
        assert cand.expect["kernelbench_correct"] is True


@pytest.mark.parametrize("cand", FILES, ids=[f.name for f in FILES])
def test_candidate_gets_its_expected_verdict(rows_of, cand):
    row = rows_of(cand.level, cand.problem_id)[cand.name]
    got = {key: row[key] for key in cand.expect}
    assert got == cand.expect, (f"{cand.name} ({cand.kind}: {cand.description}): {row['error_message']}; "
                                f"{row['metadata'].get('kbstudy_detail')}")
