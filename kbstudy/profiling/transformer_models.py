"""The transformer models of the profiled workloads, in plain PyTorch from their published configurations: GPT-2
(Radford et al. 2019, Table 2, and the released ``gpt2``/``gpt2-medium``/``gpt2-large`` configs), Llama (Meta's released
``config.json`` of Llama-3.2-1B, Llama-3.2-3B and Llama-3.1-8B) and BERT-base (Devlin et al. 2019, the released
``bert-base-uncased`` config). Attention goes through ``torch.nn.functional.scaled_dot_product_attention``, as Hugging
Face models do with ``attn_implementation="sdpa"``. Sources of each constant: :mod:`kbstudy.profiling.workloads`.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

# ------------------------------------------------------------------------------------------------------ attention


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, dropout_p: float = 0.0) -> torch.Tensor:
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
        y = sdpa(q, k, v, causal=True, dropout_p=self.dropout if self.training else 0.0)
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
        # prefill (t > 1, always from start 0 here): causal attention over the prompt; decode (t == 1): attend to every
        # cached position. Decided by the static t alone, so torch.compile can treat ``start`` as a dynamic integer.
        y = sdpa(q, k_cache[:, :, :start + t], v_cache[:, :, :start + t], causal=t > 1)
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
        y = sdpa(q, k, v, causal=False).transpose(1, 2).reshape(b, t, c)
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
