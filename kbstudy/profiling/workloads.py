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

#: MLPerf DLRM-v2 (Criteo 1TB multi-hot) embedding-table row counts, 26 sparse features (mlcommons/training README).
MLPERF_DLRM_V2_TABLE_ROWS = (
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938, 155, 4, 976, 14,
    40000000, 40000000, 40000000, 590152, 12973, 108, 36,
)
#: MLPerf DLRM-v2 multi-hot sizes (lookups per sample for each of the 26 features; 214 in total).
MLPERF_DLRM_V2_MULTI_HOT = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)

DOMAINS = ("transformer", "cnn", "recommender")


# ------------------------------------------------------------------------------------------------------ attention


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, dropout_p: float = 0.0) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` on [batch, heads, seq, head_dim]; K/V may have fewer (grouped) heads."""
    if k.shape[1] != q.shape[1]:
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout_p, enable_gqa=True)
        except TypeError:  # torch < 2.5: repeat the KV heads as Hugging Face's ``repeat_kv`` does
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout_p)


# ---------------------------------------------------------------------------------------------------------- GPT-2


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """GPT-2 hyper-parameters (Radford et al. 2019; the released Hugging Face configs)."""

    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    vocab_size: int = 50257
    n_positions: int = 1024
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5


GPT2_SIZES = {
    "small": GPT2Config(12, 12, 768),  # 124M
    "medium": GPT2Config(24, 16, 1024),  # 355M
    "large": GPT2Config(36, 20, 1280),  # 774M
    "xl": GPT2Config(48, 25, 1600),  # 1.56B
    "tiny": GPT2Config(2, 2, 64, vocab_size=256, n_positions=64),
    "tiny-s": GPT2Config(2, 2, 32, vocab_size=256, n_positions=64),
    "tiny-m": GPT2Config(2, 2, 64, vocab_size=256, n_positions=64),
    "tiny-l": GPT2Config(3, 4, 128, vocab_size=256, n_positions=64),
}


class GPT2Block(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.mlp_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = _sdpa(q, k, v, causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.c_proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class GPT2LMHead(nn.Module):
    """GPT-2 with its tied LM head. ``forward(ids [B, T] int64) -> logits [B, T, vocab]``."""

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


# ---------------------------------------------------------------------------------------------------------- Llama


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Llama-style decoder hyper-parameters (Meta's released ``config.json`` files)."""

    hidden: int = 2048
    n_layer: int = 16
    n_head: int = 32
    n_kv_head: int = 8
    intermediate: int = 8192
    vocab_size: int = 128256
    rms_eps: float = 1e-5
    rope_theta: float = 500000.0
    tie_embeddings: bool = True


LLAMA_SIZES = {
    "1b": LlamaConfig(2048, 16, 32, 8, 8192),  # Llama-3.2-1B
    "3b": LlamaConfig(3072, 28, 24, 8, 8192),  # Llama-3.2-3B
    "8b": LlamaConfig(4096, 32, 32, 8, 14336, tie_embeddings=False),  # Llama-3.1-8B
    "tiny": LlamaConfig(64, 2, 4, 2, 128, vocab_size=256),
    "tiny-s": LlamaConfig(32, 2, 4, 2, 64, vocab_size=256),
    "tiny-m": LlamaConfig(64, 2, 4, 2, 128, vocab_size=256),
    "tiny-l": LlamaConfig(128, 3, 8, 2, 256, vocab_size=256),
}


class LlamaRMSNorm(nn.Module):
    """RMSNorm as Hugging Face's ``LlamaRMSNorm`` computes it: in fp32, then cast back (several eager kernels)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_head, self.n_kv, self.hd = cfg.n_head, cfg.n_kv_head, cfg.hidden // cfg.n_head
        self.q_proj = nn.Linear(cfg.hidden, cfg.n_head * self.hd, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.n_kv_head * self.hd, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.n_kv_head * self.hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_head * self.hd, cfg.hidden, bias=False)

    def forward(self, x, cos, sin, k_cache, v_cache, start: int):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_head, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        k_cache[:, :, start:start + t] = k
        v_cache[:, :, start:start + t] = v
        # prefill (start 0): causal attention over the prompt; decode (t == 1): attend to every cached position
        y = _sdpa(q, k_cache[:, :, :start + t], v_cache[:, :, :start + t], causal=start == 0 and t > 1)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(cfg.hidden, cfg.rms_eps)
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden, cfg.rms_eps)
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x, cos, sin, k_cache, v_cache, start):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, k_cache, v_cache, start)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaForCausalLM(nn.Module):
    """A Llama-style decoder with a static KV cache.

    ``forward(ids [B, T] int64, start: int) -> logits [B, T, vocab]`` writes K/V of positions ``start..start+T-1``
    into the cache made by :meth:`allocate_cache` and attends to positions ``0..start+T-1``.
    """

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.n_layer))
        self.norm = LlamaRMSNorm(cfg.hidden, cfg.rms_eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        self.caches: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None

    def allocate_cache(self, batch: int, max_len: int) -> None:
        """Allocate K and V caches [batch, kv_heads, max_len, head_dim] per layer, and the RoPE tables (fp32 math)."""
        cfg, p = self.cfg, self.embed_tokens.weight
        hd = cfg.hidden // cfg.n_head
        self.caches = [
            (p.new_zeros(batch, cfg.n_kv_head, max_len, hd), p.new_zeros(batch, cfg.n_kv_head, max_len, hd))
            for _ in range(cfg.n_layer)
        ]
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, device=p.device, dtype=torch.float32) / hd)
        freqs = torch.outer(torch.arange(max_len, device=p.device, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self._rope = (emb.cos().to(p.dtype), emb.sin().to(p.dtype))

    def forward(self, ids: torch.Tensor, start: int) -> torch.Tensor:
        if self._rope is None:
            raise RuntimeError("call allocate_cache(batch, max_len) before forward")
        t = ids.shape[1]
        cos, sin = (z[start:start + t] for z in self._rope)
        x = self.embed_tokens(ids)
        for layer, (kc, vc) in zip(self.layers, self.caches):
            x = layer(x, cos, sin, kc, vc, start)
        x = self.norm(x)
        return F.linear(x, self.embed_tokens.weight) if self.lm_head is None else self.lm_head(x)


# ----------------------------------------------------------------------------------------------------------- BERT


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """BERT hyper-parameters (Devlin et al. 2019; the released ``bert-base-uncased`` config)."""

    hidden: int = 768
    n_layer: int = 12
    n_head: int = 12
    intermediate: int = 3072
    vocab_size: int = 30522
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1


BERT_SIZES = {
    "base": BertConfig(),
    "large": BertConfig(1024, 24, 16, 4096),
    "tiny": BertConfig(64, 2, 2, 128, vocab_size=256, max_positions=64),
}


class BertLayer(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.query, self.key, self.value = (nn.Linear(cfg.hidden, cfg.hidden) for _ in range(3))
        self.attn_out = nn.Linear(cfg.hidden, cfg.hidden)
        self.attn_ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.output = nn.Linear(cfg.intermediate, cfg.hidden)
        self.out_ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (lin(x).view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for lin in (self.query, self.key, self.value))
        # no padding in the synthetic batch, so no mask: Hugging Face drops an all-ones mask for SDPA the same way
        y = _sdpa(q, k, v, causal=False).transpose(1, 2).reshape(b, t, c)
        x = self.attn_ln(x + self.drop(self.attn_out(y)))  # post-LN, as in BERT
        return self.out_ln(x + self.drop(self.output(F.gelu(self.intermediate(x)))))


class BertModel(nn.Module):
    """BERT encoder with pooler. ``forward(ids [B, T] int64) -> (hidden [B, T, H], pooled [B, H])``."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.token_type = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.emb_ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.n_layer))
        self.pooler = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, ids: torch.Tensor):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(ids))
        x = self.drop(self.emb_ln(x))
        for layer in self.layers:
            x = layer(x)
        return x, torch.tanh(self.pooler(x[:, 0]))


# ------------------------------------------------------------------------------------------------------ ResNet-50


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1x1 -> 3x3 (carries the stride) -> 1x1 (x4 channels), BN + ReLU, projection shortcut."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = F.relu(self.bn2(self.conv2(y)), inplace=True)
        return F.relu(self.bn3(self.conv3(y)) + identity, inplace=True)


class ResNet(nn.Module):
    """ResNet v1.5 (torchvision layout). ``forward(images [B, 3, H, W]) -> logits [B, classes]``."""

    def __init__(self, layers=(3, 4, 6, 3), base_width: int = 64, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, base_width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        blocks, cin = [], base_width
        for i, n in enumerate(layers):
            width = base_width * 2**i
            for j in range(n):
                blocks.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x)), inplace=True))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# -------------------------------------------------------------------------------------------------------- ViT-B/16


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """ViT hyper-parameters (Dosovitskiy et al. 2021, ViT-B/16; torchvision ``vit_b_16``)."""

    image_size: int = 224
    patch: int = 16
    hidden: int = 768
    n_layer: int = 12
    n_head: int = 12
    mlp: int = 3072
    num_classes: int = 1000


VIT_SIZES = {"b16": ViTConfig(), "tiny": ViTConfig(32, 8, 64, 2, 2, 128, 10)}


class ViTBlock(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=1e-6)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(cfg.hidden, cfg.mlp), nn.Linear(cfg.mlp, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).view(b, t, 3, self.n_head, c // self.n_head).permute(2, 0, 3, 1, 4)
        x = x + self.proj(_sdpa(q, k, v, causal=False).transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln_2(x))))


class VisionTransformer(nn.Module):
    """ViT (pre-LN, class token). ``forward(images [B, 3, S, S]) -> logits [B, classes]``."""

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, cfg.hidden, cfg.patch, cfg.patch)
        n = (cfg.image_size // cfg.patch) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, cfg.hidden))
        self.pos_embedding = nn.Parameter(torch.randn(1, n, cfg.hidden) * 0.02)
        self.layers = nn.ModuleList(ViTBlock(cfg) for _ in range(cfg.n_layer))
        self.ln = nn.LayerNorm(cfg.hidden, eps=1e-6)
        self.head = nn.Linear(cfg.hidden, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x)[:, 0])


# ----------------------------------------------------------------------------------------------------- DLRM-DCNv2


@dataclasses.dataclass(frozen=True)
class DLRMConfig:
    """DLRM-DCNv2 hyper-parameters; defaults are MLPerf DLRM-v2 (mlcommons/training ``torchrec_dlrm`` README)."""

    table_rows: tuple[int, ...] = MLPERF_DLRM_V2_TABLE_ROWS
    multi_hot: tuple[int, ...] = MLPERF_DLRM_V2_MULTI_HOT
    max_table_rows: int = 4_000_000  # cap so tables + Adagrad state fit one GPU (12.4 GB fp32 tables at 4M)
    dim: int = 128
    num_dense: int = 13
    bottom_mlp: tuple[int, ...] = (512, 256, 128)
    dcn_layers: int = 3
    dcn_rank: int = 512
    top_mlp: tuple[int, ...] = (1024, 1024, 512, 256, 1)
    batch: int = 8192  # global 65536 / 8 GPUs
    lr: float = 0.005  # Adagrad

    @property
    def capped_rows(self) -> tuple[int, ...]:
        return tuple(min(n, self.max_table_rows) for n in self.table_rows)


DLRM_SIZES = {
    "mlperf": DLRMConfig(),
    "tiny": DLRMConfig(max_table_rows=100, multi_hot=tuple(min(h, 8) for h in MLPERF_DLRM_V2_MULTI_HOT), dim=16,
                       bottom_mlp=(32, 16), dcn_rank=8, top_mlp=(32, 16, 1), batch=16),
}


def _mlp(sizes: list[int], final_relu: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if final_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class LowRankCrossNet(nn.Module):
    """DCN-v2 low-rank cross network: x_{l+1} = x0 * (W_l (V_l x_l) + b_l) + x_l (torchrec ``LowRankCrossNet``)."""

    def __init__(self, width: int, layers: int, rank: int):
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(width, rank, bias=False) for _ in range(layers))
        self.W = nn.ModuleList(nn.Linear(rank, width, bias=True) for _ in range(layers))

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, w in zip(self.V, self.W):
            x = x0 * w(v(x)) + x
        return x


class DLRMDCNv2(nn.Module):
    """DLRM with a DCN-v2 interaction (torchrec ``DLRM_DCN``); one ``nn.EmbeddingBag`` (sum) per table.

    ``forward(dense [B, 13] float32, sparse list of 26 [B, L_t] int64) -> logits [B]``.
    """

    def __init__(self, cfg: DLRMConfig, sparse_grad: bool):
        super().__init__()
        self.embeddings = nn.ModuleList(
            nn.EmbeddingBag(n, cfg.dim, mode="sum", sparse=sparse_grad) for n in cfg.capped_rows
        )
        self.bottom = _mlp([cfg.num_dense, *cfg.bottom_mlp], final_relu=True)
        width = (len(cfg.table_rows) + 1) * cfg.dim
        self.crossnet = LowRankCrossNet(width, cfg.dcn_layers, cfg.dcn_rank)
        self.top = _mlp([width, *cfg.top_mlp], final_relu=False)

    def forward(self, dense: torch.Tensor, sparse: list[torch.Tensor]) -> torch.Tensor:
        x = [self.bottom(dense)] + [emb(idx) for emb, idx in zip(self.embeddings, sparse)]
        return self.top(self.crossnet(torch.cat(x, dim=1))).squeeze(1)


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

    return Workload("gpt2_train", size, "transformer", "train", f"GPT-2 {size}",
                    _precision(device, "bf16-autocast"), device, step,
                    _count(model), batch, batch * seq, {**dataclasses.asdict(cfg), "batch": batch, "seq": seq,
                                                        "optimizer": "AdamW"})


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

    return Workload("llama_infer", size, "transformer", "inference", f"Llama-style {size}",
                    _precision(device, "bf16 weights"),
                    device, step, _count(model), batch, batch * (prompt + decode),
                    {**dataclasses.asdict(cfg), "batch": batch, "prompt": prompt, "decode_steps": decode,
                     "kv_cache": "static"})


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

    return Workload("bert_infer", size, "transformer", "inference", f"BERT-{size}",
                    _precision(device, "bf16-autocast"), device, step,
                    _count(model), batch, batch * seq, {**dataclasses.asdict(cfg), "batch": batch, "seq": seq})


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
    else:
        @torch.inference_mode()
        def step():
            with _autocast(device):
                model(x)

    name = "resnet50_train" if train else "resnet50_infer"
    return Workload(name, size, "cnn", "train" if train else "inference", "ResNet-50 v1.5" if not tiny else "ResNet tiny",
                    _precision(device, "bf16-autocast"), device, step, _count(model), batch, None,
                    {"batch": batch, "resolution": res, "memory_format": "channels_last",
                     "optimizer": "SGD momentum 0.9" if train else None})


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

    return Workload("vit_b16_infer", size, "cnn", "inference", f"ViT-{size.upper()}",
                    _precision(device, "bf16-autocast"), device, step,
                    _count(model), batch, None, {**dataclasses.asdict(cfg), "batch": batch})


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
    else:
        @torch.inference_mode()
        def step():
            with _autocast(device):
                model(dense, sparse)

    name = "dlrm_dcnv2_train" if train else "dlrm_dcnv2_infer"
    conf = dataclasses.asdict(cfg)
    conf.update(capped_rows=list(cfg.capped_rows), lookups_per_sample=sum(cfg.multi_hot),
                optimizer="Adagrad (sparse tables, dense MLPs)" if train else None)
    return Workload(name, size, "recommender", "train" if train else "inference", "DLRM-DCNv2 (MLPerf DLRM-v2)",
                    _precision(device, "bf16-autocast dense, fp32 tables"), device, step, _count(model), cfg.batch, None, conf)


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
                                     lambda device, size="mlperf", **kw: build_dlrm(device, size, True, **kw)),
    "dlrm_dcnv2_infer": WorkloadSpec("dlrm_dcnv2_infer", "recommender", "inference", "mlperf", ("mlperf",),
                                     lambda device, size="mlperf", **kw: build_dlrm(device, size, False, **kw)),
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


def build(name: str, device: str = "cpu", size: str | None = None, tiny: bool = False, **overrides) -> Workload:
    """Build workload ``name`` on ``device`` at ``size`` (default: its full size, or ``"tiny"`` if ``tiny``).

    Raises ``KeyError`` for an unknown workload or size. ``overrides`` (e.g. ``batch=``) go to the builder.
    """
    spec = WORKLOADS[name]
    size = size or ("tiny" if tiny else spec.default_size)
    known = set(spec.sizes) | {"tiny"} | (set(TINY_SIZE_SWEEP.get(name, ())))
    if size not in known:
        raise KeyError(f"{name}: unknown size {size!r}; known: {sorted(known)}")
    return spec.builder(device, size=size, **overrides)


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
    "SIZE_SWEEP", "TINY_SIZE_SWEEP", "build", "approx_param_count"
]
