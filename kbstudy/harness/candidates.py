"""Candidates: sources defining ``ModelNew``, tagged with their problem, model configuration and sample id.

Candidate sets load from

* a folder in KernelBench's generation-output naming, ``level_{L}_problem_{P}_sample_{S}_kernel.py``
  (``scripts/generate_samples.py`` in KernelBench); the model configuration is the folder's name unless given;
* a JSONL file, one candidate a line: ``level``, ``problem_id``, ``code`` and optionally ``model_config``
  (or ``model``/``display_name``), ``sample_id``, ``backend``, ``metadata``;
* KernelBench's leaderboard export (``leaderboard_kernels.jsonl``): its ``problem_id`` is 0-based and is shifted to
  the problem files' 1-based ids; ``display_name`` becomes the model configuration and the published speedups are
  kept in ``metadata``.

Built-in *null candidates* (see :func:`null_candidates`) are generated per problem. They calibrate the verdicts:

* ``reference``: the reference itself (must pass every verdict);
* ``zeros``: an all-zeros output; ``mean``: a constant equal to the reference output's mean;
* ``noise``: the reference plus noise at KernelBench's tolerance, ``out = ref + tol * u`` with ``u`` uniform in
  [-1, 1) elementwise and ``tol`` KernelBench's atol = rtol of the output's dtype (fp32 1e-4, fp16/bf16 1e-2), so
  ``|out - ref| <= atol`` everywhere and KernelBench's ``allclose`` passes by construction. Its relative L2 error is
  ``tol / (sqrt(3) RMS(ref))``: kbstudy rejects it exactly where the output's scale is below about ``tol / (sqrt(3)
  threshold)`` (fp32: RMS < 0.058, bf16: RMS < 0.29), i.e. where KernelBench's absolute tolerance is larger than
  the signal it judges, and accepts it (rightly: it is accurate) elsewhere;
* ``partial0.3``, ``partial10``, ``partial50``, ``partial90``: the reference computed in full, then only the first
  k% (``floor(n k / 100)`` elements) of the flattened output copied into a fresh ``torch.empty_like``; the rest is
  left as the allocator gave it (the paper's 283x kernel wrote 0.3% of its output);
* ``lowprec``: the reference computed one precision lower and cast back: fp32 runs in fp16, fp16 runs in bf16
  (weights and inputs cast, the model run in that dtype; where an op has no kernel for it, the inputs, weights and
  output are rounded to it around a computation at the run's dtype instead); bf16 runs, having no lower torch
  compute dtype that every op supports, round inputs, weights and output to 3 mantissa bits (fp8 e4m3's precision,
  bf16's exponent range). Note: at fp32 kbstudy's threshold (1e-3) admits TF32 (unit roundoff 2^-11), which is
  fp16's unit roundoff too, so fp32 ``lowprec`` on an elementwise problem is expected to pass kbstudy's check; the
  calibration reports it rather than assumes it fails;
* ``compile``: the reference under ``torch.compile`` (Inductor, default mode): an honest implementation whose error
  shows the spread a verdict must admit (must pass, like ``reference``).

:data:`CALIBRATION_NULLS` are the ones the calibration (``kbstudy calibrate``) runs beside ``reference`` by default;
``compile`` (:data:`HONEST_EXTRA_NULLS`) runs on request.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Iterable

from kbstudy.harness.problems import Problem, sha256_text

BACKENDS = ("torch", "triton", "cuda")
_SAMPLE_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
#: Fields of the leaderboard export that mark it (its problem ids are 0-based).
_LEADERBOARD_FIELDS = {"display_name", "torch_speedup", "kernel_time_ms"}


class CandidateLoadError(ValueError):
    """A path or file that does not hold a candidate set (message says which line or file and why)."""


def detect_backend(source: str) -> str:
    """``"cuda"`` for CUDA C++ through ``torch.utils.cpp_extension`` (``load_inline``/``load``), ``"triton"`` for
    ``@triton.jit`` kernels, else ``"torch"`` (plain PyTorch). CUDA wins when both appear, since it needs nvcc."""
    if re.search(r"\bload_inline\b|cpp_extension\.load\b|__global__", source):
        return "cuda"
    if re.search(r"@triton\.(jit|autotune)|import triton", source):
        return "triton"
    return "torch"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate kernel: the ``ModelNew`` source for problem (``level``, ``problem_id``)."""

    level: int
    problem_id: int
    source: str
    sha256: str
    backend: str
    model_config: str
    sample_id: int = 0
    origin: str = ""
    metadata: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)

    @property
    def candidate_id(self) -> str:
        return f"{self.model_config}/L{self.level}/{self.problem_id}/s{self.sample_id}"


