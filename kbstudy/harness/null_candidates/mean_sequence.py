class ModelNew(Model):
    """kbstudy null candidate: every floating output replaced by a constant equal to its mean; integer outputs kept
    (must fail kbstudy's verdict)."""

    def forward(self, *args, **kwargs):
        def constant(out):
            return torch.full_like(out, out.float().mean().item()) if out.is_floating_point() else out

        return _kb_null_map(constant, super().forward(*args, **kwargs))
