class ModelNew(Model):
    """kbstudy null candidate: the reference computed one precision lower (fp32 -> fp16, fp16 -> bf16; bf16 ->
    3 mantissa bits, emulated by rounding) and cast back to the run's dtype."""

    def _kb_dtype(self, args):
        for x in list(args) + list(self.parameters()) + list(self.buffers()):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                return x.dtype
        return torch.float32

    def _kb_emulated(self, args, kwargs, rounder):
        if "_kb_rounded" not in self.__dict__:
            import copy
            twin = copy.deepcopy(self)
            with torch.no_grad():
                for t in list(twin.parameters()) + list(twin.buffers()):
                    if t.is_floating_point():
                        t.copy_(rounder(t))
            self.__dict__["_kb_rounded"] = twin
        out = Model.forward(self.__dict__["_kb_rounded"], *[rounder(a) for a in args], **kwargs)
        return _kb_null_map(rounder, out)

    def forward(self, *args, **kwargs):
        dtype = self._kb_dtype(args)
        low = {torch.float32: torch.float16, torch.float16: torch.bfloat16}.get(dtype)
        if low is None:
            return self._kb_emulated(args, kwargs, lambda x: _kb_null_round_mantissa(x, 3))
        try:
            if "_kb_low" not in self.__dict__:
                import copy
                self.__dict__["_kb_low"] = copy.deepcopy(self).to(low)
            low_args = [a.to(low) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
            out = Model.forward(self.__dict__["_kb_low"], *low_args, **kwargs)
            return _kb_null_map(lambda o: o.to(dtype) if o.is_floating_point() else o, out)
        except (RuntimeError, NotImplementedError):  # no kernel for the low dtype on this device
            return self._kb_emulated(args, kwargs, lambda x: x.to(low).to(x.dtype)
                                     if isinstance(x, torch.Tensor) and x.is_floating_point() else x)
