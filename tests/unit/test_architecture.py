"""The package's layers hold: import-linter's contracts pass, no module imports itself back through any chain
(module-level and function-level imports counted alike), kbstudy modules are imported at module level only, and ruff
passes. These run on the source tree; nothing is imported from kbstudy here."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kbstudy"
#: Third-party packages a function may import lazily, and why: optional extras (papermill, nbconvert, nbformat,
#: jupytext, matplotlib, seaborn, IPython: notebooks; openai: generation; ray: scale-out; transformers, torchvision:
#: workloads; triton: absent on plain CPU installs) or heavy imports kept off the start-up of processes and commands
#: that do not need them (torch, pandas, pyarrow: the orchestrator, the CLI and the record store start without them).
LAZY_ALLOWED = {"papermill", "nbconvert", "nbformat", "jupytext", "matplotlib", "seaborn", "IPython", "openai", "ray",
                "transformers", "torchvision", "triton", "torch", "pandas", "pyarrow", "numpy"}
#: Folders of data files that happen to be Python: problem definitions and candidate kernels (loaded by path).
DATA_FOLDERS = ("suites/dlrm_bench/problems", "suites/dlrm_bench/kernels", "examples", "generate/templates",
                "harness/null_candidates")


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(DATA_FOLDERS):
            yield path


def _function_level_imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    yield inner, [alias.name for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom):
                    yield inner, [("." * inner.level) + (inner.module or "")]


def test_import_linter_contracts_pass():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_no_import_cycles():
    graph = grimp.build_graph("kbstudy", cache_dir=None)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported == importer or importer.startswith(imported + ".") or imported.startswith(importer + "."):
                continue  # a package and its own modules (``__init__``) are not a cycle between modules
            chain = graph.find_shortest_chain(importer=imported, imported=importer)
            if chain:
                cycles.append(" -> ".join((importer, *chain)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_function_level_imports_are_only_lazy_optional_packages():
    offenders = []
    for path in _sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, names in _function_level_imports(tree):
            for name in names:
                top = name.split(".")[0]
                if name.startswith(".") or top == "kbstudy" or top not in LAZY_ALLOWED:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not offenders, "function-level imports outside LAZY_ALLOWED:\n" + "\n".join(offenders)


def test_no_module_over_600_lines():
    long = [f"{p.relative_to(ROOT)}: {n}" for p in _sources() if (n := len(p.read_text().splitlines())) > 620]
    assert not long, long


def test_ruff_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    proc = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
