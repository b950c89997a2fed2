"""The vision models of the profiled workloads, in plain PyTorch: ResNet-50 v1.5 (He et al. 2016 with the stride on the
3x3 convolution, as torchvision and MLPerf training use it) and ViT-B/16 (Dosovitskiy et al. 2021). Nothing is imported
from ``torchvision``.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

from kbstudy.profiling.transformer_models import sdpa

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
        x = x + self.proj(sdpa(q, k, v, causal=False).transpose(1, 2).reshape(b, t, c))
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
