"""Input values a candidate has never seen: the storage-reuse trial's partly kept values and the timed calls' per-call
mix. Both sides (the candidate's process and the reference's) build these values with the functions here, so the
reference's answer is for exactly the inputs the candidate got.

**Storage-reuse trial** (:func:`keep_some`). Trial 1 runs on trial 0's input tensors with new values
(``kbstudy.harness.child.integrity``, "storage reuse"). A memo keyed on the pointer *plus a few sampled values* (the
first element, the last, the middle) would see the new values there and recompute. So the reuse trial's inputs keep
some of trial 0's elements and take the rest from their own draw: the first and last :data:`KEEP_EDGE` elements of
every tensor (flattened), the elements at ``floor(j n / KEEP_GRID)`` and their neighbours (halves, quarters, ...;
on a tensor of fewer than about 300 elements the first and last alone), and a random :data:`KEEP_FRACTION` of the
others (generator seeded from the trial's seed). Such a memo then returns
trial 0's answer and fails as ``stale_output`` (``kbstudy.harness.child.reference.ReferenceSession.verify``). A memo
that samples k other positions is caught with probability about ``KEEP_FRACTION ** k``. Each element is still a
draw of the problem's own ``get_inputs()``; a square tensor that is symmetric in both draws (level 1,
``13_Matmul_for_symmetric_matrices``) keeps a symmetric mask, so it stays symmetric, and zeros both draws share
(triangular inputs) stay zeros.

**Timed calls** (:func:`mix_into`, :func:`mixed`). The timing pool holds 2-4 input sets (``kbstudy.harness.timing``);
cycling them repeats values every few calls, so a memo keyed on the inputs' *contents* (a hash, or a sample of values)
would be timed at the cost of its lookup. Before every call (warm-up, timed, host-check and device-time calls; outside
the timed region) the floating-point inputs of call ``g`` become ``a + t (b - a)`` with ``a``, ``b`` the pool's entries
``g mod n`` and ``g + 1 mod n`` and ``t`` drawn per call from :data:`MIX_RANGE` by the operating system's generator,
so no two calls see the same values. Why this form: it is a convex combination of two draws, so every linear
property of the problem's inputs holds (symmetric, triangular, probabilities that sum to 1, values in [0, 1)), and it
is computed as three separate elementwise operations (``b - a``, ``* t``, ``+ a``), each one IEEE rounding, so the
reference recomputes the checked calls' inputs bit for bit from ``(entry, t)`` on any device and memory alignment
(a fused ``torch.lerp`` may round differently between vectorised and scalar code paths). Integer and bool inputs are
the entry's (indices stay valid), and so are floating inputs that hold whole numbers in both entries (labels, signs,
0/1 masks: their mix would be no value the problem draws). Where the two entries hold non-finite or huge values
(``b - a`` could overflow), elements equal in both keep their value.
"""

from __future__ import annotations

import random

import torch

#: Storage-reuse trial: elements kept at each end of every flattened tensor, the grid of kept positions
#: (``floor(j n / KEEP_GRID)`` and neighbours), and the fraction of the other elements kept at random.
KEEP_EDGE = 8
KEEP_GRID = 16
KEEP_FRACTION = 0.5
#: Elements per chunk when mixing large tensors (bounds the mask's memory).
KEEP_CHUNK = 1 << 24
#: Timed calls: the mixing weight ``t`` of :func:`mix_into` is drawn uniformly from this range (never 0: every call's
#: values differ from the pool's; at most 1/4: the values stay close to a draw of the problem's own distribution).
MIX_RANGE = (1.0 / 16, 1.0 / 4)

_SYSTEM_RANDOM = random.SystemRandom()


def draw_mix(rng=None) -> float:
    """A mixing weight from :data:`MIX_RANGE`; ``rng`` (a ``random.Random``) for tests, else the OS's generator, so a
    candidate cannot predict it."""
    return (rng or _SYSTEM_RANDOM).uniform(*MIX_RANGE)


def _grid_positions(n: int) -> list[int]:
    """The deterministic kept positions of a flattened tensor of ``n`` elements (module docstring); for a tensor so
    small that they would be more than a quarter of it, its first and last element only (so that about half of its
    values still change)."""
    pos = set(range(min(KEEP_EDGE, n))) | set(range(max(0, n - KEEP_EDGE), n))
    for j in range(KEEP_GRID + 1):
        centre = (j * n) // KEEP_GRID
        pos.update(p for p in (centre - 1, centre, centre + 1) if 0 <= p < n)
    if 4 * len(pos) > n:
        return [0, n - 1] if n >= 4 else []
    return sorted(pos)


def _symmetric(x: torch.Tensor) -> bool:
    return x.dim() >= 2 and x.shape[-1] == x.shape[-2] and x.shape[-1] > 1 and bool(torch.equal(x, x.mT))


