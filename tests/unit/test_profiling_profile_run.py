"""The profile_run entry point on CPU (tiny configurations): records written, errors recorded, no silent overwrite."""

import json

import pytest

from kbstudy.profiling import profile_run
from kbstudy.records.store import iter_jsonl


def test_plan_orders_seven_then_sweep_then_extras():
    full = profile_run.plan(tiny=False)
    roles = [r for _, _, r in full]
    assert roles[:7] == ["seven"] * 7 and roles[-1] == "extra"
    sweep = [(n, s) for n, s, r in full if r == "sweep"]
    assert ("gpt2_train", "large") in sweep and ("gpt2_train", "small") not in sweep  # small is among the seven
    assert all(s.startswith("tiny") for _, s, _ in profile_run.plan(tiny=True))
    with pytest.raises(KeyError):
        profile_run.plan(tiny=True, names=["nope"])


def test_cpu_tiny_run_writes_records(tmp_path):
    out = tmp_path / "cpu-run"
    summary = profile_run.main(["--device", "cpu", "--tiny", "--out", str(out), "--workloads",
                            "bert_infer,dlrm_dcnv2_infer", "--no-sweep", "--no-extras", "--wait", "0",
                            "--warmup", "1", "--active", "1", "--timing-warmup", "1", "--trials", "2"])
    assert summary == 0
    rows = list(iter_jsonl(out / "workloads.jsonl"))
    assert [r["workload"] for r in rows] == ["bert_infer", "dlrm_dcnv2_infer"]
    assert all(r["status"] == "ok" and r["level"] == "aten_op" and r["step_ms_median"] > 0 for r in rows)
    assert all(0 <= r["addressable_fraction"] <= 1 and r["git_commit"] for r in rows)
    kernels = list(iter_jsonl(out / "kernels.jsonl"))
    assert {k["workload_key"] for k in kernels} == {"bert_infer@tiny", "dlrm_dcnv2_infer@tiny"}
    for r in rows:
        total = sum(k["time_us_per_step"] for k in kernels if k["workload_key"] == r["workload_key"])
        assert total == pytest.approx(r["kernel_us_per_step"])
    names = json.loads((out / "kernel_names.json").read_text())
    assert {d["name"] for d in names["names"]} == {k["name"] for k in kernels}
    with pytest.raises(FileExistsError):
        profile_run.run(out, "cpu", True, ["bert_infer"], sweep=False, extras=False)


def test_failing_workload_is_recorded_not_fatal(tmp_path, monkeypatch):
    from kbstudy.profiling import workloads as W

    def boom(device, size="tiny", **kw):
        raise RuntimeError("CUDA out of memory (simulated)")

    monkeypatch.setitem(W.WORKLOADS, "bert_infer", W.WorkloadSpec("bert_infer", "transformer", "inference", "base",
                                                                  ("base",), boom))
    summary = profile_run.run(tmp_path, "cpu", True, ["bert_infer", "dlrm_dcnv2_infer"], sweep=False, extras=False,
                          wait=0, warmup=1, active=1, timing_warmup=0, trials=1)
    assert summary["error"] == 1 and summary["ok"] == 1
    rows = {r["workload"]: r for r in iter_jsonl(tmp_path / "workloads.jsonl")}
    assert rows["bert_infer"]["status"] == "error" and "simulated" in rows["bert_infer"]["error"]
    assert rows["dlrm_dcnv2_infer"]["status"] == "ok"


def test_production_setup_compiles_every_workload():
    """The production setup compiles each of the seven (tiny, CPU) in place: the whole model, or DLRM's dense part;
    the setup is recorded in the workload's config. Building compiles nothing yet (compilation happens on the first
    step), so this is quick; the profiled run below executes two of them."""
    from kbstudy.profiling import workloads as W

    for name in W.SEVEN:
        eager = W.build(name, "cpu", size="tiny")
        assert eager.config["setup"] == "eager" and getattr(eager.model, "_compiled_call_impl", None) is None
        wl = W.build(name, "cpu", size="tiny", setup="production")
        assert wl.config["setup"] == "production" and wl.config["compile"]["mode"] == "default"
        targets = W.WORKLOADS[name].compile_targets
        compiled = [wl.model.get_submodule(t) for t in targets] if targets else [wl.model]
        assert all(getattr(m, "_compiled_call_impl", None) is not None for m in compiled), name
        if targets:  # DLRM: the embedding bags stay eager
            assert targets == W.DLRM_DENSE_MODULES and wl.config["compile"]["modules"] == list(targets)
            assert getattr(wl.model.embeddings, "_compiled_call_impl", None) is None
    with pytest.raises(ValueError):
        W.build("bert_infer", "cpu", size="tiny", setup="max-autotune")


def test_cpu_tiny_production_run_writes_the_same_schema(tmp_path):
    """``--config production`` runs the compiled workloads (Inductor's CPU backend here) through the same path and
    writes rows with the same fields as an eager run."""
    import torch

    eager_out, prod_out = tmp_path / "eager", tmp_path / "production"
    common = ["--device", "cpu", "--tiny", "--workloads", "bert_infer,dlrm_dcnv2_infer", "--no-sweep", "--no-extras",
              "--wait", "1", "--warmup", "1", "--active", "1", "--timing-warmup", "1", "--trials", "2"]
    assert profile_run.main([*common, "--out", str(eager_out)]) == 0
    try:
        assert profile_run.main([*common, "--out", str(prod_out), "--config", "production"]) == 0
    finally:
        torch._dynamo.reset()
    eager_rows, prod_rows = list(iter_jsonl(eager_out / "workloads.jsonl")), list(iter_jsonl(prod_out / "workloads.jsonl"))
    assert all(r["status"] == "ok" for r in prod_rows), [r.get("error") for r in prod_rows]
    assert [set(r) for r in prod_rows] == [set(r) for r in eager_rows]
    assert {r["config"]["setup"] for r in prod_rows} == {"production"}
    assert {r["config"]["setup"] for r in eager_rows} == {"eager"}
    k_eager, k_prod = list(iter_jsonl(eager_out / "kernels.jsonl")), list(iter_jsonl(prod_out / "kernels.jsonl"))
    assert {frozenset(k) for k in k_prod} == {frozenset(k) for k in k_eager}
    assert all(0 <= r["addressable_fraction"] <= 1 for r in prod_rows)
