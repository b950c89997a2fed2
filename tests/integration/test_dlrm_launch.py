"""The launch path our twelve DLRM-Bench kernel files share (``_launch`` and ``_specialization``, one copy per file:
a candidate file must stand alone).

``_launch`` launches a compiled kernel directly once the JIT has compiled it for an argument specialisation; that is
correct only if ``_specialization`` tells apart every pair of launches Triton would compile differently. On a CPU the
direct path is off (the interpreter compiles nothing), so the GPU runs' verdicts cover it (every H200 run since the
lean launch, ``outputs/records/dlrm_bench/h200/launch-paths`` first: all 12 pass both verdicts through it, and with the
current device in the cache key in ``outputs/records/dlrm_bench/h200/final``); here: the specialisation key itself,
that every file routes every launch through ``_launch``, and that the twelve copies are the same code.
"""

import ast
from pathlib import Path

import pytest
import torch

from kbstudy.suites.dlrm_bench import exec_source

KERNELS = Path(__file__).resolve().parents[2] / "kbstudy" / "suites" / "dlrm_bench" / "kernels"
FILES = sorted(KERNELS.glob("level_5_problem_*_sample_0_kernel.py"))
SHARED = ("_specialization", "_launch")


def _functions(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {node.name: ast.unparse(node) for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_twelve_files_share_one_launch_path():
    assert len(FILES) == 12
    first = _functions(FILES[0])
    for path in FILES[1:]:
        funcs = _functions(path)
        for name in SHARED:
            assert funcs.get(name) == first[name], f"{path.name}: {name} differs from {FILES[0].name}'s"


def _jit_names(tree: ast.Module) -> set[str]:
    """Module-level functions decorated with triton.jit (directly or under triton.autotune)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if ast.unparse(target) in ("triton.jit", "triton.autotune"):
                    names.add(node.name)
    return names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("_")[3])
def test_every_launch_goes_through_launch(path):
    tree = ast.parse(path.read_text())
    kernels = _jit_names(tree)
    assert kernels, "no Triton kernel found"
    launched = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_launch":
            launched.add(ast.unparse(node.args[0]))
    inside_launch = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "_launch"
                     for n in ast.walk(f)}
    direct = [ast.unparse(node) for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) and id(node) not in inside_launch
              and ast.unparse(node.func.value) in kernels]
    assert not direct, f"launched around _launch: {direct}"
    # names of kernels used inside another kernel's body: called (a device function) or passed as a function (e.g.
    # problem 2's ``_seg_add``, the combine function of ``tl.associative_scan``)
    used_inside = {n.id for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in kernels
                   for n in ast.walk(f) if isinstance(n, ast.Name) and n.id in kernels and n.id != f.name}
    # every kernel that is not only used from another kernel is launched through _launch
    top_level = kernels - used_inside
    assert top_level <= launched, f"kernels never launched: {top_level - launched}"


@pytest.fixture(scope="module")
def spec():
    return exec_source(FILES[0].read_text(), "launch_path")["_specialization"]


def test_specialization_tells_apart_what_triton_compiles_apart(spec):
    x = torch.zeros(64)
    base = spec((x, 128, 3, 0.5))
    # same specialisation: another aligned tensor of the same dtype, ints with the same properties, another float
    assert spec((torch.ones(64), 256, 5, 2.0)) == base
    # a tensor off 16-byte alignment (one float in), another dtype
    assert spec((x[1:], 128, 3, 0.5)) != base
    assert spec((x.double(), 128, 3, 0.5)) != base
    # an int equal to 1, one divisible by 16 or not, one past int32, one past int64 (uint64)
    assert spec((x, 1, 3, 0.5)) != base
    assert spec((x, 128, 16, 0.5)) != base
    assert spec((x, 2**31, 3, 0.5)) != spec((x, 2**31 - 16, 3, 0.5))
    assert spec((x, 2**63 + 16, 3, 0.5)) != spec((x, 2**62, 3, 0.5))
    # bools and other values are compared by value (constexpr-like), a float only by its type
    assert spec((True,)) != spec((False,)) and spec((None,)) == spec((None,))
    assert spec((1.0,)) == spec((3.5,)) and spec((1.0,)) != spec((1,))


def test_host_time_benchmark_counts_each_forwards_launches():
    """``scripts/bench_dlrm_host.py`` on this CPU (launches replaced by a counter): every problem runs, and each
    forward makes the Triton launches it is designed for (one, except 4: two, 5: three, 10: six), so a change that
    adds a launch -- host time in every timed call -- is seen. Only ``_launch`` calls are counted, not torch ops:
    problem 4's two are its link and dense-gradient kernels (no zero fill of its row table per call, only one
    ``zero_`` when its epochs wrap)."""
    import subprocess
    import sys

    repo = KERNELS.parents[3]
    proc = subprocess.run([sys.executable, str(repo / "scripts" / "bench_dlrm_host.py"), "--calls", "2",
                           "--repeats", "1"], capture_output=True, text=True, cwd=repo, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    launches = {int(r[0]): int(r[3]) for r in rows}
    assert launches == {**{i: 1 for i in range(1, 13)}, 4: 2, 5: 3, 10: 6}
    assert all(float(r[2]) > 0 for r in rows)
