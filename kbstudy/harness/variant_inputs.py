"""What the structural variants (``kbstudy.verdict.trials.STRUCTURAL_VARIANTS``) change, made the same way on both
sides of a trial: the problem's sizes (:func:`shape_edit_sets`, through the size editing of
``kbstudy.harness.problems``), the inputs' memory layout (:func:`relayout`) and the module's parameters
(:func:`parameter_spec`, :func:`parameter_draws`, :func:`replace_parameters`).

The reference process (``child/reference.py``) and the candidate process (``child/candidate.py``) both import this
module: the candidate's ``ModelNew`` gets the parameter values the reference's ``Model`` gets, drawn from the same seed
and specification, and its inputs the layout the reference's inputs had.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import torch

from kbstudy.harness.problems import map_sizes, size_constants

#: Sizes below this are left alone by the shape variants (axes, small counts); operator hyper-parameters (kernel
#: sizes, strides, groups, heads) are never edited (``problems.size_constants``).
SHAPE_MIN = 8
#: ``shape_larger`` applies only where the reference's inputs and outputs at the run's size take at most this many
#: bytes: variant sizes never need much more memory than the benchmark's.
LARGER_MAX_BYTES = 64 << 20
#: Names a fallback edit set leaves unchanged: channel, feature, embedding and head counts are often tied to a group
#: or head count that is not a size (a prime channel count is not divisible by 4 groups).
_TIED = re.compile(r".*(channel|feature|embed|hidden|head|group).*", re.IGNORECASE)
#: The batch constant of ``shape_batch1``.
_BATCH = re.compile(r"^batch(_size)?$", re.IGNORECASE)


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def prime_below(n: int) -> int:
    """The largest odd prime <= ``n`` (3 for ``n`` < 3)."""
    n = max(3, n)
    while not is_prime(n):
        n -= 1
    return n


def prime_above(n: int) -> int:
    """The smallest prime >= ``n``."""
    while not is_prime(n):
        n += 1
    return n


def _smaller(v: int) -> int:
    return prime_below((3 * v) // 4) if v >= SHAPE_MIN else v


def _larger(v: int) -> int:
    return prime_above(v + max(2, v // 4)) if v >= SHAPE_MIN else v


def shape_edit_sets(source: str, name: str) -> list[dict[str, Any]]:
    """The size edits a shape variant tries on a problem's (scaled) source, in order: ``[{constant name: new value},
    ...]``; the reference process uses the first one its ``Model`` builds and runs at (a later set is a fallback
    that leaves channel-like counts alone). ``[]`` when the variant has nothing to edit.

    * ``shape_prime``: every size constant ``v >= SHAPE_MIN`` to the largest prime <= 3v/4 (smaller, odd, a
      multiple of no power of two above 1);
    * ``shape_batch1``: ``batch_size`` (or ``batch``) to 1;
    * ``shape_larger``: every size constant ``v >= SHAPE_MIN`` to the smallest prime >= v + v/4.

    Raises ``ValueError`` for another name, ``SyntaxError`` for a source that does not parse."""
    constants = size_constants(source)
    if name == "shape_batch1":
        edits = {n: 1 for _, _, n, v, _ in constants if _BATCH.match(n) and isinstance(v, int) and v > 1}
        return [edits] if edits else []
    if name not in ("shape_prime", "shape_larger"):
        raise ValueError(f"unknown shape variant {name!r}")
    fn = _smaller if name == "shape_prime" else _larger
    full = {n: new for _, _, n, v, _ in constants if (new := map_sizes(v, fn)) != v}
    untied = {n: new for n, new in full.items() if not _TIED.match(n)}
    return [s for s in (full, untied if untied != full else {}) if s]


# ------------------------------------------------------------------------------------------------ layouts


def _relayout_one(x: torch.Tensor, name: str) -> torch.Tensor:
    if name == "layout_transposed":
        if x.dim() < 2 or x.shape[-1] < 2 or x.shape[-2] < 2:
            return x
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if name == "layout_strided":
        if x.dim() < 1 or x.numel() == 0:
            return x
        # a slice with step 2 and storage offset 1 of a zero-filled buffer: the gaps are not the input's values
        buf = torch.zeros(*x.shape[:-1], 2 * x.shape[-1] + 1, dtype=x.dtype, device=x.device)
        view = buf[..., 1::2]
        view.copy_(x)
        return view
    if name == "layout_channels_last":
        if x.dim() != 4:
            return x
        return x.contiguous(memory_format=torch.channels_last)
    raise ValueError(f"unknown layout variant {name!r}")


def relayout(inputs: Sequence[Any], name: str) -> list:
    """The inputs with the same values on other strides (``layout_transposed``: the last two dimensions stored
    column-major; ``layout_strided``: a step-2 slice with storage offset 1; ``layout_channels_last``: 4-D tensors
    channels-last). Floating-point tensors only; others pass through. New tensors: the inputs are not modified.
    Raises ``ValueError`` for an unknown name."""
    return [_relayout_one(x, name) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def layout_changed(inputs: Sequence[Any], relaid: Sequence[Any]) -> bool:
    """Did :func:`relayout` change any tensor's strides or storage offset?"""
    return any(isinstance(a, torch.Tensor) and (a.stride() != b.stride() or a.storage_offset() != b.storage_offset())
               for a, b in zip(inputs, relaid))


