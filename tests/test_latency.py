"""Roofline latency, fit and parallel layouts, on hand-worked cases and a published worked example."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.params import params
from llmcalc.costs.parallel import COLLECTIVES
from llmcalc.costs.step import KINDS, Op, collectives, experts_hit, step_costs, step_form
from llmcalc.costs.step_time import StepTime
from llmcalc.inputs.gpus import GPU_DIR, gpu_names, load_gpu
from llmcalc.inputs.presets import load_preset, spec_from_data
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.workload import Layout, Workload

IDEAL = TimeModel(compute_efficiency=1.0, memory_efficiency=1.0, comm_efficiency=1.0)
PARTIAL = TimeModel(name="test", memory_efficiency=0.7, matmul_pad_rows=48, overlap=0.4, kernel_s=3e-6,
                    collective_s=1e-5, step_s=2e-4)
"""A time model with every term a calibrated profile has (the figures are arbitrary)."""
H100 = load_gpu("h100-sxm")


def test_gpu_presets_match_the_datasheet_figures_in_references():
    """REFERENCES.md: H100 SXM 989 TFLOP/s bf16, 1979 fp8, 3.35 TB/s, 80 GB; H200 4.8 TB/s, 141 GB;
    A100 80GB 312 bf16, 2.039 TB/s."""
    assert {"h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "l4", "a10g", "rtx-4090",
            "rtx-3090", "mi300x", "b200"} <= set(gpu_names())
    assert round(H100.peak("bf16") / 1e12) == 989 and round(H100.peak("fp8") / 1e12) == 1979
    assert H100.bandwidth == 3.35e12 and H100.memory_bytes == 80 * 2**30
    h200, a100 = load_gpu("h200"), load_gpu("a100-80gb")
    assert h200.bandwidth == 4.8e12 and h200.memory_gib == 141 and h200.peak("bf16") == H100.peak("bf16")
    assert a100.peak("bf16") == 312e12 and a100.bandwidth == 2.039e12 and a100.peak_tflops.fp8 is None
    for name in gpu_names():
        g = load_gpu(name)
        assert g.source.startswith("https://"), name
        assert g.peak("fp16") >= g.peak("fp32"), name  # tensor cores beat plain FP32


def test_decode_at_batch_1_costs_at_least_weights_over_bandwidth():
    """Every weight but the embedding table (a step gathers one row of it) is read once per step."""
    spec = load_preset("llama2-7b")
    r = latency(spec, H100, Workload(batch=1, seq=128, gen=2), IDEAL)
    weights = 2 * params(spec).active_excluding_embedding
    assert r.tpot_s >= weights / H100.bandwidth
    assert r.tpot_s <= 1.01 * (weights + kv_cache(spec, Workload(batch=1, seq=129)).total_bytes) / H100.bandwidth + 1e-4
    assert r.phases[1].bound == "memory"


def test_prefill_costs_at_least_flops_over_peak():
    spec = load_preset("llama3-8b")
    r = latency(spec, H100, Workload(batch=4, seq=4096, gen=2), IDEAL)
    prefill = flops(spec, Workload(batch=4, seq=4096, gen=1, attention_core="causal", logits="last")).prefill_flops
    assert r.ttft_s >= prefill / H100.peak("bf16")
    assert r.ttft_s <= 1.05 * prefill / H100.peak("bf16")  # compute-bound: little beyond the FLOPs
    assert r.phases[0].flops == prefill and r.phases[0].bound == "compute"


@pytest.mark.parametrize("name", ["llama3-8b", "gemma2-9b", "deepseek-v2-lite", "qwen3-30b-a3b"])
def test_a_prefill_of_every_position_costs_the_flops_of_all_logits(name):
    spec, w = load_preset(name), Workload(batch=2, seq=300, logits="all")
    all_logits, last = latency(spec, H100, w).phases[0], latency(spec, H100, w.model_copy(update={"logits": "last"}))
    assert all_logits.flops == flops(spec, w).prefill_flops
    # the head projects 299 more positions per sequence: 2·d·V FLOPs each
    assert all_logits.flops - last.phases[0].flops == 2 * 299 * 2 * spec.d_model * spec.vocab_size


def test_decode_crosses_from_memory_to_compute_bound_at_the_ridge_point():
    """A bf16 matmul on B tokens does 2·B·W FLOPs over ~2·W bytes: intensity ≈ B, so the FFN of a
    decode step turns compute-bound once the batch passes the ridge point (295 FLOP/B on an H100)."""
    spec = load_preset("llama2-7b")

    def ffn(batch: int):
        return next(o for o in latency(spec, H100, Workload(batch=batch, seq=16, gen=2), IDEAL).ops
                    if o.phase == "decode first" and o.op == "ffn")

    ridge = H100.peak("bf16") / H100.bandwidth
    lo, hi = 1, 4096
    assert ffn(lo).bound == "memory" and ffn(hi).bound == "compute"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ffn(mid).bound == "memory" else (lo, mid)
    assert ffn(lo).intensity < ridge <= ffn(hi).intensity  # the switch happens at the ridge point
    # activations in and out (B·(d + f) per matmul) keep the intensity a little under B
    assert ridge <= hi <= 1.15 * ridge, (hi, ridge)


def test_kipply_worked_example_52b_on_a100(tmp_path):
    """kipply, "Transformer Inference Arithmetic" (2022): an A100 at 312 TFLOP/s and 1.5 TB/s has a
    ridge of 208 FLOP/byte, and a 52B-parameter model in 16-bit needs 2·52e9 / 1.5e12 ≈ 69 ms per
    token at batch 1 (memory-bound). Her model: d = 8192, 64 layers."""
    gpu = tmp_path / "a100-kipply.yaml"
    gpu.write_text(yaml.safe_dump({
        "name": "a100-kipply", "description": "A100 as in the article", "source": "https://kipp.ly/transformer-inference-arithmetic/",
        "peak_tflops": {"fp32": 19.5, "bf16": 312, "fp16": 312}, "memory_gib": 1000,
        "memory_bandwidth_gbs": 1500, "interconnect": "NVLink 3", "interconnect_gbs": 600}))
    spec = spec_from_data({
        "name": "kipply-52b", "vocab_size": 65536, "d_model": 8192, "n_layers": 64, "max_seq_len": 8192,
        "tie_embeddings": True, "norm": {"kind": "layernorm", "bias": True},
        "positions": {"kind": "none"},
        "attention": {"kind": "gqa", "heads": 64, "kv_heads": 64, "head_dim": 128},
        "ffn": {"kind": "dense", "d_ff": 32768, "activation": "gelu"}}, "test")
    assert 51e9 < params(spec).total < 53e9
    r = latency(spec, load_gpu(str(gpu)), Workload(batch=1, seq=1, gen=2), IDEAL)
    assert round(r.ridge_point) == 208
    assert 0.069 * 0.97 <= r.tpot_s <= 0.069 * 1.05, r.tpot_s


def test_moe_expected_experts_match_a_routing_simulation():
    rng = random.Random(0)
    for experts, k, tokens in ((8, 2, 1), (8, 2, 8), (256, 8, 16), (64, 6, 64)):
        trials = 2000
        hit = sum(len({e for _ in range(tokens) for e in rng.sample(range(experts), k)}) for _ in range(trials)) / trials
        assert experts_hit(experts, k, tokens) == pytest.approx(hit, rel=0.03), (experts, k, tokens)


def test_moe_decode_at_batch_1_reads_only_the_active_experts():
    """Batch 1: one token reads top_k of E experts, so the bytes equal the active parameters."""
    spec = load_preset("mixtral-8x7b")
    r = latency(spec, load_gpu("h200"), Workload(batch=1, seq=1, gen=2), IDEAL)
    step = next(p for p in r.phases if p.phase == "decode first")
    active_bytes = 2 * params(spec).active_excluding_embedding
    assert active_bytes <= step.bytes <= active_bytes * 1.01
    assert r.experts_hit_per_step == pytest.approx(2)


@pytest.mark.parametrize("tm", [ROOFLINE, PARTIAL], ids=["roofline", "partial-overlap-fixed-costs"])
@pytest.mark.parametrize("name,gen", [("llama2-7b", 300), ("gemma2-9b", 5000), ("deepseek-v2-lite", 200)])
def test_decode_sum_equals_step_by_step(name, gen, tm):
    """The closed-form sum over G − 1 steps equals summing each step (windows filling included), under the
    roofline and under a model with partial overlap and fixed costs."""
    spec = load_preset(name)
    seq = 4000 if name == "gemma2-9b" else 100
    w = Workload(batch=2, seq=seq, gen=gen, layout=Layout(tp=2))
    r = latency(spec, H100, w, tm)
    st = StepTime(spec, H100, w, tm, prefill=False)
    brute = sum(sum(st.time(k, c) for k, c in step_costs(spec, w, 2, 1, ctx).items()) + tm.step_s
                for ctx in range(seq, seq + gen - 1))
    assert r.decode_s == pytest.approx(brute, rel=1e-9)


def test_tensor_parallel_splits_weights_and_adds_all_reduce_time():
    spec = load_preset("llama2-70b")
    one = latency(spec, H100, Workload(batch=8, seq=2048, gen=16, layout=Layout(tp=2)))
    four = latency(spec, H100, Workload(batch=8, seq=2048, gen=16, layout=Layout(tp=4)))
    assert abs(2 * four.weights_bytes_per_gpu - one.weights_bytes_per_gpu) < 1e6
    assert four.tpot_s < one.tpot_s
    comm = [o for o in four.ops if o.op == "comm/tp_all_reduce" and o.phase == "prefill"]
    # two all-reduces per layer of B·S·d bf16 values; a ring moves 2·(tp−1)/tp of it per GPU
    assert comm[0].bytes == 2 * 80 * 2 * 3 * (8 * 2048 * 8192 * 2) // 4
    assert params(spec).total == 68_976_648_192  # the layout never changes the parameter count


def test_kv_per_gpu_follows_the_heads_and_mla_is_replicated():
    from llmcalc.costs.shard import kv_per_gpu

    llama = load_preset("llama3-8b")  # 8 kv heads
    total = kv_cache(llama, Workload(batch=4, seq=1000)).total_bytes
    assert kv_per_gpu(llama, 4, 1000, Workload(layout=Layout(tp=4))) == total // 4
    assert kv_per_gpu(llama, 4, 1000, Workload(layout=Layout(tp=16))) == total // 8  # a kv head per 2 GPUs
    ds = load_preset("deepseek-v2-lite")
    total = kv_cache(ds, Workload(batch=4, seq=1000)).total_bytes
    assert kv_per_gpu(ds, 4, 1000, Workload(layout=Layout(tp=8))) == total


def test_fit_is_consistent_with_the_kv_cache(cli_json):
    r = cli_json("fit", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--seq", "4096", "--batch", "8")
    per_seq = kv_cache(load_preset("llama2-7b"), Workload(batch=1, seq=4096)).total_bytes
    assert r["fits"] is True and r["max_batch"] == r["kv_budget_bytes"] // per_seq
    assert r["usable_bytes"] == int(80 * 2**30 * 0.9)
    assert r["weights_bytes"] == 2 * 6_738_415_616
    assert r["kv_budget_bytes"] == r["usable_bytes"] - r["weights_bytes"] - r["activation_bytes"]
    # the longest context for 8 sequences: its cache fits and one more token does not
    spec = load_preset("llama2-7b")
    assert kv_cache(spec, Workload(batch=8, seq=r["max_seq_memory"])).total_bytes <= r["kv_budget_bytes"]
    assert kv_cache(spec, Workload(batch=8, seq=r["max_seq_memory"] + 1)).total_bytes > r["kv_budget_bytes"]
    assert r["max_seq"] == spec.max_seq_len == 4096 and r["max_seq_limited_by"] == "max_seq_len"


def test_fit_reports_a_workload_that_does_not_fit_as_a_result(cli_json):
    r = cli_json("fit", "--preset", "llama2-7b", "--gpu", "l4", "--batch", "64", "--seq", "4096")
    assert r["fits"] is False and 0 < r["max_batch"] < 64


@pytest.mark.parametrize("time_model", ["roofline", "calibrated"])
def test_fit_times_the_workload_as_latency_does(cli_json, time_model):
    args = ("--preset", "llama3-8b", "--gpu", "a100-80gb", "--batch", "8", "--seq", "8192", "--time-model", time_model)
    r = cli_json("fit", *args)
    lat = cli_json("latency", *args, "--gen", "2")
    assert r["time_model"] == time_model and r["fits"] is True
    assert (r["ttft_s"], r["tpot_s"]) == (lat["ttft_s"], lat["tpot_s"])
    at_max = cli_json("latency", *args[:4], "--batch", str(r["max_batch"]), *args[6:], "--gen", "2")
    assert r["max_batch_tokens_per_s"] == at_max["decode_tokens_per_s"] > r["decode_tokens_per_s"]
    full = cli_json("fit", "--preset", "llama3-8b", "--gpu", "l4", "--batch", "64", "--seq", "8192")
    assert full["fits"] is False and full["ttft_s"] is None and full["max_batch_tokens_per_s"] > 0


def test_fit_sliding_window_model_has_no_memory_length_limit(cli_json):
    r = cli_json("fit", "--preset", "mistral-7b", "--gpu", "h100-sxm", "--batch", "1")
    assert r["max_seq_memory"] is None and r["max_seq"] == load_preset("mistral-7b").max_seq_len


def test_latency_json_fields(cli_json):
    r = cli_json("latency", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--batch", "8", "--seq", "2048",
                 "--gen", "128")
    for key in ("ttft_s", "tpot_s", "tokens_per_s", "phases", "ops"):
        assert key in r
    assert r["tokens_per_s"] == pytest.approx(8 * 128 / r["total_s"])
    assert r["tpot_end_s"] > r["tpot_s"]  # the cache grows


def test_405b_fits_8_h100_in_fp8_but_not_bf16(cli, cli_json):
    r = cli("latency", "--preset", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "8")
    assert r.returncode == 2 and "GPUs" in r.stderr and "Traceback" not in r.stderr
    ok = cli_json("fit", "--preset", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "8", "--weights-dtype", "fp8",
                  "--seq", "8192")
    assert ok["fits"] is True and ok["max_batch"] >= 1


def test_fit_names_the_fewest_gpus_that_hold_a_workload(cli_json):
    """A workload that does not fit is a result, with the smallest layout the model allows that holds it;
    that layout fits, and no layout of one GPU fewer does."""
    r = cli_json("fit", "-p", "llama3.1-405b", "--gpu", "h100-sxm", "--seq", "8k")
    assert r["fits"] is False
    s = r["smallest_fit"]
    assert s["gpus"] == s["tp"] * s["pp"] * s["dp"] and 128 % s["tp"] == 0 and 126 % s["pp"] == 0
    again = cli_json("fit", "-p", "llama3.1-405b", "--gpu", "h100-sxm", "--seq", "8k", "--tp", str(s["tp"]),
                     "--pp", str(s["pp"]))
    assert again["fits"] is True and again["smallest_fit"] is None
    n = s["gpus"] - 1
    for tp in (t for t in range(1, n + 1) if n % t == 0 and 128 % t == 0 and 126 % (n // t) == 0):
        fewer = cli_json("fit", "-p", "llama3.1-405b", "--gpu", "h100-sxm", "--seq", "8k", "--tp", str(tp),
                         "--pp", str(n // tp))
        assert fewer["fits"] is False


def test_every_calibration_profile_names_a_source_for_every_figure():
    """presets/calibration/<gpu>.yaml: a GPU preset's profile, each figure it sets with its source."""
    from llmcalc.inputs.time_models import CALIBRATION_DIR, calibrated_gpus, load_time_model

    assert set(calibrated_gpus()) <= set(gpu_names()) and "h100-sxm" in calibrated_gpus()
    for name in calibrated_gpus():
        tm = load_time_model("calibrated", load_gpu(name))
        written = set(yaml.safe_load((CALIBRATION_DIR / f"{name}.yaml").read_text())) - {"name", "gpu", "sources"}
        assert tm.gpu == name and written and written <= set(tm.sources), (name, written - set(tm.sources))


