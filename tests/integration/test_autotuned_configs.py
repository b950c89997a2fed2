"""``kbstudy.harness.child.autotune.autotuned_configs``: what a candidate module's Triton autotuners chose, read after its calls. A
real ``triton.autotune`` kernel with two configs runs under ``TRITON_INTERPRET=1`` (in a child process, so the
interpreter setting is in place before Triton is imported) with a benchmark that ranks config ``BLOCK = 32`` first;
a second one sits under ``triton.heuristics`` and its ``BLOCK = 16`` config fails its benchmark (``inf``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r'''
import json, types
import torch, triton, triton.language as tl
from kbstudy.harness.child.autotune import autotuned_configs

def _bench(kernel_call, quantiles=None):
    kernel_call()
    ms = 1.0 if _bench.block == 32 else 2.0   # set by the pre-hook below: rank BLOCK = 32 first
    return [ms, ms * 0.9, ms * 1.1] if quantiles else ms

def _hook(nargs, reset_only=False):
    if not reset_only:
        _bench.block = nargs["BLOCK"]

@triton.autotune(configs=[triton.Config({"BLOCK": 16}, num_warps=1, pre_hook=_hook),
                          triton.Config({"BLOCK": 32}, num_warps=2, pre_hook=_hook)],
                 key=["n"], do_bench=_bench)
@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)

def _bench_fails_16(kernel_call, quantiles=None):
    kernel_call()
    ms = float("inf") if _bench.block == 16 else 3.0   # a config that failed: Triton's benchmark gives inf
    return [ms, ms, ms] if quantiles else ms

@triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
@triton.autotune(configs=[triton.Config({"BLOCK": 16}, num_warps=1, pre_hook=_hook),
                          triton.Config({"BLOCK": 32}, num_warps=1, pre_hook=_hook)],
                 key=["n"], do_bench=_bench_fails_16)
@triton.jit
def _wrapped_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)

module = types.ModuleType("kbstudy_candidate")
module._copy_kernel = _copy_kernel
module._wrapped_kernel = _wrapped_kernel
module.not_a_kernel = 3
before = autotuned_configs(module)
for n in (100, 7):
    x = torch.arange(n, dtype=torch.float32); y = torch.empty_like(x)
    _copy_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    assert torch.equal(x, y)
x = torch.arange(9, dtype=torch.float32); y = torch.empty_like(x)
_wrapped_kernel[lambda meta: (triton.cdiv(9, meta["BLOCK"]),)](x, y, 9)
assert torch.equal(x, y)
print(json.dumps({"before": before, "after": autotuned_configs(module),
                  "plain": autotuned_configs(types.ModuleType("empty"))}))
'''


def test_autotuned_configs_records_each_key_and_the_benchmark():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["plain"] == {}
    assert got["before"]["_copy_kernel"] == {"configs": 2, "chosen": {}, "timings_ms": {}}
    tuned = got["after"]["_copy_kernel"]
    assert tuned["configs"] == 2
    # one cache entry per key (n and the tensors' dtypes), each the config the benchmark ranked first
    assert len(tuned["chosen"]) == 2 and all("100" in k or "7" in k for k in tuned["chosen"]), tuned
    assert all(c["BLOCK"] == 32 and c["num_warps"] == 2 for c in tuned["chosen"].values()), tuned
    # the last key's benchmark: both configs, the candidate's own quantiles in ms
    assert sorted(t[0] for t in tuned["timings_ms"].values()) == [1.0, 2.0], tuned
    # an autotuner under triton.heuristics is found; a config whose benchmark failed (inf) is recorded as None
    wrapped = got["after"]["_wrapped_kernel"]
    assert [c["BLOCK"] for c in wrapped["chosen"].values()] == [32], wrapped
    assert sorted(map(str, (t[0] for t in wrapped["timings_ms"].values()))) == ["3.0", "None"], wrapped