# ------------------------------------------------------------------------------------------------ parameters


def _floating_tensors(model) -> list[tuple[str, torch.Tensor]]:
    if not isinstance(model, torch.nn.Module):
        return []
    named = list(model.named_parameters()) + list(model.named_buffers())
    return [(n, t) for n, t in named if t.is_floating_point()]


def parameter_spec(model) -> list[dict]:
    """What the ``params_random`` variant replaces: per floating-point parameter and buffer of ``model`` (parameters
    first, in registration order), ``{"name", "shape", "scale", "nonneg"}``: ``scale`` the tensor's RMS (1.0 for an
    all-zero tensor, such as a bias at initialisation), ``nonneg`` whether its values are all >= 0 and not all zero
    (a variance stays positive). Plain values: it travels in messages."""
    spec = []
    for name, t in _floating_tensors(model):
        v = t.detach().to(torch.float64)
        rms = float(v.square().mean().sqrt()) if v.numel() else 0.0
        spec.append({"name": name, "shape": list(t.shape), "scale": rms if rms > 0 and math.isfinite(rms) else 1.0,
                     "nonneg": bool(v.numel() and rms > 0 and float(v.min()) >= 0)})
    return spec


def parameter_draws(spec: Sequence[dict], seed: int) -> list[torch.Tensor]:
    """The replacement values of ``spec``'s tensors (float64, CPU): magnitudes ``scale * U[0.5, 1.5)``, random signs
    unless ``nonneg``; each from a generator seeded with ``seed + position``, so both processes draw the same."""
    out = []
    for k, entry in enumerate(spec):
        gen = torch.Generator().manual_seed((int(seed) + k) % (2**63))
        shape = tuple(entry["shape"])
        value = float(entry["scale"]) * (0.5 + torch.rand(shape, generator=gen, dtype=torch.float64))
        if not entry["nonneg"]:
            value = torch.where(torch.rand(shape, generator=gen, dtype=torch.float64) < 0.5, -value, value)
        out.append(value)
    return out


def match_parameters(model, spec: Sequence[dict]) -> tuple[list[torch.Tensor] | None, str]:
    """``model``'s tensors that take ``spec``'s values: by name where every spec name is a floating tensor of
    ``model`` with the same shape, else by order where ``model`` has as many floating tensors with the same shapes.
    Returns ``(tensors, how)`` or ``(None, why not)``."""
    mine = _floating_tensors(model)
    if not isinstance(model, torch.nn.Module):
        return None, "ModelNew is not a torch.nn.Module"
    by_name = dict(mine)
    if all(e["name"] in by_name and list(by_name[e["name"]].shape) == list(e["shape"]) for e in spec):
        return [by_name[e["name"]] for e in spec], "by name"
    if len(mine) == len(spec) and all(list(t.shape) == list(e["shape"]) for (_, t), e in zip(mine, spec)):
        return [t for _, t in mine], "by order and shape"
    return None, (f"ModelNew's floating-point parameters and buffers ({[(n, list(t.shape)) for n, t in mine][:8]}) "
                  f"match Model's ({[(e['name'], e['shape']) for e in spec][:8]}) neither by name nor by order and "
                  "shape")


def replace_parameters(model, spec: Sequence[dict], seed: int, round_to: torch.dtype) -> str | None:
    """Give ``model``'s matched tensors (:func:`match_parameters`) the values :func:`parameter_draws` draws, rounded
    to ``round_to`` (the run's precision: the float64 reference gets the rounded values too). Returns ``None``, or
    why the variant does not apply (nothing to replace, no match)."""
    if not spec:
        return "the problem's Model has no floating-point parameters or buffers"
    targets, how = match_parameters(model, spec)
    if targets is None:
        return how
    with torch.no_grad():
        for t, value in zip(targets, parameter_draws(spec, seed)):
            t.copy_(value.to(round_to).to(device=t.device, dtype=t.dtype))
    return None
