"""kbstudy-triton candidate for DLRM-Bench problem 7 (ID hashing by modulo + lengths to offsets).

Two launches writing straight into the single int64 output ``[offsets (num_bags + 1) | hashed ids (total)]``:

1. ``_hash_and_block_sums``: program p hashes ids block p (``id % hash_size``) and sums lengths block p.
2. ``_offsets_kernel``: program p adds the sums of the blocks before it (at most ``BLOCK_NB`` of them, read from L2)
   to the in-block exclusive scan of its lengths; the last program also writes the total.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _hash_and_block_sums(ids_ptr, len_ptr, out_ptr, bsum_ptr, n_ids, n_bags, hash_size, BLOCK: tl.constexpr):
    p = tl.program_id(0)
    i = p.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mi = i < n_ids
    ids = tl.load(ids_ptr + i, mask=mi, other=0)
    tl.store(out_ptr + (n_bags + 1) + i, ids % hash_size, mask=mi)
    mb = i < n_bags
    x = tl.load(len_ptr + i, mask=mb, other=0).to(tl.int64)
    tl.store(bsum_ptr + p, tl.sum(x, axis=0), mask=p * BLOCK < n_bags)


@triton.jit
def _offsets_kernel(len_ptr, bsum_ptr, out_ptr, n_bags, BLOCK: tl.constexpr, BLOCK_NB: tl.constexpr):
    p = tl.program_id(0)
    q = tl.arange(0, BLOCK_NB)
    prefix = tl.sum(tl.load(bsum_ptr + q, mask=q < p, other=0), axis=0)
    i = p.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n_bags
    x = tl.load(len_ptr + i, mask=m, other=0).to(tl.int64)
    inclusive = tl.cumsum(x, axis=0)
    tl.store(out_ptr + i, prefix + inclusive - x, mask=m)
    last = (p + 1) * BLOCK >= n_bags
    tl.store(out_ptr + n_bags, prefix + tl.sum(x, axis=0), mask=last)


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is two Triton launches."""

    BLOCK = 4096

    def __init__(self, hash_size: int):
        super().__init__()
        self.hash_size = hash_size

    def forward(self, raw_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n_ids, n_bags = raw_ids.numel(), lengths.numel()
        block = self.BLOCK
        nb = triton.cdiv(n_bags, block)
        block_nb = max(16, triton.next_power_of_2(nb))
        if block_nb > 65536:
            raise ValueError(f"too many length blocks for the one-level scan ({nb}); at most 65536 * {block} bags")
        out = torch.empty(n_bags + 1 + n_ids, device=raw_ids.device, dtype=torch.int64)
        bsum = torch.empty(max(nb, 1), device=raw_ids.device, dtype=torch.int64)
        grid1 = max(triton.cdiv(n_ids, block), nb, 1)
        _hash_and_block_sums[(grid1,)](raw_ids.contiguous(), lengths.contiguous(), out, bsum, n_ids, n_bags,
                                       self.hash_size, BLOCK=block, num_warps=8)
        _offsets_kernel[(max(nb, 1),)](lengths.contiguous(), bsum, out, n_bags, BLOCK=block, BLOCK_NB=block_nb,
                                       num_warps=8)
        return out