def make_candidate(source: str, *, level: int, problem_id: int, model_config: str, sample_id: int = 0,
                   backend: str | None = None, origin: str = "", metadata: dict | None = None) -> Candidate:
    """Build a :class:`Candidate`; the backend is detected from the source unless given. A CUDA candidate's
    metadata gets ``dtype_scan`` (:func:`scan_dtype_support`), which every record of it then carries.

    Raises :class:`CandidateLoadError` for an unknown backend name.
    """
    backend = backend or detect_backend(source)
    if backend not in BACKENDS:
        raise CandidateLoadError(f"{origin or model_config}: unknown backend {backend!r} (expected one of {BACKENDS})")
    metadata = dict(metadata or {})
    if backend == "cuda":
        metadata.setdefault(DTYPE_SCAN_KEY, scan_dtype_support(source).as_metadata())
    return Candidate(level=int(level), problem_id=int(problem_id), source=source, sha256=sha256_text(source),
                     backend=backend, model_config=str(model_config), sample_id=int(sample_id), origin=origin,
                     metadata=metadata)


# ------------------------------------------------------------------------------------- dtype support (bf16, fp16)

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
    import ast

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


def _from_row(row: dict, where: str, model_config: str | None, leaderboard: bool) -> Candidate:
    missing = {"level", "problem_id", "code"} - set(row)
    if missing:
        raise CandidateLoadError(f"{where}: lacks {sorted(missing)} (need level, problem_id, code)")
    config = model_config or row.get("model_config") or row.get("display_name") or row.get("model")
    if not config:
        raise CandidateLoadError(f"{where}: no model configuration (model_config, display_name or model)")
    problem_id = int(row["problem_id"]) + (1 if leaderboard else 0)
    metadata = dict(row.get("metadata") or {})
    if leaderboard:
        metadata.update({k: row[k] for k in ("model", "file", "torch_speedup", "torch_compile_speedup",
                                             "baseline_torch_time_ms", "baseline_torch_compile_time_ms",
                                             "kernel_time_ms") if k in row})
    return make_candidate(row["code"], level=row["level"], problem_id=problem_id, model_config=config,
                          sample_id=row.get("sample_id", 0), backend=row.get("backend"), origin=where,
                          metadata=metadata)


