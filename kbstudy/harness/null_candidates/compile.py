class ModelNew(Model):
    """kbstudy null candidate: the reference under ``torch.compile`` (Inductor, default mode), compiled once per
    instance: an honest implementation whose error against the float64 reference is part of the spread a verdict
    must admit (on a CPU Inductor emits C++/OpenMP, on a GPU Triton)."""

    def forward(self, *args, **kwargs):
        compiled = self.__dict__.get("_kb_compiled")
        if compiled is None:
            compiled = self.__dict__["_kb_compiled"] = torch.compile(Model.forward.__get__(self, type(self)))
        return compiled(*args, **kwargs)
