class ModelNew(Model):
    """kbstudy null candidate: the reference, of which only the first {k}% of the flattened output is written into
    a fresh ``torch.empty_like``; the rest is what the allocator gave (must fail kbstudy's verdict)."""

    def forward(self, *args, **kwargs):
        def partial(out):
            buf = torch.empty_like(out, memory_format=torch.contiguous_format)
            m = int(out.numel() * {k} / 100)
            buf.view(-1)[:m] = out.reshape(-1)[:m]
            return buf

        return _kb_null_map(partial, super().forward(*args, **kwargs))
