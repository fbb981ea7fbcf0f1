"""The element-wise passes' memory traffic that `train` times (llmcalc/costs/elementwise_traffic.py), fused and
eager, and what eager passes keep for the backward (llmcalc/costs/train_memory.py), checked against the counts
written out by hand from each model's published shape and against torch's own dispatch and saved tensors."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from llmcalc.costs.elementwise_traffic import elementwise_costs, layer_traffic
from llmcalc.costs.memory import memory
from llmcalc.costs.train_memory import layer_activation_bytes
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
    nbytes, kernels = layer_traffic(spec, spec.layer_groups()[0], tp=1, sp=False, act=2)
    assert nbytes == 2 * (2 * 2 * 4096 + 2 * 3 * 4096 + 3 * 14336 + 2 * 40 * 128) == 2 * 94_208
    assert kernels == 2 + 1 + 1  # the residual adds, the activation, the rotation (the norms' are the projections')


def test_qwen3_moe_counts_its_experts_and_the_routing_copies():
    """Qwen3-30B-A3B: 8 of 128 experts of d_ff 768 per token, d 2048: 8 SwiGLUs (3 · 768 each) and the token
    copied into its 8 slots and summed back (2 · (8 + 1) · 2048)."""
    spec = load_preset("qwen3-30b-a3b")
    assert spec.layer_groups()[0].ffn.elementwise_elements(2048) == 8 * 3 * 768 + 2 * 9 * 2048
    assert layer_traffic(spec, spec.layer_groups()[0], tp=1, sp=False, act=2)[1] == 2 + 1 + 1 + 2


def test_tensor_parallel_splits_the_activation_and_sequence_parallel_the_stream():
    spec = load_preset("llama3-8b")
    stream, split = 2 * 2 * 4096 + 2 * 3 * 4096, 3 * 14336 + 2 * 40 * 128
    assert layer_traffic(spec, spec.layer_groups()[0], tp=4, sp=False, act=2)[0] == 2 * (stream + split // 4)
    assert layer_traffic(spec, spec.layer_groups()[0], tp=4, sp=True, act=2)[0] == 2 * (stream // 4 + split // 4)


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


LLAMA3_8B_EAGER = (2 * 4096 * (4 * 2 + 28)  # two RMSNorms in fp32: cast, square, mean, scale, cast back, gain
                   + 2 * 3 * 4096 * 2  # two residual adds
                   + 5 * 14336 * 2  # SiLU (gate in, out) and the product (both in, out)
                   + 40 * 128 * (2 * 2 + 16)  # RoPE in fp32 on q and k: cast up, complex product, cast back
                   + 2 * (1024 + 4096) * 2)  # K and V read at 8 heads, written at 32
"""Llama 3 8B's eager passes, bytes a token and layer, written out from the ops of Llama's reference code
(Meta's llama and torchtitan's model.py): 610,304."""


def test_llama3_8b_eager_moves_what_its_reference_code_writes_op_by_op():
    """Eager: 610,304 bytes a token and layer, 3.2 × the fused 188,416; kernels: the residual adds 2, the
    activation and the product 2, RoPE's cast, product and cast back on q and k 6, the repeat 2, and RMSNorm's
    7 beyond the fused one, twice."""
    spec = load_preset("llama3-8b")
    nbytes, kernels = layer_traffic(spec, spec.layer_groups()[0], tp=1, sp=False, act=2, eager=True)
    assert nbytes == LLAMA3_8B_EAGER == 610_304
    assert kernels == 2 + 2 + 6 + 2 + 2 * 7


def test_eager_changes_nothing_where_pytorch_runs_one_native_kernel_a_pass():
    """LayerNorm and GELU are one native kernel each in eager PyTorch, and MHA copies no keys: GPT-2's passes
    move the same bytes either way."""
    spec = load_preset("gpt2")
    g = spec.layer_groups()[0]
    assert layer_traffic(spec, g, 1, False, 2, eager=True)[0] == layer_traffic(spec, g, 1, False, 2)[0]


T = 1024
"""Tokens of the eager block run under FakeTensorMode (one sequence)."""


def run_eager_block(torch):
    """Llama 3 8B's block as torchtitan's model.py writes it (RMSNorm in fp32 ops, RoPE as complex fp32,
    repeat_kv, SwiGLU), on T tokens under FakeTensorMode, its attention core one opaque kernel that keeps what a
    flash kernel keeps (q, k, v, the output and the fp32 log-sum-exp): (forward's KernelCount, backward's,
    {storage: bytes} of every tensor autograd keeps for the backward)."""
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    from llmcalc.reference.kernel_count import KernelCount

    d, H, Hkv, hd, f = 4096, 32, 8, 128, 14336

    class Core(torch.autograd.Function):  # the attention kernel: counted by the step form, not here
        @staticmethod
        def forward(ctx, q, k, v):
            out = q.new_empty(q.shape[0], q.shape[2], q.shape[1], q.shape[3]).transpose(1, 2)
            ctx.save_for_backward(q, k, v, out, q.new_empty(q.shape[:3], dtype=torch.float32))
            return out

        @staticmethod
        def backward(ctx, g):
            return tuple(g.new_empty(g.shape[0], g.shape[2], g.shape[1], g.shape[3]).transpose(1, 2)
                         for _ in range(3))

    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * w

    def rope(x, angles):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * angles).flatten(3).type_as(x)

    def repeat(x):
        return x.unsqueeze(3).expand(1, T, Hkv, H // Hkv, hd).reshape(1, T, H, hd)

    def block(x, p, angles):
        h = rms(x, p["n1"])
        q, k, v = ((h @ p[n]).view(1, T, -1, hd) for n in ("wq", "wk", "wv"))
        q, k, v = rope(q, angles), repeat(rope(k, angles)), repeat(v)
        o = Core.apply(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + o.transpose(1, 2).contiguous().view(1, T, -1) @ p["wo"]
        g = rms(x, p["n2"])
        return x + (F.silu(g @ p["w1"]) * (g @ p["w3"])) @ p["w2"]

    shapes = dict(n1=(d,), n2=(d,), wq=(d, H * hd), wk=(d, Hkv * hd), wv=(d, Hkv * hd), wo=(H * hd, d),
                  w1=(d, f), w3=(d, f), w2=(f, d))
    kept: dict[int, int] = {}

    def keep(t):
        kept[id(t.untyped_storage())] = t.untyped_storage().nbytes()
        return t

    with FakeTensorMode():
        p = {n: torch.empty(*s, dtype=torch.bfloat16, requires_grad=True) for n, s in shapes.items()}
        angles = torch.polar(torch.ones(T, hd // 2), torch.zeros(T, hd // 2)).view(1, T, 1, hd // 2)
        x = torch.empty(1, T, d, dtype=torch.bfloat16, requires_grad=True)
        forward, backward = KernelCount(), KernelCount()
        with forward, torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            y = block(x, p, angles)
        with backward:
            y.sum().backward()
        weights = {id(t.untyped_storage()) for t in p.values()}
    return forward, backward, {k: v for k, v in kept.items() if k not in weights}


def test_torch_dispatches_the_eager_bytes_forward_and_about_twice_them_backward():
    """The eager block (run_eager_block) with every aten call's tensors counted (llmcalc/reference/kernel_count.py):
    the forward moves the hand count and what it leaves out, item by item; the backward about twice the
    forward, as `train` takes it."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")
    forward, backward, _ = run_eager_block(torch)
    moved = {name: sum(b for _, b in c.kinds.values()) for name, c in (("forward", forward), ("backward", backward))}
    left_out = (2 * (4096 - 1024) * 2  # the repeat's copy reads the expanded view, H heads, not H_kv
                + 2 * 6 * 4  # each norm's per-row scalars: the mean written, + eps and rsqrt, read by the scale
                + 2 * 64 * 8  # the angle table (64 complex64 a token) read by q's and k's products
                + 2 * 4096 * 2 // T)  # the two gains, read once per call
    assert moved["forward"] == T * (LLAMA3_8B_EAGER + left_out)
    assert moved["backward"] / moved["forward"] == pytest.approx(2, abs=0.15)


def test_torch_keeps_for_the_backward_what_eager_memory_counts():
    """Every tensor autograd keeps in the eager block's forward (saved-tensor hooks, each storage once), against
    `memory --train --fusion eager`'s layer: the fused layer's 139,264 bytes a token (the matmuls' inputs, Q, K, V,
    the FFN's gate, up and product, the norms' inputs) plus eager's own, 73,728 (each RMSNorm's fp32 copy, 4 bytes
    an element; the activation's output, which the product keeps; K and V kept at 32 heads, not 8), plus the
    core's log-sum-exp (128); and what llmcalc leaves out, fused or eager: each norm's fp32 1/rms per token and
    the angle table (64 complex64 a token, one buffer shared by every layer)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")
    _, _, kept = run_eager_block(torch)
    spec = load_preset("llama3-8b")
    g = spec.layer_groups()[0]
    parts = {fusion: layer_activation_bytes(spec, g, 1, T, Workload(train=True, fusion=fusion))
             for fusion in ("fused", "eager")}
    assert parts["fused"] == (T * 139_264, T * 128)
    assert parts["eager"] == (T * (139_264 + 2 * 4096 * 4 + 14336 * 2 + 2 * (4096 - 1024) * 2), T * 128)
    assert sum(kept.values()) == sum(parts["eager"]) + 2 * T * 4 + T * 64 * 8


def test_eager_memory_keeps_more_unless_every_layer_is_recomputed():
    """Llama 3 8B, 8,192 tokens a GPU: eager keeps 73,728 bytes a token and layer more without recompute and with
    selective recompute (the core's part is not eager's); full recompute keeps each layer's input either way, and
    eager's more only in the one layer rebuilt for its backward."""
    spec = load_preset("llama3-8b")

    def acts(fusion: str, recompute: str) -> int:
        w = Workload(train=True, batch=1, seq=8192, micro_batch=1, recompute=recompute, fusion=fusion)
        return memory(spec, w).activation_bytes

    for recompute in ("none", "selective"):
        assert acts("eager", recompute) - acts("fused", recompute) == 32 * 8192 * 73_728
    assert acts("eager", "full") - acts("fused", "full") == 8192 * 73_728


def test_eager_without_a_training_step_is_exit_2_in_one_line():
    """`memory --fusion eager` names how a training step runs its passes: without --train it is refused."""
    r = run_cli("memory", "-p", "llama3-8b", "--fusion", "eager")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--fusion" in r.stderr and "--train" in r.stderr
    ok = run_cli("memory", "-p", "llama3-8b", "--train", "--batch", "8", "--seq", "2048", "--fusion", "eager",
                 "--format", "json")
    assert ok.returncode == 0
    rows = {row["component"]: row for row in json.loads(ok.stdout)["breakdown"]}
    assert "eager element-wise ops" in rows["activations"]["note"]
