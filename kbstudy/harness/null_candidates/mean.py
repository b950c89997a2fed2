class ModelNew(Model):
    """kbstudy null candidate: a constant equal to the reference output's mean (must fail kbstudy's verdict)."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        return torch.full_like(out, out.float().mean().item())
