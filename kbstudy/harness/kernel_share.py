"""How much of a candidate's GPU time runs in its own kernels rather than in vendor libraries and ATen.

A KernelBench candidate is meant to replace PyTorch's computation with its own kernels, but nothing in KernelBench's
verdict sees whether it did: a ``ModelNew`` that calls ``torch.matmul`` (cuBLAS), wraps a dead ``__global__`` around
``nn.Linear``, or hands its work to ``torch.compile`` passes like a hand-written kernel. kbstudy profiles one call of every verified candidate on the GPU (``torch.profiler``, one warm-up
and one traced call: ``kbstudy.harness.kernel_profile.profile_steps``) and sorts each device activity by its name:

* ``vendor``: cuBLAS / cuBLASLt (``nvjet_*``, ``*_xmma_gemm_*``, ``ampere_sgemm_*``, gemv/gemmSN/splitK helpers and
  anything naming a cuBLAS type), cuDNN (``cudnn``, ``xmma``, ``implicit_convolve``, cask/winograd/layout helpers),
  CUTLASS (``cutlass``, as the study's issue asks, even when a candidate instantiates CUTLASS itself), ATen
  (``at::``, ``void at::``, mangled ``_ZN2at``, ATen's copy of cub ``at_cuda_detail::``, ``c10::``, and ATen kernels
  in anonymous namespaces by name), PyTorch's FlashAttention and memory-efficient attention, cub/thrust, FBGEMM,
  NCCL, and the runtime's memcpy/memset (the memcpy and communication rules are ``kbstudy.harness.kernel_classes``'s);
* ``inductor``: Inductor-generated Triton (``triton_{poi,red,per,tem,for,spl}_...``): not vendor code, but not the
  candidate's own either (a ``torch.compile`` wrapper); counted as custom, reported apart in
  ``metadata["kernel_time_us_by_origin"]``;
* ``custom``: everything else: the candidate's Triton kernels (named after their ``@triton.jit`` function) and CUDA
  extension kernels (named after their ``__global__`` function).

``custom_kernel_share`` = (custom + inductor device time) / total device time, in [0, 1]. It is ``None`` on a CPU
(there are no device kernels: Triton runs under its interpreter as torch operations, so nothing tells a candidate's
kernel from ATen there) and when the profiler recorded no device activity.

Name rules are heuristics: a custom kernel that happens to be named like an ATen kernel in an anonymous namespace
(``softmax_warp_forward``) or that instantiates CUTLASS reads as vendor; the top kernels are recorded so such cases
can be reviewed.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Iterable

from kbstudy.harness import kernel_classes as classify

#: Origins of a device activity, in report order.
ORIGINS = ("custom", "inductor", "vendor")

#: (library, pattern) rules for vendor activity, searched (``re.search``) in order; the first match names the library.
VENDOR_RULES: tuple[tuple[str, str], ...] = (
    ("runtime", next(p for c, p, _ in classify.KERNEL_RULES if c == "memcpy")),
    ("nccl", next(p for c, p, _ in classify.KERNEL_RULES if c == "communication")),
    ("aten", r"^(void )?(at|at_cuda_detail|c10|caffe2|torch)::|^_ZN(2at|14at_cuda_detail|3c10)"),
    ("aten", r"^(void )?(\(anonymous namespace\)::)?(softmax_warp_(forward|backward)|elementwise_kernel_with_index)<"),
    ("attention", r"pytorch_flash::|^(void )?flash::|fmha_cutlass|PyTorchMemEffAttention|^(void )?flash_(fwd|bwd)_"),
    ("cublas", r"nvjet|cublas|^(void )?(gemv2[NT]_kernel|gemvNSP_kernel|gemmSN_|gemmk1_kernel|splitKreduce_kernel"
               r"|dot_kernel|reduce_1Block_kernel|scal_kernel|axpy_kernel)|^(ampere|volta|turing|maxwell|sm\d+)_\w*"
               r"(gemm|xmma)"),
    ("cudnn", r"cudnn|cask_plugin|xmma|implicit_convolve|precomputed_convolve|kern_precompute_indices"
              r"|^(void )?(cudnn::|winograd|nchwToNhwc|nhwcToNchw|nhwcAddPaddingKernel)"),
    ("cutlass", r"cutlass"),
    ("cub", r"^(void )?(at_cuda_detail::)?(cub|thrust)::"),
    ("fbgemm", r"fbgemm|split_embedding_(backward_)?codegen"),
)
#: Inductor-generated Triton kernels: ``triton_<kind>_<fused ops>_<n>`` (pointwise, reduction, persistent reduction,
#: template, foreach, split scan).
INDUCTOR_PATTERN = r"^triton_(poi|red|per|tem|for|spl)_"


@functools.lru_cache(maxsize=1)
def _compiled():
    return tuple((lib, re.compile(p)) for lib, p in VENDOR_RULES), re.compile(INDUCTOR_PATTERN)


@functools.lru_cache(maxsize=65536)
def kernel_origin(name: str) -> tuple[str, str | None]:
    """``(origin, library)`` of a device activity name: origin in :data:`ORIGINS`; library is the vendor rule that
    matched (``"cublas"``, ``"aten"``, ...), ``"inductor"``, or ``None`` for a custom kernel."""
    rules, inductor = _compiled()
    if inductor.search(name):
        return "inductor", "inductor"
    for lib, rx in rules:
        if rx.search(name):
            return "vendor", lib
    return "custom", None


def custom_kernel_share(kernels: Iterable[tuple[str, float]], top: int = 5) -> dict:
    """Share of device time in custom kernels (module docstring).

    Args:
        kernels: ``(name, device time in us)`` per kernel name (or per launch: times of equal names are summed);
            non-finite or negative times are ignored.
        top: how many of the longest kernels to list.
    Returns ``{"custom_kernel_share": float in [0, 1] or None (no device time), "top_kernels": [{"name": str
    (first 300 characters), "us": float, "origin": str, "library": str|None, "category": str}, ...] (longest
    first; category from ``kbstudy.harness.kernel_classes.classify_kernel``), "time_us_by_origin": {origin: us}}``.
    """
    totals: dict[str, float] = {}
    for name, us in kernels:
        us = float(us)
        if not math.isfinite(us) or us < 0:
            continue
        totals[name] = totals.get(name, 0.0) + us
    by_origin = {origin: 0.0 for origin in ORIGINS}
    for name, us in totals.items():
        by_origin[kernel_origin(name)[0]] += us
    total = sum(by_origin.values())
    share = (by_origin["custom"] + by_origin["inductor"]) / total if total > 0 else None
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    top_kernels = [{"name": name[:300], "us": round(us, 3), "origin": kernel_origin(name)[0],
                    "library": kernel_origin(name)[1], "category": classify.classify_kernel(name)}
                   for name, us in ranked]
    return {"custom_kernel_share": share, "top_kernels": top_kernels,
            "time_us_by_origin": {k: round(v, 3) for k, v in by_origin.items()}}
