"""Steps launched without CUDA graphs (`--enforce-eager`): each lasts at least the host's launches of its kernels and
collectives × the time model's launch_s. Against published runs without graphs (docs/accuracy.md: vLLM 0.2's
batch-1 decode of Llama-2-70B, whose launch_s table rows fitted; the held-out ones here), and for what the closed
forms must keep: the decode sum equal to its steps one by one, a GPU-bound step untouched, serve's steps unpadded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmcalc.costs.engine_step import EngineStep
from llmcalc.costs.latency import latency
from llmcalc.costs.step import step_costs
from llmcalc.costs.step_time import StepTime
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_time_model
from llmcalc.model.time_model import ROOFLINE
from llmcalc.workload import Layout, Workload

A100 = load_gpu("a100-80gb")
A100_PCIE = A100.model_copy(update={"name": "a100-80gb-pcie", "bandwidth_gbs": 1935.0})


def _tm(gpu):
    return load_time_model("calibrated", gpu)


@pytest.mark.parametrize("tp, weights, tokens_per_s", [(2, "fp16", 15.27), (8, "fp16", 14.32), (2, "int4", 21.4)])
def test_held_out_runs_without_cuda_graphs_are_predicted_within_1_4x(tp, weights, tokens_per_s):
    """mlc-ai/llm-perf-bench's README (d401356f), vLLM acbed3ef (no CUDA graphs at the time), Llama-2-70B at
    batch 1 on PCIe A100s, 7-token prompt, 256 tokens: the held-out rows (the table rows at tp 4 and on A10Gs fitted
    launch_s). With graphs assumed, tp 8 was predicted 3.4× too fast; the rate barely moves with tp as the host
    sets it. The int4 run (AWQ) is the fastest of the three and stays 1.38× faster than predicted."""
    w = Workload(batch=1, seq=7, gen=256, weights_dtype=weights, kv_dtype="fp16", compute_dtype="fp16",
                 act_dtype="fp16", layout=Layout(tp=tp), enforce_eager=True)
    r = latency(load_preset("llama2-70b"), A100_PCIE, w, _tm(A100))
    assert 1 / 1.4 < tokens_per_s / (256 / r.total_s) < 1.4
    graphs = latency(load_preset("llama2-70b"), A100_PCIE, w.model_copy(update={"enforce_eager": False}), _tm(A100))
    assert r.total_s > graphs.total_s


def test_the_decode_sum_is_its_steps_one_by_one_across_the_host_floor():
    """A batch whose decode is host-bound at first and GPU-bound once its cache has grown: the closed form (a
    bisection for the crossing, then latency's segments) equals the sum of each step's bounded time."""
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    tm = _tm(gpu)
    w = Workload(batch=128, seq=1024, gen=4097, enforce_eager=True)
    st = StepTime(spec, gpu, w, tm, prefill=False)
    steps = [st.bounded(sum(st.time(k, c) for k, c in step_costs(spec, w, 128, 1, 1024 + i).items()))
             for i in range(4096)]
    assert min(steps) == pytest.approx(st.host_s + st.step_s) and max(steps) > st.host_s + st.step_s * 2
    assert latency(spec, gpu, w, tm).decode_s == pytest.approx(sum(steps), rel=1e-9)


def test_a_gpu_bound_step_and_the_roofline_are_untouched():
    """A 32k-token prefill takes far longer than launching its kernels: the same time with or without graphs; the
    roofline has no launch_s and charges nothing (its note says so)."""
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    w = Workload(batch=1, seq=32768, gen=2)
    eager = w.model_copy(update={"enforce_eager": True})
    assert latency(spec, gpu, eager, _tm(gpu)).ttft_s == latency(spec, gpu, w, _tm(gpu)).ttft_s
    r = latency(spec, gpu, eager, ROOFLINE)
    assert r.total_s == latency(spec, gpu, w, ROOFLINE).total_s
    assert any("not charged" in n for n in r.notes)


def test_an_engine_step_without_graphs_is_latencys_and_lasts_the_hosts_launches():
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    tm = _tm(gpu)
    w = Workload(enforce_eager=True)
    step = EngineStep(spec, gpu, w, tm)
    st = StepTime(spec, gpu, w, tm, prefill=False)
    assert step.decode_time(4, 1000) == pytest.approx(st.host_s + st.step_s)
    one = Workload(batch=4, seq=1000, gen=2, enforce_eager=True)
    assert step.decode_time(4, 1000) == pytest.approx(latency(spec, gpu, one, tm).tpot_s, rel=1e-12)


def _serve(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "llmcalc", "serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--rate",
                        "4", "-n", "100", "-f", "json", *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_serve_enforce_eager_steps_at_the_host_and_says_so():
    """vLLM with --enforce-eager: no CUDA graphs (no padding), each decode step at least the host's launches; the
    notes say both."""
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    floor = StepTime(spec, gpu, Workload(enforce_eager=True), _tm(gpu), prefill=False).host_s
    eager, graphs = _serve("--enforce-eager"), _serve()
    assert eager["tpot_s"]["p50"] >= floor > 2 * graphs["tpot_s"]["p50"]
    assert any("no CUDA graphs, KV pool" in n for n in eager["notes"])
    assert any("--enforce-eager" in n and "launch_s" in n for n in eager["notes"])
    assert not any("launch_s" in n for n in graphs["notes"])


def test_a_prompt_chunk_beside_decodes_never_shortens_an_eager_step():
    """MLA's prompt path launches fewer kernels than its absorbed decode path (912 against 1,034 for DeepSeek-V3 over
    tp 8, ep 8): a step running both is held at the more numerous, so adding a chunk to decodes adds time."""
    spec, gpu = load_preset("deepseek-v3"), load_gpu("h200")
    w = Workload(weights_dtype="fp8", compute_dtype="fp8", kv_dtype="bf16", layout=Layout(tp=8, ep=8),
                 enforce_eager=True)
    step = EngineStep(spec, gpu, w, _tm(gpu))
    alone, mixed = step.decode_time(4, 3200), step.decode_time(4, 3200, chunk=16)
    floor = StepTime(spec, gpu, w, _tm(gpu), prefill=False).host_s
    assert mixed >= alone >= floor > StepTime(spec, gpu, w, _tm(gpu), prefill=True).host_s
