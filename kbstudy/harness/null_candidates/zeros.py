class ModelNew(Model):
    """kbstudy null candidate: an all-zeros output of the right shape and dtype (must fail kbstudy's verdict)."""

    def forward(self, *args, **kwargs):
        return torch.zeros_like(super().forward(*args, **kwargs))
