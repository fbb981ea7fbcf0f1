"""The element-wise passes' memory traffic that `train` times (llmcalc/costs/elementwise_traffic.py), checked
against the element counts written out by hand from each model's published shape."""

from __future__ import annotations

import pytest

from llmcalc.costs.elementwise_traffic import elementwise_costs, layer_elements
from llmcalc.costs.step import Op
from llmcalc.costs.step_time import StepTime
from llmcalc.costs.training import forward_costs, training_step
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.model.time_model import ROOFLINE
from llmcalc.workload import Layout, Workload


def test_llama3_8b_moves_188_kb_a_token_and_layer():
    """Llama 3 8B (d 4096, d_ff 14336, 32 query and 8 key/value heads of 128, RoPE on every dimension): two
    RMSNorms (4096 in, 4096 out each), two residual adds (2 × 4096 in, 4096 out), SwiGLU (2 × 14336 in, 14336
    out) and the rotation of q and k ((32 + 8) · 128 in and out): 94,208 elements, 188,416 bytes in bf16."""
    spec = load_preset("llama3-8b")
    elements, kernels = layer_elements(spec, spec.layer_groups()[0], tp=1, sp=False)
    assert elements == 2 * 2 * 4096 + 2 * 3 * 4096 + 3 * 14336 + 2 * 40 * 128 == 94_208
    assert kernels == 2 + 1 + 1  # the residual adds, the activation, the rotation (the norms' are the projections')


def test_qwen3_moe_counts_its_experts_and_the_routing_copies():
    """Qwen3-30B-A3B: 8 of 128 experts of d_ff 768 per token, d 2048: 8 SwiGLUs (3 · 768 each) and the token
    copied into its 8 slots and summed back (2 · (8 + 1) · 2048)."""
    spec = load_preset("qwen3-30b-a3b")
    assert spec.layer_groups()[0].ffn.elementwise_elements(2048) == 8 * 3 * 768 + 2 * 9 * 2048
    assert layer_elements(spec, spec.layer_groups()[0], tp=1, sp=False)[1] == 2 + 1 + 1 + 2


def test_tensor_parallel_splits_the_activation_and_sequence_parallel_the_stream():
    spec = load_preset("llama3-8b")
    stream, split = 2 * 2 * 4096 + 2 * 3 * 4096, 3 * 14336 + 2 * 40 * 128
    assert layer_elements(spec, spec.layer_groups()[0], tp=4, sp=False)[0] == stream + split // 4
    assert layer_elements(spec, spec.layer_groups()[0], tp=4, sp=True)[0] == stream // 4 + split // 4


def test_the_training_forward_carries_the_passes_at_the_bandwidth():
    """Under the roofline the passes are memory at bandwidth · memory_efficiency, and a micro-batch's forward is
    the step form's ops plus them: 188,416 bytes × 32 layers × 4,096 tokens on an H100 SXM."""
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    w = Workload(train=True, batch=8, seq=4096, micro_batch=1, layout=Layout(dp=8))
    r = training_step(spec, gpu, w, ROOFLINE, check_memory=False)
    st = StepTime(spec, gpu, w, ROOFLINE, prefill=True)
    plain = sum(st.time(k, c) for k, c in forward_costs(spec, w, 1).items() if not k.collective)
    passes = 188_416 * 32 * 4096 / (gpu.bandwidth * ROOFLINE.memory_efficiency)
    assert r.micro_batches == 1 and r.forward_s == pytest.approx(plain + passes, rel=1e-12)
    costs, _ = elementwise_costs(spec, w, 4096)
    assert costs == {Op.of(0, "elementwise"): (0, 188_416 * 32 * 4096, 0)} and Op.of(0, "elementwise").memory
