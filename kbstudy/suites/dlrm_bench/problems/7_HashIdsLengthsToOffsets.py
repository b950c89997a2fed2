# DLRM-Bench problem 7: sparse-ID preprocessing of a KeyedJaggedTensor: raw int64 IDs hashed into the table by
# modulo (the MLPerf DLRM "hashing trick", ``id % max_ind_range``) and per-bag lengths turned into offsets.
# Shapes from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 26 features x 8192 samples
# per GPU = 212,992 bags, mean 8.2 IDs per bag (214 multi-hot IDs per sample / 26 features), lengths uniform in
# [0, 16]; hash size capped at 4,000,000 rows (MLPerf: 40,000,000).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Returns ``cat([offsets, ids % hash_size])`` as one int64 tensor of length num_bags + 1 + total.

    Inputs: raw_ids int64 [total] (non-negative, < 2**62); lengths int64 [num_bags] (>= 0, sum = total).
    offsets = [0, cumsum(lengths)] (int64 [num_bags + 1]). Eager PyTorch: ``remainder`` (elementwise), ``cumsum``
    (cub scan), ``pad`` and ``cat``.
    """

    def __init__(self, hash_size: int):
        super().__init__()
        self.hash_size = hash_size

    def forward(self, raw_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        offsets = F.pad(torch.cumsum(lengths, 0), (1, 0))
        return torch.cat([offsets, torch.remainder(raw_ids, self.hash_size)])


batch_size = 8192
num_features = 26
max_bag_length = 16
hash_size = 4000000


def get_inputs():
    lengths = torch.randint(0, max_bag_length + 1, (num_features * batch_size,))
    total = int(lengths.sum())
    raw_ids = torch.randint(0, 2**62, (total,))
    return [raw_ids, lengths]


def get_init_inputs():
    return [hash_size]
