"""Static scans of a candidate's source (pure: text in, a finding out; nothing is run).

* :func:`detect_backend`: which backend a source is written for (PyTorch, Triton or CUDA C++);
* :func:`scan_dtype_support`: whether a CUDA candidate is hard-coded to float32, so that a bf16 or fp16 evaluation of
  it cannot measure a bf16 kernel. Every CUDA candidate's metadata carries the result (``kbstudy.harness.candidates``),
  and an evaluation at another precision can record such a candidate as skipped (``EvalConfig.skip_float32_only``).
"""

from __future__ import annotations

import ast
import dataclasses
import re


def detect_backend(source: str) -> str:
    """``"cuda"`` for CUDA C++ through ``torch.utils.cpp_extension`` (``load_inline``/``load``), ``"triton"`` for
    ``@triton.jit`` kernels, else ``"torch"`` (plain PyTorch). CUDA wins when both appear, since it needs nvcc."""
    if re.search(r"\bload_inline\b|cpp_extension\.load\b|__global__", source):
        return "cuda"
    if re.search(r"@triton\.(jit|autotune)|import triton", source):
        return "triton"
    return "torch"


#: The candidate metadata key (and so the record ``metadata`` key) of :func:`scan_dtype_support`'s result.
DTYPE_SCAN_KEY = "dtype_scan"

#: Version of the scan's rules, stored with its result so that records made under other rules can be told apart.
DTYPE_SCAN_VERSION = 1

#: Accesses that read or write a tensor's memory as 32-bit floats whatever its dtype: ``data_ptr<float>()``
#: (and ``data<float>``, ``const_/mutable_data_ptr<float>``), raw ``float*`` casts of a data pointer, and
#: ``float4`` vector loads.
_FLOAT_ACCESS = (
    ("data_ptr<float>", re.compile(r"\b(?:const_|mutable_)?data(?:_ptr)?\s*<\s*float\s*>")),
    ("float* cast of a data pointer", re.compile(r"(?:\(\s*(?:const\s+)?float\s*\*\s*\)|(?:static|reinterpret)_cast\s*<\s*"
                                                  r"(?:const\s+)?float\s*\*\s*>)\s*\(?\s*[\w.\[\]()>-]*data_ptr\s*\(")),
)

#: Dispatch macros whose type list lacks bfloat16 and half: ``AT_DISPATCH_FLOATING_TYPES`` is float and double only
#: (a bf16 tensor raises ``"<name>" not implemented for 'BFloat16'``).
_FLOAT_DISPATCH = re.compile(r"\bAT_DISPATCH_FLOATING_TYPES\s*\(")

#: A dtype check that accepts float32 alone (``TORCH_CHECK(x.dtype() == torch::kFloat32, ...)``, ``AT_ASSERTM(...
#: ScalarType::Float ...)``).
_FLOAT_CHECK = re.compile(r"\b(?:TORCH_CHECK|AT_ASSERTM?|TORCH_INTERNAL_ASSERT)\s*\([^;]*?"
                          r"(?:kFloat32|kFloat\b|ScalarType::Float\b|torch::kF32)")

#: Output allocations in float32 whatever the input dtype (``.dtype(torch::kFloat32)``, ``torch::kFloat``).
_FLOAT_ALLOC = re.compile(r"\b(?:zeros|empty|ones|full)\w*\s*\([^;]*?(?:kFloat32|kFloat\b|ScalarType::Float\b)")

#: Evidence that the C++/CUDA code handles bfloat16: a dispatch macro that includes it, or bf16 types.
_BF16_SUPPORT = re.compile(r"AT_DISPATCH_\w*\([^;]*?(?:kBFloat16|BFloat16)|AT_DISPATCH_\w*REDUCED_FLOATING|"
                           r"AT_DISPATCH_FLOATING_TYPES_AND2?\s*\([^;]*?BFloat16|__nv_bfloat16|\bat::BFloat16\b|"
                           r"\bc10::BFloat16\b|data_ptr\s*<\s*(?:at::|c10::)?BFloat16\s*>")

#: In ``ModelNew``: a test of the input dtype against float32 (the custom kernel runs for float32 alone, PyTorch
#: otherwise) and casts of inputs to float32 before the kernel.
_PY_FLOAT_GUARD = re.compile(r"\.dtype\s*(?:==|!=|is not|is)\s*torch\.float(?:32)?\b")

_PY_FLOAT_CAST = re.compile(r"\.float\s*\(\s*\)|\.to\s*\(\s*(?:dtype\s*=\s*)?torch\.float(?:32)?\s*\)")


