"""The adversarial candidate files (``tests/adversarial/candidates/<name>.py``): KernelBench ``ModelNew`` modules,
each opening with a comment block that states, machine-readably,

    # cheat: <what it does and why a verdict could miss it>      (or ``# control:`` for an honest control)
    # problem: level=<L> problem_id=<P> (<problem file>)
    # expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=inputs_mutated

A description may continue on lines that start with ``#`` and more spaces. ``expect`` lists record fields and their
values (``True``, ``False``, ``None``, a number or a word); the file's name is its candidate's model configuration.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from kbstudy.harness.candidates import Candidate, make_candidate

CANDIDATES_DIR = Path(__file__).resolve().parents[1] / "adversarial" / "candidates"
KINDS = ("cheat", "control")
_FIELD = re.compile(r"^# (cheat|control|problem|expect): (.*)$")


@dataclasses.dataclass(frozen=True)
class CandidateFile:
    name: str
    kind: str  # "cheat" or "control"
    description: str
    level: int
    problem_id: int
    expect: dict
    source: str

    def candidate(self) -> Candidate:
        return make_candidate(self.source, level=self.level, problem_id=self.problem_id, model_config=self.name,
                              backend="torch", origin=str(CANDIDATES_DIR / f"{self.name}.py"))


def _value(text: str):
    literals = {"True": True, "False": False, "None": None}
    if text in literals:
        return literals[text]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _pairs(text: str, path: Path) -> dict:
    pairs = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        assert sep and key and key not in pairs, f"{path.name}: bad 'key=value' item {word!r} in {text!r}"
        pairs[key] = _value(value)
    return pairs


def read_candidate_file(path: Path) -> CandidateFile:
    """Parse one candidate file's header (see the module docstring); a malformed header fails the test."""
    source = path.read_text()
    fields: dict[str, str] = {}
    last = None
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        match = _FIELD.match(line)
        if match:
            last = match.group(1)
            assert last not in fields, f"{path.name}: '{last}' given twice"
            fields[last] = match.group(2)
        elif line.startswith("#  ") and last in KINDS:
            fields[last] += " " + line[1:].strip()
    kinds = [k for k in KINDS if k in fields]
    assert len(kinds) == 1, f"{path.name}: the header needs exactly one of '# cheat:' or '# control:'"
    assert "problem" in fields and "expect" in fields, f"{path.name}: the header needs '# problem:' and '# expect:'"
    problem = _pairs(fields["problem"].split("(")[0], path)
    expect = _pairs(fields["expect"], path)
    assert "outcome" in expect and "kbstudy_failure" in expect, f"{path.name}: expect names no outcome or failure"
    return CandidateFile(path.stem, kinds[0], fields[kinds[0]], int(problem["level"]), int(problem["problem_id"]),
                         expect, source)


def candidate_files() -> list[CandidateFile]:
    """Every candidate file, by name."""
    return [read_candidate_file(p) for p in sorted(CANDIDATES_DIR.glob("*.py"))]


def load_candidates(*names: str) -> list[Candidate]:
    """The candidates of the named files (``load_candidates("honest", "partial")``)."""
    return [read_candidate_file(CANDIDATES_DIR / f"{name}.py").candidate() for name in names]
