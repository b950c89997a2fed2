"""Each tiny workload runs a step on CPU; the model structures follow their published configurations."""

import pytest
import torch

from kbstudy.profiling import workloads as W


@pytest.mark.parametrize("name", list(W.SEVEN) + list(W.EXTRAS))
def test_tiny_workload_runs_one_step(name):
    torch.manual_seed(0)
    wl = W.build(name, "cpu", tiny=True)
    assert wl.params > 0 and wl.domain in W.DOMAINS and wl.mode in ("train", "inference")
    params = None
    if wl.mode == "train":
        # a training step must change the weights
        model_params = [c.cell_contents for c in wl.step.__closure__ if isinstance(c.cell_contents, torch.nn.Module)]
        assert model_params, "training step should close over its model"
        params = [p.detach().clone() for p in model_params[0].parameters()]
    wl.step()
    if params is not None:
        after = list(model_params[0].parameters())
        assert any(not torch.equal(a.detach(), b) for a, b in zip(after, params))


def test_seven_workloads_cover_three_domains_train_and_inference():
    specs = [W.WORKLOADS[n] for n in W.SEVEN]
    assert len(specs) == 7
    assert {s.domain for s in specs} == set(W.DOMAINS)
    assert {s.mode for s in specs} == {"train", "inference"}
    assert all(len(W.SIZE_SWEEP[n]) >= 3 for n in W.SIZE_SWEEP)


def test_dlrm_mlperf_configuration():
    cfg = W.DLRM_SIZES["mlperf"]
    assert len(cfg.table_rows) == len(cfg.multi_hot) == 26
    assert sum(cfg.multi_hot) == 214
    assert max(cfg.capped_rows) == cfg.max_table_rows
    # DCN input width = (26 embeddings + bottom-MLP output) x dim
    assert (len(cfg.table_rows) + 1) * cfg.dim == 3456 and cfg.bottom_mlp[-1] == cfg.dim


def test_dlrm_forward_shape_and_crossnet_update():
    cfg = W.DLRM_SIZES["tiny"]
    torch.manual_seed(0)
    model = W.DLRMDCNv2(cfg, sparse_grad=False)
    dense, sparse, _ = W._dlrm_inputs(cfg, "cpu")
    assert model(dense, sparse).shape == (cfg.batch,)
    net = model.crossnet
    x0 = torch.randn(3, net.V[0].in_features)
    x = x0
    for v, w in zip(net.V, net.W):
        x = x0 * (x @ v.weight.T @ w.weight.T + w.bias) + x
    torch.testing.assert_close(net(x0), x)


def test_llama_kv_cache_decode_matches_full_prefill():
    torch.manual_seed(0)
    model = W.LlamaForCausalLM(W.LLAMA_SIZES["tiny"]).eval()
    ids = torch.randint(0, 256, (2, 9))
    with torch.no_grad():
        model.allocate_cache(2, 16)
        full = model(ids, 0)[:, -1]
        model.allocate_cache(2, 16)
        model(ids[:, :8], 0)
        step = model(ids[:, 8:], 8)[:, -1]
    torch.testing.assert_close(step, full, atol=1e-5, rtol=1e-5)


def test_gpt2_small_parameter_count_matches_the_released_model():
    # GPT-2 small has 124.4M parameters (Hugging Face gpt2, tied head); build on the meta device to skip allocation
    with torch.device("meta"):
        model = W.GPT2LMHead(W.GPT2_SIZES["small"])
    assert sum(p.numel() for p in model.parameters()) == 124_439_808


def test_unknown_size_raises():
    with pytest.raises(KeyError):
        W.build("gpt2_train", "cpu", size="gigantic")
