class ModelNew(Model):
    """kbstudy null candidate: every output replaced by zeros of its shape and dtype (must fail kbstudy's verdict)."""

    def forward(self, *args, **kwargs):
        return _kb_null_map(torch.zeros_like, super().forward(*args, **kwargs))
