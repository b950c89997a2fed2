def _kb_null_map(fn, out):
    """Apply ``fn`` to every floating tensor of a model output (a tensor, or a tuple/list of them)."""
    if isinstance(out, (tuple, list)):
        return type(out)(_kb_null_map(fn, o) for o in out)
    if isinstance(out, torch.Tensor):
        return fn(out)
    return out


def _kb_null_tolerance(dtype):
    """KernelBench's atol = rtol for an output dtype (get_tolerance_for_precision)."""
    return 1e-4 if dtype in (torch.float32, torch.float64) else 1e-2


def _kb_null_round_mantissa(x, bits):
    """``x`` rounded (to nearest even) to ``bits`` mantissa bits, keeping its dtype and float32's exponent range."""
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return x
    i = x.to(torch.float32).contiguous().view(torch.int32)
    drop = 23 - bits
    lsb = (i >> drop) & 1
    i = (i + ((1 << (drop - 1)) - 1) + lsb) & ~((1 << drop) - 1)
    return i.view(torch.float32).to(x.dtype).reshape(x.shape)
