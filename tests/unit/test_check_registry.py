"""The registry of checks (``kbstudy.verdict.registry``, issue 27 item 6): every failure name a code path can put in
``kbstudy_failure`` is a strict entry (derived from the code: the literal failure names of the calls that make a
failed trial, plus the names built from the checks' constants), every static-scan rule and every warning is named,
and ``docs/reference/verifier.md`` lists exactly the registry's table."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from kbstudy.records.schema import EvaluationRecord, ReferenceRecord
from kbstudy.verdict import checks, registry, static_scan, trials

REPO = Path(__file__).resolve().parents[2]
#: The modules that make a failed trial or set ``kbstudy_failure``.
FAILURE_MODULES = ("kbstudy/verdict/checks.py", "kbstudy/verdict/combine.py", "kbstudy/harness/child/reference.py",
                   "kbstudy/harness/candidate_run.py", "kbstudy/harness/orchestrator.py", "kbstudy/harness/assemble.py")
#: Calls that name a failure, and the position of the failure name among their arguments.
FAILURE_CALLS = {"fail": 0, "KbstudyTrial": 1, "integrity_failure": 1}
#: Failure names computed rather than written out, as the code spells them: each is covered by the constants below
#: (``failure`` from ``accuracy_failure``; a crash's outcome on an extra trial, or a ModelNew that cannot be built for a
#: structural variant, becomes ``variant_<name>`` in
#: ``combine_extra``). A new computed name fails this test until it is covered and listed here.
COMPUTED = {"failure", "failure['failure']", "failure.failure"}


def _failure_names_in_code() -> tuple[set[str], set[str]]:
    literal, computed = set(), set()
    for rel in FAILURE_MODULES:
        tree = ast.parse((REPO / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if func not in FAILURE_CALLS:
                    continue
                pos = FAILURE_CALLS[func]
                arg = node.args[pos] if len(node.args) > pos else next(
                    (k.value for k in node.keywords if k.arg == "failure"), None)
                if func == "KbstudyTrial" and isinstance(node.args[0] if node.args else None, ast.Constant) \
                        and node.args[0].value is True:
                    continue  # a passing trial names no failure
                if isinstance(arg, ast.Constant):
                    if arg.value is not None:
                        literal.add(arg.value)
                elif arg is not None:
                    computed.add(ast.unparse(arg).replace('"', "'"))
            # fields["kbstudy_failure"] = "<name>" and {"kbstudy_failure": "<name>"}
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                    isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                    and t.slice.value == "kbstudy_failure" for t in node.targets):
                if node.value.value is not None:
                    literal.add(node.value.value)
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "kbstudy_failure" and isinstance(v, ast.Constant) \
                            and v.value is not None:
                        literal.add(v.value)
    return literal, computed


def test_names_are_unique_and_grouped():
    names = [c.name for c in registry.CHECKS]
    assert len(names) == len(set(names))
    assert {c.group for c in registry.CHECKS} == set(registry.GROUPS)
    for c in registry.CHECKS:
        assert c.checks and c.stops and c.source and c.where, c.name


def test_every_failure_the_code_can_emit_is_a_strict_entry():
    literal, computed = _failure_names_in_code()
    # the derivation finds the form, coverage and integrity failures it should (it would find none if broken)
    assert {"not_a_dense_tensor", "output_count", "shape", "dtype", "coverage", "mismatch", "nonfinite",
            "inputs_mutated", "global_state", "stale_output"} <= literal
    assert computed == COMPUTED, computed - COMPUTED
    from_constants = {*checks.ACCURACY_FAILURES.values(), *checks.INTEGRITY_FAILURES, checks.TIMING_OUTPUT_MISMATCH,
                      *(checks.variant_failure(name) for name in trials.EXTRA_NAMES)}
    strict = registry.strict_failures()
    assert literal | from_constants <= strict, (literal | from_constants) - strict
    # and nothing strict that no code emits
    assert strict == literal | from_constants


def test_every_static_scan_rule_is_named():
    rules = {name for name, value in vars(static_scan).items() if isinstance(value, re.Pattern) or (
        isinstance(value, tuple) and value and all(isinstance(v, tuple) and isinstance(v[-1], re.Pattern)
                                                   for v in value))}
    assert rules, "no pattern found in static_scan"
    named = {rule for entry in registry.STATIC_RULES.values() for rule in entry}
    assert rules == named
    assert set(registry.STATIC_RULES) <= {c.name for c in registry.CHECKS if c.stage == "static"}


def test_every_warning_is_recorded_somewhere():
    fields = {f.name for f in dataclasses.fields(EvaluationRecord)} | {f.name for f in dataclasses.fields(ReferenceRecord)}
    fields |= {f.name for f in dataclasses.fields(static_scan.DtypeScan)}
    for c in registry.CHECKS:
        if c.group == registry.WARNING:
            assert c.name in fields, c.name


def test_the_verifier_page_lists_the_registry():
    text = (REPO / "docs/reference/verifier.md").read_text()
    start, end = "<!-- registry: start -->\n", "\n<!-- registry: end -->"
    assert start in text and end in text
    table = text[text.index(start) + len(start):text.index(end)]
    assert table == registry.markdown_table(), (
        "regenerate the table: python -c 'from kbstudy.verdict.registry import markdown_table; "
        "print(markdown_table())'")