@dataclasses.dataclass(frozen=True)
class DtypeScan:
    """What a static scan of a CUDA candidate's source says about the dtypes it accepts (see
    :func:`scan_dtype_support` for the rules).

    ``float32_only`` is the flag: the custom kernel only handles float32 tensors, so a bf16 (or fp16) evaluation of
    it cannot measure a bf16 kernel. ``evidence`` lists what decided it (``"data_ptr<float> (line 31)"``, ...).
    """

    float32_only: bool
    evidence: tuple[str, ...] = ()
    bf16_support: bool = False
    torch_fallback: bool = False  # ModelNew runs the kernel for float32 inputs alone, PyTorch otherwise
    casts_to_float32: bool = False  # ModelNew casts inputs to float32 before the kernel

    def as_metadata(self) -> dict:
        """A JSON-ready dict (what ``metadata["dtype_scan"]`` holds on a candidate and its records)."""
        return {"float32_only": self.float32_only, "evidence": list(self.evidence), "bf16_support": self.bf16_support,
                "torch_fallback": self.torch_fallback, "casts_to_float32": self.casts_to_float32,
                "version": DTYPE_SCAN_VERSION}


def _strip_cpp_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments blanked (line numbers kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _model_new_source(source: str) -> str:
    """The source of the ``ModelNew`` class (the Python side that calls the kernel), or ``""``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return ast.get_source_segment(source, node) or ""
    return ""


def scan_dtype_support(source: str) -> DtypeScan:
    """Statically decide whether a CUDA candidate (``load_inline`` C++/CUDA in a Python source) is hard-coded to
    float32, i.e. cannot run a bf16 or fp16 evaluation as a custom kernel.

    Rules (comments stripped from the C++/CUDA text; whole source scanned, since the kernels are Python strings):

    * *float32 evidence*: a tensor's memory accessed as ``float`` (``data_ptr<float>()``, ``data<float>()``, a
      ``float*`` cast of ``data_ptr()``); ``AT_DISPATCH_FLOATING_TYPES(`` (float and double only); a
      ``TORCH_CHECK``/``AT_ASSERT`` of ``kFloat32``/``ScalarType::Float``. (Float32 output allocations are listed
      as evidence too but do not decide alone.)
    * *bf16 evidence*: a dispatch macro listing ``BFloat16`` (``AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16,
      ...)``, ``AT_DISPATCH_REDUCED_FLOATING_TYPES``), or ``__nv_bfloat16``/``at::BFloat16`` in the code.
    * *Python side* (``ModelNew``): a test ``x.dtype == torch.float32`` (the kernel runs for float32 alone, PyTorch
      otherwise: ``torch_fallback``), or a cast of the inputs with ``.float()``/``.to(torch.float32)``
      (``casts_to_float32``: it accepts bf16 by computing in float32).

    ``float32_only`` = float32 evidence and no bf16 evidence and no cast to float32; or a PyTorch fallback for
    non-float32 inputs (then a bf16 run measures PyTorch, not the candidate). At run time such a kernel given bf16
    tensors raises ``expected scalar type Float but found BFloat16`` (``data_ptr<float>``) or ``"<name>" not
    implemented for 'BFloat16'`` (``AT_DISPATCH_FLOATING_TYPES``), or, through a raw ``float*`` cast, reads and
    writes the wrong bytes: ``kbstudy.analysis.headline.DTYPE_ERROR_RE`` recognises the messages in records.

    On the leaderboard's 264 level-1 kernels: every one is ``float32_only`` (257 read memory through
    ``data_ptr<float>``, one of them only behind a float32 test in ``ModelNew`` with a PyTorch fallback; 7 dispatch
    through ``AT_DISPATCH_FLOATING_TYPES``). A Triton or PyTorch source gets ``float32_only=False`` with no evidence
    (their dtypes follow the inputs unless cast).
    """
    if detect_backend(source) != "cuda":
        return DtypeScan(float32_only=False)
    code = _strip_cpp_comments(source)

    def line_of(pos: int) -> int:
        return code.count("\n", 0, pos) + 1

    evidence: list[str] = []
    for label, pattern in _FLOAT_ACCESS:
        m = pattern.search(code)
        if m:
            evidence.append(f"{label} (line {line_of(m.start())})")
    for label, pattern in (("AT_DISPATCH_FLOATING_TYPES: float and double only", _FLOAT_DISPATCH),
                           ("dtype check for float32", _FLOAT_CHECK)):
        m = pattern.search(code)
        if m:
            evidence.append(f"{label} (line {line_of(m.start())})")
    decisive = bool(evidence)
    m = _FLOAT_ALLOC.search(code)
    if m:
        evidence.append(f"float32 output allocation (line {line_of(m.start())})")
    bf16 = bool(_BF16_SUPPORT.search(code))
    model_new = _model_new_source(source)
    guard = bool(_PY_FLOAT_GUARD.search(model_new))
    cast = bool(_PY_FLOAT_CAST.search(model_new))
    if guard:
        evidence.append("ModelNew runs the kernel for float32 inputs only (PyTorch otherwise)")
    if cast:
        evidence.append("ModelNew casts inputs to float32")
    float32_only = (decisive and not bf16 and not cast) or guard
    return DtypeScan(float32_only=float32_only, evidence=tuple(evidence), bf16_support=bf16, torch_fallback=guard,
                     casts_to_float32=cast)
