"""The recommender model of the profiled workloads: DLRM-DCNv2 in plain PyTorch, configured as MLPerf DLRM-v2
(mlcommons/training ``recommendation_v2/torchrec_dlrm/README.MD``); its structure mirrors
``torchrec.models.dlrm.DLRM_DCN`` and ``torchrec.modules.crossnet.LowRankCrossNet``.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn

#: MLPerf DLRM-v2 (Criteo 1TB multi-hot) embedding-table row counts, 26 sparse features (mlcommons/training README).
MLPERF_DLRM_V2_TABLE_ROWS = (
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938, 155, 4, 976, 14,
    40000000, 40000000, 40000000, 590152, 12973, 108, 36,
)
#: MLPerf DLRM-v2 multi-hot sizes (lookups per sample for each of the 26 features; 214 in total).
MLPERF_DLRM_V2_MULTI_HOT = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)


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
