"""The harness's shape: the child side never imports the parent side, no kbstudy import hides inside a function, no
module grows past ~600 lines, every message of the protocol is a frozen dataclass that survives the wire, and the
outcome enum holds exactly the strings records hold. Static (``ast``), no process started."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from kbstudy.harness import protocol
from kbstudy.records.outcomes import OUTCOMES, Outcome

PACKAGE = Path(__file__).resolve().parents[2] / "kbstudy"
HARNESS = PACKAGE / "harness"
#: The orchestrator's side: what a child process must never load.
PARENT_SIDE = {"kbstudy.harness.orchestrator", "kbstudy.harness.pool", "kbstudy.harness.builds",
               "kbstudy.harness.assemble", "kbstudy.harness.candidate_run", "kbstudy.harness.reference_run",
               "kbstudy.harness.config", "kbstudy.harness.gpu_lock", "kbstudy.harness.build_cache"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _harness_modules() -> list[Path]:
    return [p for p in sorted(HARNESS.rglob("*.py")) if "null_candidates" not in p.parts]


def _kbstudy_imports(path: Path) -> list[tuple[str, bool]]:
    """``(module, inside a function)`` for every kbstudy import of ``path`` (``from kbstudy.x import y`` counts as
    ``kbstudy.x.y`` when that is a module, else ``kbstudy.x``)."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name, nested) for a in child.names if a.name.startswith("kbstudy"))
            elif isinstance(child, ast.ImportFrom) and (child.module or "").startswith("kbstudy"):
                for alias in child.names:
                    sub = f"{child.module}.{alias.name}"
                    is_module = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() or \
                        (PACKAGE.parent / sub.replace(".", "/") / "__init__.py").exists()
                    found.append((sub if is_module else child.module, nested))
            visit(child, nested)

    visit(tree, False)
    return found


def _path_of(module: str) -> Path | None:
    base = PACKAGE.parent / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def test_the_child_side_never_imports_the_parent_side():
    roots = [_module_name(p) for p in sorted((HARNESS / "child").glob("*.py"))]
    seen, stack, via = set(), list(roots), {}
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _path_of(module)
        for imported, _ in _kbstudy_imports(path) if path else []:
            via.setdefault(imported, module)
            stack.append(imported)
    reached = sorted(seen & PARENT_SIDE)
    assert not reached, {m: via.get(m) for m in reached}


def test_no_kbstudy_import_inside_a_function():
    hidden = [(p.relative_to(PACKAGE.parent).as_posix(), m) for p in _harness_modules()
              for m, nested in _kbstudy_imports(p) if nested]
    assert hidden == []


def test_no_harness_module_over_600_lines():
    long = {p.relative_to(PACKAGE.parent).as_posix(): n for p in _harness_modules()
            if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def _messages():
    return [cls for cls in vars(protocol).values()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == protocol.__name__]


def test_every_message_is_frozen_and_commented_per_field():
    source = Path(protocol.__file__).read_text()
    classes = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
    lines = source.splitlines()
    assert len(_messages()) >= 20
    for cls in _messages():
        assert cls.__dataclass_params__.frozen, cls.__name__
        for stmt in classes[cls.__name__].body:
            if isinstance(stmt, ast.AnnAssign) and "ClassVar" not in ast.unparse(stmt.annotation):
                assert "#" in lines[stmt.lineno - 1], f"{cls.__name__}: a field without a comment"


@pytest.mark.parametrize("message", [
    protocol.Run(trial=3, seed=7, sentinel=-1.5, reuse_inputs=True, output_bytes=64, survive=True),
    protocol.Construct([1, 2.0]), protocol.Release(), protocol.Exit(), protocol.Profile(),
    protocol.TimeCandidate({"budget_ms": 5.0}, host_check=True, device_time=False),
], ids=lambda m: type(m).__name__)
def test_candidate_requests_survive_the_wire(message):
    wire = message.to_wire()
    assert wire["op"] == type(message).OP and protocol.candidate_request(wire) == message


@pytest.mark.parametrize("message", [
    protocol.InitInputs(), protocol.Inputs("timing_pool"), protocol.Verify(2, "nan", kernelbench=False),
    protocol.VerifyTiming("kbstudy"), protocol.TimeBaselines(eager=True, compile=True, timing={"min_reps": 3}),
    protocol.Close(),
], ids=lambda m: type(m).__name__)
def test_reference_requests_survive_the_wire(message):
    assert protocol.reference_request(message.to_wire()) == message


def test_roles_and_replies_survive_the_wire():
    job = protocol.ReferenceJob(source="x", device="cpu", precision="bf16", trials=3, extra_trials=({"trial": 3},))
    for role in (protocol.AssignRole("reference", {"A": None}, job),
                 protocol.AssignRole("worker", {}, protocol.CandidateJob("y", "cpu", "fp32", seed=1)),
                 protocol.AssignRole("build", {}, protocol.BuildJob("z")), protocol.AssignRole("exit")):
        assert protocol.AssignRole.from_wire(role.to_wire()) == role
    failure = protocol.Failure(Outcome.CRASHED.value, "boom", "run")
    assert protocol.Failure.of(failure.to_wire()) == failure and protocol.Failure.of({"stage": "loaded"}) is None
    assert protocol.ProfileReply(profile_error="no CUPTI").to_wire() == {"profile_error": "no CUPTI"}
    assert protocol.ProfileReply.from_wire({"kernels": [["k", 1.0]]}).kernels == [["k", 1.0]]


def test_the_exit_report_survives_the_wire_and_a_forged_one_is_checked():
    report = protocol.ExitReport(3, {"bytes": 5, "head": "hello", "tail": ""})
    assert protocol.ExitReport.of(report.to_wire()) == report
    assert protocol.ExitReport.of({"stage": "loaded"}) is None and protocol.ExitReport.of([1]) is None
    # what a candidate could write into its connection: counted as nothing, its output dropped
    assert protocol.ExitReport.of({"exit_report": [1]}) == protocol.ExitReport()
    assert protocol.ExitReport.of({"exit_report": {"escaped_processes": "9", "output": {"bytes": 1}}}) == \
        protocol.ExitReport()


def test_outcomes_are_the_record_strings():
    assert OUTCOMES == ("evaluated", "skipped", "compile_error", "runtime_error", "cuda_error", "out_of_memory",
                        "timeout", "crashed", "reference_error")
    assert all(isinstance(o, str) and o == o.value and f"{o}" == o.value for o in Outcome)