def _keep_into(a: torch.Tensor, b: torch.Tensor, seed: int) -> None:
    """Write the kept elements of ``a`` into ``b`` (same shape, dtype and device), in place: the grid of
    :func:`_grid_positions` and a random :data:`KEEP_FRACTION` (generator seeded with ``seed`` on ``b``'s device,
    drawn chunk by chunk, so the extra memory is a chunk's, whatever the tensor's size). Deterministic in ``seed``
    on one device."""
    n = b.numel()
    gen = torch.Generator(device=b.device).manual_seed(int(seed) % (2**63))
    grid = torch.tensor(_grid_positions(n), dtype=torch.long, device=b.device)
    if _symmetric(a) and _symmetric(b) or not (a.is_contiguous() and b.is_contiguous()):
        mask = torch.rand(n, generator=gen, device=b.device) < KEEP_FRACTION
        mask[grid] = True
        mask = mask.view(b.shape)
        if _symmetric(a) and _symmetric(b):
            mask = mask | mask.mT  # kept in pairs: a symmetric input stays symmetric
        b.copy_(torch.where(mask, a, b))
        return
    flat_a, flat_b = a.view(-1), b.view(-1)
    for start in range(0, n, KEEP_CHUNK):
        stop = min(n, start + KEEP_CHUNK)
        mask = torch.rand(stop - start, generator=gen, device=b.device) < KEEP_FRACTION
        mask[grid[(grid >= start) & (grid < stop)] - start] = True
        flat_b[start:stop] = torch.where(mask, flat_a[start:stop], flat_b[start:stop])


def keep_some(previous: list, new: list, seed: int) -> list:
    """The storage-reuse trial's inputs: ``new`` (its own draw) with the kept elements (module docstring) taken from
    ``previous`` (the trial before, whose storage it reuses), per tensor of the same shape, dtype and device; other
    positions keep ``new``'s values. ``new``'s tensors are changed in place (no copy of a full-size input set);
    ``previous`` is only read. Integer and bool tensors (indices, lengths, offsets) and floating tensors of whole
    numbers keep ``new``'s values: keeping some of their elements could break the relations a problem's inputs hold
    (lengths summing to the values' rows, sorted offsets). Returns ``new``."""
    for k, (a, b) in enumerate(zip(previous, new)):
        if (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and a.device == b.device and b.numel() and b.is_floating_point()
                and not (_integral(a) and _integral(b))):
            _keep_into(a, b, seed + k)
    return new


def _unsafe(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``b - a`` may be non-finite where the mix must keep a value (non-finite or huge inputs); from the extremes
    alone (``aminmax`` propagates NaN), so no temporary of the inputs' size."""
    big = torch.finfo(a.dtype).max / 4
    for x in (a, b):
        if x.numel():
            low, high = (float(v) for v in torch.aminmax(x))
            if not (abs(low) < big and abs(high) < big):  # false for NaN and inf too
                return True
    return False


def _integral(x: torch.Tensor) -> bool:
    """Every value of ``x`` is a whole number (labels, signs, 0/1 masks stored as floats), checked chunk by chunk."""
    flat = x.reshape(-1) if x.is_contiguous() else x.contiguous().reshape(-1)
    for start in range(0, flat.numel(), KEEP_CHUNK):
        part = flat[start:start + KEEP_CHUNK]
        if not bool(torch.equal(part, part.round())):
            return False
    return True


#: How :func:`mix_into` treats an input position (:func:`mix_modes`): mixed, mixed with the guard for non-finite or
#: huge values, or copied from the first entry (not a floating tensor of one shape in both, or whole numbers in
#: both: a mix of labels, signs or 0/1 masks would not be a value the problem's `get_inputs()` can draw).
MIX, MIX_GUARDED, COPY = "mix", "mix_guarded", "copy"


def mix_modes(a: list, b: list) -> list[str]:
    """Per input position of two pool entries ``a`` and ``b``, how :func:`mix_into` treats it (:data:`MIX`,
    :data:`MIX_GUARDED` or :data:`COPY`); a function of the two entries' values, so both processes decide alike."""
    modes = []
    for x, y in zip(a, b):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point()
                and x.shape == y.shape and x.dtype == y.dtype and x.device == y.device and x.numel()):
            modes.append(COPY)
        elif _integral(x) and _integral(y):
            modes.append(COPY)
        else:
            modes.append(MIX_GUARDED if _unsafe(x, y) else MIX)
    return modes


def _mix_tensor(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, t: float, guarded: bool) -> None:
    out.copy_(b)
    out.sub_(a)
    out.mul_(t)
    out.add_(a)
    if guarded:
        out.copy_(torch.where(a == b, a, out))


def mix_into(buffers: list, a: list, b: list, t: float, modes: list[str] | None = None) -> list:
    """Write the mixed inputs ``a + t (b - a)`` of two pool entries into ``buffers`` (the call's private input
    buffers, updated in place where a tensor of the same shape, dtype and device is there; replaced by a clone where
    not). Positions that are not mixed (:func:`mix_modes`) and other values are ``a``'s. ``modes``: :func:`mix_modes`
    of ``a`` and ``b`` (computed once per pool by the caller; ``None``: computed here). Returns ``buffers``."""
    modes = mix_modes(a, b) if modes is None else modes
    for k, src in enumerate(a):
        buf = buffers[k]
        if not isinstance(src, torch.Tensor):
            buffers[k] = src
            continue
        same = (isinstance(buf, torch.Tensor) and buf.shape == src.shape and buf.dtype == src.dtype
                and buf.device == src.device)
        if not same:
            buf = buffers[k] = src.clone()
        if modes[k] != COPY:
            _mix_tensor(buf, src, b[k], t, modes[k] == MIX_GUARDED)
        elif same:
            buf.copy_(src)
    return buffers


def mixed(a: list, b: list, t: float) -> list:
    """:func:`mix_into` into fresh tensors: the reference's copy of a timed call's inputs (bit-identical)."""
    return mix_into([x.clone() if isinstance(x, torch.Tensor) else x for x in a], a, b, t)