def test_calibrated_time_adds_fixed_costs_and_explain_works_it_out(cli, cli_json):
    args = ("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--batch", "1", "--seq", "128", "--gen", "64")
    roof, cal = cli_json(*args, "--time-model", "roofline"), cli_json(*args, "--time-model", "calibrated")
    assert roof["time_model"] == "roofline" and cal["time_model"] == "calibrated"
    assert cli_json(*args) == cal  # calibrated is the default where the GPU has a profile
    assert all(p["overhead_s"] == 0 for p in roof["phases"]) and all(p["overhead_s"] > 0 for p in cal["phases"])
    assert cal["ttft_s"] > roof["ttft_s"] and cal["tpot_s"] > roof["tpot_s"]  # a short prompt, a batch-1 step
    r = cli("explain", "latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--time-model", "calibrated")
    assert r.returncode == 0, r.stdout + r.stderr


def test_time_model_errors_are_one_line_exit_2(cli, tmp_path):
    mine = tmp_path / "my-gpu.yaml"  # a GPU of one's own has no bundled profile
    mine.write_text(yaml.safe_dump({**yaml.safe_load((GPU_DIR / "h100-sxm.yaml").read_text()), "name": "my-gpu"}))
    no_profile = cli("latency", "-p", "llama3-8b", "--gpu", str(mine), "--time-model", "calibrated")
    assert no_profile.returncode == 2 and "--time-model" in no_profile.stderr and "--calibration" in no_profile.stderr
    fallback = cli("latency", "-p", "llama3-8b", "--gpu", str(mine), "--format", "json")  # the default: the roofline
    assert fallback.returncode == 0 and json.loads(fallback.stdout)["time_model"] == "roofline"
    bad = tmp_path / "profile.yaml"
    bad.write_text("name: mine\noverlap: 2\n")
    r = cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(bad))
    assert r.returncode == 2 and "overlap" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    good = tmp_path / "good.yaml"
    good.write_text("name: mine\nkernel_s: 1.0e-5\nsources: {kernel_s: a guess}\n")
    assert cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(good)).returncode == 0