def load_candidates(path: str | Path, *, model_config: str | None = None, levels: Iterable[int] | None = None,
                    model_configs: Iterable[str] | None = None) -> list[Candidate]:
    """Load a candidate set from a folder or a JSONL file (see the module docstring).

    Args:
        path: the folder or ``.jsonl`` file.
        model_config: force this configuration name on every candidate (default: from the file or folder name).
        levels: keep only these levels.
        model_configs: keep only these configurations.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CandidateLoadError: no candidates, or a malformed line or file.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"candidate source not found: {path}")
    candidates: list[Candidate] = []
    if path.is_dir():
        config = model_config or path.name
        for file in sorted(path.rglob("*.py")):
            m = _SAMPLE_RE.match(file.name)
            if not m:
                continue
            level, problem_id, sample_id = map(int, m.groups())
            sub_config = model_config or (file.parent.name if file.parent != path else config)
            candidates.append(make_candidate(file.read_text(), level=level, problem_id=problem_id,
                                             model_config=sub_config, sample_id=sample_id, origin=str(file)))
        if not candidates:
            raise CandidateLoadError(f"{path}: no files named level_{{L}}_problem_{{P}}_sample_{{S}}_kernel.py")
    elif path.suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise CandidateLoadError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from exc
        leaderboard = bool(rows) and _LEADERBOARD_FIELDS <= set(rows[0][1])
        candidates = [_from_row(row, f"{path}:{lineno}", model_config, leaderboard) for lineno, row in rows]
        if not candidates:
            raise CandidateLoadError(f"{path}: empty candidate file")
    else:
        raise CandidateLoadError(f"{path}: expected a folder or a .jsonl file")
    if levels is not None:
        keep = set(levels)
        candidates = [c for c in candidates if c.level in keep]
    if model_configs is not None:
        keep_cfg = set(model_configs)
        candidates = [c for c in candidates if c.model_config in keep_cfg]
    return candidates


def write_candidates_jsonl(candidates: Iterable[Candidate], path: str | Path) -> Path:
    """Write candidates as JSONL in the format :func:`load_candidates` reads; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for c in candidates:
            fh.write(json.dumps({"level": c.level, "problem_id": c.problem_id, "code": c.source,
                                 "model_config": c.model_config, "sample_id": c.sample_id, "backend": c.backend,
                                 "metadata": c.metadata}) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ null candidates

#: Source templates of the null candidates. Each subclasses the problem's ``Model`` (the problem source is prepended),
#: so it needs nothing but the problem; none is a plausible kernel: they exist to test the verdicts.
_NULL_TEMPLATES = {
    "reference": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: the reference itself (must pass every verdict).\"\"\"
""",
    "zeros": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: an all-zeros output of the right shape and dtype (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        return torch.zeros_like(super().forward(*args, **kwargs))
""",
    "mean": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: a constant equal to the reference output's mean (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        return torch.full_like(out, out.float().mean().item())
""",
}


#: Helpers shared by the null candidates added for the calibration (prepended once to their source).
_NULL_HELPERS = """

def _kb_null_map(fn, out):
    \"\"\"Apply ``fn`` to every floating tensor of a model output (a tensor, or a tuple/list of them).\"\"\"
    if isinstance(out, (tuple, list)):
        return type(out)(_kb_null_map(fn, o) for o in out)
    if isinstance(out, torch.Tensor):
        return fn(out)
    return out


def _kb_null_tolerance(dtype):
    \"\"\"KernelBench's atol = rtol for an output dtype (get_tolerance_for_precision).\"\"\"
    return 1e-4 if dtype in (torch.float32, torch.float64) else 1e-2


def _kb_null_round_mantissa(x, bits):
    \"\"\"``x`` rounded (to nearest even) to ``bits`` mantissa bits, keeping its dtype and float32's exponent range.\"\"\"
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return x
    i = x.to(torch.float32).contiguous().view(torch.int32)
    drop = 23 - bits
    lsb = (i >> drop) & 1
    i = (i + ((1 << (drop - 1)) - 1) + lsb) & ~((1 << drop) - 1)
    return i.view(torch.float32).to(x.dtype).reshape(x.shape)
"""

_PARTIAL_TEMPLATE = """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: the reference, of which only the first {k}% of the flattened output is written into
    a fresh ``torch.empty_like``; the rest is what the allocator gave (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        def partial(out):
            buf = torch.empty_like(out, memory_format=torch.contiguous_format)
            m = int(out.numel() * {k} / 100)
            buf.view(-1)[:m] = out.reshape(-1)[:m]
            return buf

        return _kb_null_map(partial, super().forward(*args, **kwargs))
"""

_NULL_TEMPLATES.update({
    "noise": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: the reference plus uniform noise of KernelBench's tolerance, |noise| <= atol
    (passes KernelBench's check by construction; kbstudy rejects it where the output's scale is below atol's).\"\"\"

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        gen = torch.Generator(device=_kb_null_device(out)).manual_seed(20240)

        def noisy(o):
            if not o.is_floating_point():
                return o
            u = torch.rand(o.shape, generator=gen, device=o.device, dtype=torch.float32) * 2 - 1
            return (o.to(torch.float32) + _kb_null_tolerance(o.dtype) * u).to(o.dtype)

        return _kb_null_map(noisy, out)


def _kb_null_device(out):
    first = out[0] if isinstance(out, (tuple, list)) else out
    return first.device if isinstance(first, torch.Tensor) else "cpu"
""",
    **{f"partial{k}": _PARTIAL_TEMPLATE.replace("{k}", k) for k in ("0.3", "10", "50", "90")},
    "lowprec": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: the reference computed one precision lower (fp32 -> fp16, fp16 -> bf16; bf16 ->
    3 mantissa bits, emulated by rounding) and cast back to the run's dtype.\"\"\"

    def _kb_dtype(self, args):
        for x in list(args) + list(self.parameters()) + list(self.buffers()):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                return x.dtype
        return torch.float32

    def _kb_emulated(self, args, kwargs, rounder):
        if "_kb_rounded" not in self.__dict__:
            import copy
            twin = copy.deepcopy(self)
            with torch.no_grad():
                for t in list(twin.parameters()) + list(twin.buffers()):
                    if t.is_floating_point():
                        t.copy_(rounder(t))
            self.__dict__["_kb_rounded"] = twin
        out = Model.forward(self.__dict__["_kb_rounded"], *[rounder(a) for a in args], **kwargs)
        return _kb_null_map(rounder, out)

    def forward(self, *args, **kwargs):
        dtype = self._kb_dtype(args)
        low = {torch.float32: torch.float16, torch.float16: torch.bfloat16}.get(dtype)
        if low is None:
            return self._kb_emulated(args, kwargs, lambda x: _kb_null_round_mantissa(x, 3))
        try:
            if "_kb_low" not in self.__dict__:
                import copy
                self.__dict__["_kb_low"] = copy.deepcopy(self).to(low)
            low_args = [a.to(low) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
            out = Model.forward(self.__dict__["_kb_low"], *low_args, **kwargs)
            return _kb_null_map(lambda o: o.to(dtype) if o.is_floating_point() else o, out)
        except (RuntimeError, NotImplementedError):  # no kernel for the low dtype on this device
            return self._kb_emulated(args, kwargs, lambda x: x.to(low).to(x.dtype)
                                     if isinstance(x, torch.Tensor) and x.is_floating_point() else x)
""",
    "compile": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: the reference under ``torch.compile`` (Inductor, default mode), compiled once per
    instance: an honest implementation whose error against the float64 reference is part of the spread a verdict
    must admit (on a CPU Inductor emits C++/OpenMP, on a GPU Triton).\"\"\"

    def forward(self, *args, **kwargs):
        compiled = self.__dict__.get("_kb_compiled")
        if compiled is None:
            compiled = self.__dict__["_kb_compiled"] = torch.compile(Model.forward.__get__(self, type(self)))
        return compiled(*args, **kwargs)
""",
})

#: ``zeros`` and ``mean`` for a problem whose ``Model.forward`` returns a tuple or list (``_returns_sequence``): the
#: same nulls applied to each output. Separate sources, so the single-output ones keep their bytes and record keys.
_SEQUENCE_NULL_TEMPLATES = {
    "zeros": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: every output replaced by zeros of its shape and dtype (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        return _kb_null_map(torch.zeros_like, super().forward(*args, **kwargs))
""",
    "mean": """

class ModelNew(Model):
    \"\"\"kbstudy null candidate: every floating output replaced by a constant equal to its mean; integer outputs kept
    (must fail kbstudy's verdict).\"\"\"

    def forward(self, *args, **kwargs):
        def constant(out):
            return torch.full_like(out, out.float().mean().item()) if out.is_floating_point() else out

        return _kb_null_map(constant, super().forward(*args, **kwargs))
""",
}


def _returns_sequence(source: str) -> bool:
    """Does the ``forward`` of the source's ``Model`` class return a literal tuple or list (``return a, b``)? Static
    (``ast``); a source that does not parse, or returns a sequence through a name, counts as a single output."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    return any(isinstance(r, ast.Return) and isinstance(r.value, (ast.Tuple, ast.List))
                               for r in ast.walk(fn))
    return False


#: Every null candidate kind, in a fixed order (``null:all`` on the command line).
NULL_CANDIDATES = tuple(_NULL_TEMPLATES)
#: The null candidates of the calibration (``kbstudy calibrate``), run beside ``null:reference``.
CALIBRATION_NULLS = ("zeros", "mean", "noise", "partial0.3", "partial10", "partial50", "partial90", "lowprec")
#: Honest implementations besides the reference itself: run on request (``kbstudy calibrate --nulls compile``), since
#: an Inductor compile costs seconds per problem where the other nulls cost milliseconds.
HONEST_EXTRA_NULLS = ("compile",)
_FIRST_NULLS = ("reference", "zeros", "mean")  # kept byte-identical: their sources (and record keys) predate helpers


def null_candidates(problem: Problem, kinds: Iterable[str] = NULL_CANDIDATES) -> list[Candidate]:
    """The null candidates of one problem, each with model configuration ``null:<kind>`` and backend ``torch``.

    Args:
        problem: the problem; each candidate's source is the problem's source followed by a ``ModelNew(Model)``.
        kinds: kinds from :data:`NULL_CANDIDATES` (the module docstring says what each outputs).
    Raises ``KeyError`` for an unknown kind.
    """
    out = []
    for kind in kinds:
        if kind not in _NULL_TEMPLATES:
            raise KeyError(f"unknown null candidate {kind!r}; choose from {sorted(_NULL_TEMPLATES)} (or null:all)")
        template = _NULL_TEMPLATES[kind]
        if kind in _SEQUENCE_NULL_TEMPLATES and _returns_sequence(problem.source):
            template = _NULL_HELPERS + _SEQUENCE_NULL_TEMPLATES[kind]  # e.g. DLRM-Bench 5's (rows, new_weight)
        elif kind not in _FIRST_NULLS:
            template = _NULL_HELPERS + template
        source = problem.source.rstrip() + "\n" + template
        out.append(make_candidate(source, level=problem.level, problem_id=problem.problem_id,
                                  model_config=f"null:{kind}", backend="torch", origin=f"kbstudy:null:{kind}"))
    return out
