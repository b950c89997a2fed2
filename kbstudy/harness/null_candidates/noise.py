class ModelNew(Model):
    """kbstudy null candidate: the reference plus uniform noise of KernelBench's tolerance, |noise| <= atol
    (passes KernelBench's check by construction; kbstudy rejects it where the output's scale is below atol's)."""

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