@pytest.mark.parametrize("name", ["gpt2", "gemma2-9b", "llama2-7b"])
def test_weights_per_gpu_on_one_gpu_are_memorys_weights(name):
    """On one GPU the weights latency holds are the model's stored weights (memory's, from params checked against
    transformers): a tied head adds only the final norm beside the embedding it shares."""
    from llmcalc.costs.memory import memory
    from llmcalc.inputs.presets import load_preset

    spec, w = load_preset(name), Workload(batch=1, seq=128)
    assert latency(spec, H100, w).weights_bytes_per_gpu == memory(spec, w).weights_bytes


@pytest.mark.parametrize("name,layout", [("deepseek-v2-lite", Layout(tp=2, ep=2, dp=2)), ("jamba-v0.1", Layout(tp=2, pp=2)),
                                         ("t5-small", Layout()), ("llama3-8b", Layout(tp=8))])
def test_step_form_entries_are_typed_by_kind(name, layout):
    """Every entry of the step form is an Op whose kind says how it is timed: the collectives are exactly the
    layout's (tensor all-reduce with tp, expert all-to-all with ep, pipeline sends with pp), bytes over a link and
    nothing else; a mixer's core runs no weight matmul (no row FLOPs); a memory entry no FLOPs; every layer
    group's entries name that group. Keys that were plain (group, name) tuples tested by a name prefix."""
    spec = load_preset(name)
    w = Workload(batch=layout.dp, seq=64, gen=4, layout=layout)
    for prefill in (True, False):
        form = step_costs(spec, w, 1, 64 if prefill else 1, 0 if prefill else 64,
                          step_form(spec, w, prefill))
        assert all(isinstance(op, Op) and op.kind in KINDS for op in form)
        assert {op.name for op in form if op.collective} == set(collectives(spec, layout)) <= set(COLLECTIVES)
        for op, cost in form.items():
            assert op == Op.of(op.group, op.name)
            if op.collective:
                assert op.group is None and cost.flops == cost.row_flops == 0 < cost.bytes
            if op.core:
                assert cost.row_flops == 0 and cost.flops > 0
            if op.memory:
                assert cost.flops == 0 < cost.bytes
            assert op.group is None or 0 <= op.group < len(spec.layer_groups())
