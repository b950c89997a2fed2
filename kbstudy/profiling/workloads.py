"""The seven profiled workloads (three domains), written in plain PyTorch from published configurations.

Design choice: **every model is plain PyTorch**, whether or not ``transformers``/``torchvision`` are importable. The
architectures follow the published configurations layer for layer, attention goes through
``torch.nn.functional.scaled_dot_product_attention`` (so FlashAttention / memory-efficient / cuDNN SDPA kernels appear on
a GPU, as they do for Hugging Face models with ``attn_implementation="sdpa"``), weights are random and inputs synthetic:
nothing is downloaded, and the same code runs on the CPU test machine and on the H200.

==========================  ===========  =========  ===================================================================
workload                    domain       mode       model and shape at full size
==========================  ===========  =========  ===================================================================
``gpt2_train``              transformer  train      GPT-2 small (124M), batch 8 x 1024 tokens, bf16 autocast, AdamW
``llama_infer``             transformer  inference  Llama-3.2-1B dims, bf16 weights, prefill 8 x 1024 + 32 decode steps
                                                    over a static KV cache (greedy)
``bert_infer``              transformer  inference  BERT-base encoder (110M), batch 32 x 512 tokens, bf16 autocast
``resnet50_train``          cnn          train      ResNet-50 v1.5, batch 256 x 3 x 224 x 224, bf16 autocast,
                                                    channels_last, SGD momentum 0.9
``resnet50_infer``          cnn          inference  ResNet-50 v1.5, batch 256, bf16 autocast, channels_last
``dlrm_dcnv2_train``        recommender  train      DLRM-DCNv2, MLPerf DLRM-v2 config, batch 8192, tables capped at
                                                    4M rows, sparse embedding gradients + Adagrad lr 0.005
``dlrm_dcnv2_infer``        recommender  inference  same model, forward only, batch 8192
``vit_b16_infer`` (extra)   cnn          inference  ViT-B/16 (86M), batch 256 x 3 x 224 x 224, bf16 autocast
==========================  ===========  =========  ===================================================================

The models are in :mod:`~kbstudy.profiling.transformer_models`, :mod:`~kbstudy.profiling.vision_models` and
:mod:`~kbstudy.profiling.recommender_models`; this module builds a training or inference step around them.

Size sweep for the transformers: ``gpt2_train`` at small / medium / large and ``llama_infer`` at 1b / 3b / 8b.
Every workload has a ``tiny`` size (and the sweeps ``tiny-s``/``tiny-m``/``tiny-l``) that runs a step on a CPU in well
under a second.

Sources of the constants:

* GPT-2: Radford et al. 2019, Table 2, and the released ``gpt2``/``gpt2-medium``/``gpt2-large`` configs (vocab 50257,
  1024 positions, dropout 0.1, GELU tanh approximation, layer-norm eps 1e-5, tied LM head).
* Llama: Meta's released ``config.json`` of Llama-3.2-1B, Llama-3.2-3B and Llama-3.1-8B (vocab 128256, RMSNorm eps 1e-5,
  RoPE theta 500000, grouped-query attention with 8 KV heads, SwiGLU MLP). RoPE scaling (``llama3`` type) is omitted: it
  changes the values of cos/sin, not the kernels.
* BERT-base: Devlin et al. 2019 / the released ``bert-base-uncased`` config (vocab 30522, hidden 768, 12 layers,
  12 heads, intermediate 3072, 512 positions, 2 token types, layer-norm eps 1e-12, exact GELU).
* ResNet-50 v1.5: He et al. 2016 with the stride on the 3x3 convolution (torchvision / MLPerf training "ResNet-50 v1.5").
* ViT-B/16: Dosovitskiy et al. 2021 (patch 16, hidden 768, 12 layers, 12 heads, MLP 3072, layer-norm eps 1e-6).
* DLRM-DCNv2: mlcommons/training ``recommendation_v2/torchrec_dlrm/README.MD`` (26 sparse / 13 dense features, dim 128,
  bottom MLP 512-256-128, DCN 3 layers low rank 512, top MLP 1024-1024-512-256-1, Adagrad lr 0.005, global batch 65536
  on 8 GPUs = 8192 per GPU, the table sizes and multi-hot sizes below). Model structure mirrors
  ``torchrec.models.dlrm.DLRM_DCN`` and ``torchrec.modules.crossnet.LowRankCrossNet``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from kbstudy.profiling.production import SETUPS, apply_setup
from kbstudy.profiling.recommender_models import (
    DLRM_SIZES,
    MLPERF_DLRM_V2_MULTI_HOT,
    MLPERF_DLRM_V2_TABLE_ROWS,
    DLRMConfig,
    DLRMDCNv2,
)
from kbstudy.profiling.transformer_models import (
    BERT_SIZES,
    GPT2_SIZES,
    LLAMA_SIZES,
    BertModel,
    GPT2LMHead,
    LlamaForCausalLM,
)
from kbstudy.profiling.vision_models import VIT_SIZES, ResNet, VisionTransformer

DOMAINS = ("transformer", "cnn", "recommender")


# ------------------------------------------------------------------------------------------------------ workloads


@dataclasses.dataclass
class Workload:
    """A built workload: ``step()`` runs one training or inference step on ``device`` (asynchronously on CUDA).

    ``items_per_step`` counts samples (images, sequences, recommendation samples); ``tokens_per_step`` counts tokens
    for transformers. ``config`` is a JSON-serialisable description written into the records.
    """

    name: str
    size: str
    domain: str
    mode: str
    model_name: str
    precision: str
    device: str
    step: Callable[[], None]
    params: int
    items_per_step: int
    tokens_per_step: int | None
    config: dict
    #: the model the step runs, and ``probe()``: the step's forward alone (same autocast and grad mode, no optimizer
    #: step) returning ``(outputs, loss)`` (``loss`` ``None`` for inference), for checks that compare two runs
    model: nn.Module | None = None
    probe: Callable[[], tuple] | None = None

    @property
    def key(self) -> str:
        return f"{self.name}@{self.size}"


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    name: str
    domain: str
    mode: str
    default_size: str
    sizes: tuple[str, ...]
    builder: Callable[..., Workload]
    #: submodules the production setup compiles (``torch.compile``); empty: the whole model
    compile_targets: tuple[str, ...] = ()


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _on_cuda(device: str) -> bool:
    return torch.device(device).type == "cuda"


def _autocast(device: str):
    """bf16 autocast on CUDA; disabled on CPU, where bf16 matmuls are emulated on most CPUs and 10x slower."""
    dev = torch.device(device).type
    return torch.autocast(dev, dtype=torch.bfloat16, enabled=_on_cuda(device))


def _precision(device: str, label: str) -> str:
    return label if _on_cuda(device) else "fp32 (CPU)"


def _optimizer_kwargs(device: str) -> dict:
    return {"fused": True} if _on_cuda(device) else {}


def build_gpt2_train(device: str, size: str = "small", batch: int | None = None, seq: int | None = None) -> Workload:
    """GPT-2 training step: bf16 autocast forward, cross-entropy on next tokens, backward, AdamW (fused on CUDA)."""
    cfg = GPT2_SIZES[size]
    tiny = size.startswith("tiny")
    batch, seq = batch or (2 if tiny else 8), seq or (32 if tiny else cfg.n_positions)
    with torch.device(device):
        model = GPT2LMHead(cfg).train()
        ids = torch.randint(0, cfg.vocab_size, (batch, seq + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, **_optimizer_kwargs(device))
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step():
        opt.zero_grad(set_to_none=True)
        with _autocast(device):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, cfg.vocab_size), y.view(-1))
        loss.backward()
        opt.step()

    def probe():
        with _autocast(device):
            logits = model(x)
            return logits, F.cross_entropy(logits.float().view(-1, cfg.vocab_size), y.view(-1))

    return Workload("gpt2_train", size, "transformer", "train", f"GPT-2 {size}",
                    _precision(device, "bf16-autocast"), device, step,
                    _count(model), batch, batch * seq, {**dataclasses.asdict(cfg), "batch": batch, "seq": seq,
                                                        "optimizer": "AdamW"}, model, probe)


def build_llama_infer(device: str, size: str = "1b", batch: int | None = None, prompt: int | None = None,
                      decode: int | None = None) -> Workload:
    """Llama-style inference: bf16 weights, prefill ``prompt`` tokens, then ``decode`` greedy steps over the KV cache."""
    cfg = LLAMA_SIZES[size]
    tiny = size.startswith("tiny")
    batch, prompt, decode = batch or (2 if tiny else 8), prompt or (16 if tiny else 1024), decode or (4 if tiny else 32)
    dtype = torch.bfloat16 if _on_cuda(device) else torch.float32
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype).eval()
        model.allocate_cache(batch, prompt + decode)
        ids = torch.randint(0, cfg.vocab_size, (batch, prompt))

    @torch.inference_mode()
    def step():
        logits = model(ids, 0)
        tok = logits[:, -1:].argmax(-1)
        for i in range(decode):
            tok = model(tok, prompt + i)[:, -1:].argmax(-1)

    @torch.inference_mode()
    def probe():  # the step, keeping the last-position logits of the prefill and of every decode step
        last = [model(ids, 0)[:, -1:]]
        for i in range(decode):
            last.append(model(last[-1].argmax(-1), prompt + i)[:, -1:])
        return torch.cat(last, dim=1), None

    return Workload("llama_infer", size, "transformer", "inference", f"Llama-style {size}",
                    _precision(device, "bf16 weights"),
                    device, step, _count(model), batch, batch * (prompt + decode),
                    {**dataclasses.asdict(cfg), "batch": batch, "prompt": prompt, "decode_steps": decode,
                     "kv_cache": "static"}, model, probe)


def build_bert_infer(device: str, size: str = "base", batch: int | None = None, seq: int | None = None) -> Workload:
    """BERT encoder inference (no MLM head): bf16 autocast, ``torch.inference_mode``."""
    cfg = BERT_SIZES[size]
    tiny = size.startswith("tiny")
    batch, seq = batch or (2 if tiny else 32), seq or (32 if tiny else cfg.max_positions)
    with torch.device(device):
        model = BertModel(cfg).eval()
        ids = torch.randint(0, cfg.vocab_size, (batch, seq))

    @torch.inference_mode()
    def step():
        with _autocast(device):
            model(ids)

    @torch.inference_mode()
    def probe():
        with _autocast(device):
            return model(ids), None

    return Workload("bert_infer", size, "transformer", "inference", f"BERT-{size}",
                    _precision(device, "bf16-autocast"), device, step,
                    _count(model), batch, batch * seq, {**dataclasses.asdict(cfg), "batch": batch, "seq": seq},
                    model, probe)


def _images(device: str, batch: int, size: int) -> torch.Tensor:
    with torch.device(device):
        return torch.randn(batch, 3, size, size).contiguous(memory_format=torch.channels_last)


def build_resnet50(device: str, size: str = "v1.5", train: bool = True, batch: int | None = None) -> Workload:
    """ResNet-50 v1.5 step (channels_last, bf16 autocast); training uses SGD momentum 0.9 and cross-entropy."""
    tiny = size == "tiny"
    batch = batch or (2 if tiny else 256)
    res = 64 if tiny else 224
    with torch.device(device):
        model = (ResNet((1, 1, 1, 1), 8, 10) if tiny else ResNet()).to(memory_format=torch.channels_last)
        labels = torch.randint(0, 10 if tiny else 1000, (batch,))
    x = _images(device, batch, res)
    model.train(train)
    if _on_cuda(device):
        torch.backends.cudnn.benchmark = True
    if train:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5,
                              **_optimizer_kwargs(device))

        def step():
            opt.zero_grad(set_to_none=True)
            with _autocast(device):
                loss = F.cross_entropy(model(x), labels)
            loss.backward()
            opt.step()

        def probe():
            with _autocast(device):
                logits = model(x)
                return logits, F.cross_entropy(logits, labels)
    else:
        @torch.inference_mode()
        def step():
            with _autocast(device):
                model(x)

        @torch.inference_mode()
        def probe():
            with _autocast(device):
                return model(x), None

    name = "resnet50_train" if train else "resnet50_infer"
    return Workload(name, size, "cnn", "train" if train else "inference", "ResNet-50 v1.5" if not tiny else "ResNet tiny",
                    _precision(device, "bf16-autocast"), device, step, _count(model), batch, None,
                    {"batch": batch, "resolution": res, "memory_format": "channels_last",
                     "optimizer": "SGD momentum 0.9" if train else None}, model, probe)


def build_vit_infer(device: str, size: str = "b16", batch: int | None = None) -> Workload:
    """ViT-B/16 inference, bf16 autocast."""
    cfg = VIT_SIZES[size]
    batch = batch or (2 if size == "tiny" else 256)
    with torch.device(device):
        model = VisionTransformer(cfg).eval()
        x = torch.randn(batch, 3, cfg.image_size, cfg.image_size)

    @torch.inference_mode()
    def step():
        with _autocast(device):
            model(x)

    @torch.inference_mode()
    def probe():
        with _autocast(device):
            return model(x), None

    return Workload("vit_b16_infer", size, "cnn", "inference", f"ViT-{size.upper()}",
                    _precision(device, "bf16-autocast"), device, step,
                    _count(model), batch, None, {**dataclasses.asdict(cfg), "batch": batch}, model, probe)


def _dlrm_inputs(cfg: DLRMConfig, device: str):
    """Synthetic inputs: dense ~ N(0, 1), IDs uniform over each (capped) table, fixed multi-hot bag sizes.

    Real Criteo IDs are heavily skewed; uniform IDs make the lookups touch more distinct rows (fewer L2 hits).
    """
    with torch.device(device):
        dense = torch.randn(cfg.batch, cfg.num_dense)
        sparse = [torch.randint(0, n, (cfg.batch, h)) for n, h in zip(cfg.capped_rows, cfg.multi_hot)]
        labels = torch.randint(0, 2, (cfg.batch,)).float()
    return dense, sparse, labels


def build_dlrm(device: str, size: str = "mlperf", train: bool = True, batch: int | None = None) -> Workload:
    """DLRM-DCNv2 step. Dense part under bf16 autocast, fp32 embedding tables.

    Training: BCE-with-logits, backward with **sparse** embedding gradients, Adagrad (lr 0.005) on the tables (sparse
    path: coalesce, then update only the touched rows, the eager analogue of MLPerf's row-wise Adagrad in FBGEMM) and
    Adagrad (its default foreach implementation) on the dense parameters.
    """
    cfg = DLRM_SIZES[size]
    if batch is not None:
        cfg = dataclasses.replace(cfg, batch=batch)
    with torch.device(device):
        model = DLRMDCNv2(cfg, sparse_grad=train).train(train)
    dense, sparse, labels = _dlrm_inputs(cfg, device)
    if train:
        emb_params = list(model.embeddings.parameters())
        ids = {id(p) for p in emb_params}
        opt_sparse = torch.optim.Adagrad(emb_params, lr=cfg.lr)
        opt_dense = torch.optim.Adagrad([p for p in model.parameters() if id(p) not in ids], lr=cfg.lr)

        def step():
            opt_sparse.zero_grad(set_to_none=True)
            opt_dense.zero_grad(set_to_none=True)
            with _autocast(device):
                loss = F.binary_cross_entropy_with_logits(model(dense, sparse).float(), labels)
            loss.backward()
            opt_sparse.step()
            opt_dense.step()

        def probe():
            with _autocast(device):
                logits = model(dense, sparse)
                return logits, F.binary_cross_entropy_with_logits(logits.float(), labels)
    else:
        @torch.inference_mode()
        def step():
            with _autocast(device):
                model(dense, sparse)

        @torch.inference_mode()
        def probe():
            with _autocast(device):
                return model(dense, sparse), None

    name = "dlrm_dcnv2_train" if train else "dlrm_dcnv2_infer"
    conf = dataclasses.asdict(cfg)
    conf.update(capped_rows=list(cfg.capped_rows), lookups_per_sample=sum(cfg.multi_hot),
                optimizer="Adagrad (sparse tables, dense MLPs)" if train else None)
    return Workload(name, size, "recommender", "train" if train else "inference", "DLRM-DCNv2 (MLPerf DLRM-v2)",
                    _precision(device, "bf16-autocast dense, fp32 tables"), device, step, _count(model), cfg.batch, None, conf,
                    model, probe)


#: DLRM's dense part, what the production setup compiles: the embedding bags stay eager, as in TorchRec, whose
#: sharded FBGEMM tables run outside ``torch.compile``, and sparse gradients are not traced by AOTAutograd.
DLRM_DENSE_MODULES = ("bottom", "crossnet", "top")

#: Registry of workloads: name -> spec (domain, mode, default size, sizes, builder). The first seven are the study's.
WORKLOADS: dict[str, WorkloadSpec] = {
    "gpt2_train": WorkloadSpec("gpt2_train", "transformer", "train", "small", ("small", "medium", "large", "xl"),
                               build_gpt2_train),
    "llama_infer": WorkloadSpec("llama_infer", "transformer", "inference", "1b", ("1b", "3b", "8b"), build_llama_infer),
    "bert_infer": WorkloadSpec("bert_infer", "transformer", "inference", "base", ("base", "large"), build_bert_infer),
    "resnet50_train": WorkloadSpec("resnet50_train", "cnn", "train", "v1.5", ("v1.5",),
                                   lambda device, size="v1.5", **kw: build_resnet50(device, size, True, **kw)),
    "resnet50_infer": WorkloadSpec("resnet50_infer", "cnn", "inference", "v1.5", ("v1.5",),
                                   lambda device, size="v1.5", **kw: build_resnet50(device, size, False, **kw)),
    "dlrm_dcnv2_train": WorkloadSpec("dlrm_dcnv2_train", "recommender", "train", "mlperf", ("mlperf",),
                                     lambda device, size="mlperf", **kw: build_dlrm(device, size, True, **kw),
                                     DLRM_DENSE_MODULES),
    "dlrm_dcnv2_infer": WorkloadSpec("dlrm_dcnv2_infer", "recommender", "inference", "mlperf", ("mlperf",),
                                     lambda device, size="mlperf", **kw: build_dlrm(device, size, False, **kw),
                                     DLRM_DENSE_MODULES),
    "vit_b16_infer": WorkloadSpec("vit_b16_infer", "cnn", "inference", "b16", ("b16",), build_vit_infer),
}

#: The study's seven workloads (three domains), in report order.
SEVEN = ("gpt2_train", "llama_infer", "bert_infer", "resnet50_train", "resnet50_infer", "dlrm_dcnv2_train",
         "dlrm_dcnv2_infer")
#: Extra workloads profiled after the seven when time allows.
EXTRAS = ("vit_b16_infer",)
#: Model-size sweep for the transformers (the default size of each is already among the seven).
SIZE_SWEEP = {"gpt2_train": ("small", "medium", "large"), "llama_infer": ("1b", "3b", "8b")}
TINY_SIZE_SWEEP = {"gpt2_train": ("tiny-s", "tiny-m", "tiny-l"), "llama_infer": ("tiny-s", "tiny-m", "tiny-l")}


def build(name: str, device: str = "cpu", size: str | None = None, tiny: bool = False, setup: str = "eager",
          **overrides) -> Workload:
    """Build workload ``name`` on ``device`` at ``size`` (default: its full size, or ``"tiny"`` if ``tiny``), in
    ``setup`` ``"eager"`` or ``"production"`` (:func:`kbstudy.profiling.production.apply_setup`: ``torch.compile``).

    Raises ``KeyError`` for an unknown workload or size, ``ValueError`` for an unknown setup. ``overrides`` (e.g.
    ``batch=``) go to the builder.
    """
    if setup not in SETUPS:
        raise ValueError(f"unknown setup {setup!r}; known: {SETUPS}")
    spec = WORKLOADS[name]
    size = size or ("tiny" if tiny else spec.default_size)
    known = set(spec.sizes) | {"tiny"} | (set(TINY_SIZE_SWEEP.get(name, ())))
    if size not in known:
        raise KeyError(f"{name}: unknown size {size!r}; known: {sorted(known)}")
    return apply_setup(spec.builder(device, size=size, **overrides), setup, spec.compile_targets)


def approx_param_count(name: str, size: str) -> int | None:
    """Parameter count of a transformer size without building it (for planning the sweep); ``None`` if unknown."""
    if name == "gpt2_train" and size in GPT2_SIZES:
        c = GPT2_SIZES[size]
        return c.vocab_size * c.n_embd + c.n_positions * c.n_embd + c.n_layer * 12 * c.n_embd**2
    if name == "llama_infer" and size in LLAMA_SIZES:
        c = LLAMA_SIZES[size]
        hd = c.hidden // c.n_head
        attn = c.hidden * hd * (2 * c.n_head + 2 * c.n_kv_head)
        per_layer = attn + 3 * c.hidden * c.intermediate
        return c.vocab_size * c.hidden * (1 if c.tie_embeddings else 2) + c.n_layer * per_layer
    return None


__all__ = [
    "MLPERF_DLRM_V2_TABLE_ROWS", "MLPERF_DLRM_V2_MULTI_HOT", "Workload", "WorkloadSpec", "WORKLOADS", "SEVEN", "EXTRAS",
    "SIZE_SWEEP", "TINY_SIZE_SWEEP", "SETUPS", "DLRM_DENSE_MODULES", "build", "approx_param_count"
]
