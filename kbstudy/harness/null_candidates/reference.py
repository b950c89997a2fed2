class ModelNew(Model):
    """kbstudy null candidate: the reference itself (must pass every verdict)."""
