"""FLOPs against published formulas: Megatron-LM's training-step count and Kaplan et al.'s 2N."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.params import params
from llmcalc.inputs.presets import load_preset
from llmcalc.model.attention import sum_min
from llmcalc.workload import Workload


def megatron_train_flops(*, b, s, layers, h, heads, groups, kv_channels, ffn, topk, swiglu, shared_ffn, vocab):
    """Megatron-LM megatron/training/training.py `num_floating_point_operations` (the version whose
    attention term is s/h, i.e. not halved for causal masks), transcribed with exact fractions."""
    q_ratio = F(kv_channels * heads, h)
    gated = F(3, 2) if swiglu else 1
    return 12 * b * s * layers * h * h * (
        (1 + F(groups, heads) + F(s, h)) * q_ratio
        + F(ffn, h) * topk * gated
        + F(shared_ffn, h) * gated
        + F(vocab, 2 * layers * h)
    )


def without_router(report) -> int:
    return report.train_flops - sum(r.train for r in report.breakdown if r.component.endswith("router"))


@pytest.mark.parametrize("name", ["llama3-8b", "llama2-70b", "qwen2.5-7b"])
def test_megatron_dense_gqa_swiglu(name):
    spec = load_preset(name)
    a, f = spec.attention, spec.ffn
    b, s = 2, 4096
    ours = flops(spec, Workload(batch=b, seq=s, attention_core="dense")).train_flops
    ref = megatron_train_flops(b=b, s=s, layers=spec.n_layers, h=spec.d_model, heads=a.heads, groups=a.kv_heads,
                               kv_channels=a.head_dim, ffn=f.d_ff, topk=1, swiglu=True, shared_ffn=0,
                               vocab=spec.vocab_size)
    assert ours == ref


@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-30b-a3b", "qwen1.5-moe-a2.7b"])
def test_megatron_moe(name):
    """Megatron counts no router GEMM; ours does, so it is taken out before comparing. Qwen1.5-MoE's
    shared-expert gate (a d→1 GEMM) is likewise not in Megatron's formula."""
    spec = load_preset(name)
    a, f = spec.attention, spec.ffn
    b, s = 1, 2048
    r = flops(spec, Workload(batch=b, seq=s, attention_core="dense"))
    gate = sum(x.train for x in r.breakdown if x.component.endswith("shared_gate"))
    ref = megatron_train_flops(b=b, s=s, layers=spec.n_layers, h=spec.d_model, heads=a.heads, groups=a.kv_heads,
                               kv_channels=a.head_dim, ffn=f.d_ff, topk=f.top_k, swiglu=True,
                               shared_ffn=f.shared_experts * f.shared_d_ff, vocab=spec.vocab_size)
    assert without_router(r) - gate == ref


def test_causal_is_exactly_the_unmasked_pairs():
    spec = load_preset("llama2-7b")
    causal = flops(spec, Workload(batch=1, seq=1000, attention_core="causal"))
    dense = flops(spec, Workload(batch=1, seq=1000, attention_core="dense"))
    core = lambda r: sum(x.prefill for x in r.breakdown if "/core_" in x.component)  # noqa: E731
    assert core(dense) * 1001 == core(causal) * 2 * 1000  # S(S+1)/2 of S² pairs


def test_kaplan_forward_is_2n_plus_attention():
    """Kaplan et al. 2020, Table 1: C_forward = 2N + 2·n_layer·n_ctx·d_attn per token (dense count,
    embedding excluded from N) — exact for GPT-2 with all logits, since its LM head is the tied
    embedding (N includes it as the de-embedding)."""
    spec = load_preset("gpt2")
    n_ctx = 1024
    r = flops(spec, Workload(batch=1, seq=n_ctx, attention_core="dense", logits="all"))
    p = params(spec)
    matmul_params = sum(x.params for x in p.breakdown if x.component.startswith(("attention/", "ffn/"))) - (
        # biases are not multiplied
        12 * (3 * 768 + 768 + 3072 + 768)
    )
    per_token = 2 * (matmul_params + 768 * 50257) + 2 * 12 * n_ctx * 768 * 2
    assert r.prefill_flops == per_token * n_ctx


def test_decode_attends_s_plus_one_keys_and_generate_sums_steps():
    spec = load_preset("llama2-7b")
    one = flops(spec, Workload(batch=4, seq=100, gen=1))
    assert one.generate_flops == one.decode_flops
    g = flops(spec, Workload(batch=4, seq=100, gen=50))
    steps = sum(flops(spec, Workload(batch=4, seq=100 + t, gen=1)).decode_flops for t in range(50))
    assert g.generate_flops == steps


@pytest.mark.parametrize("a, b, w", [(1, 10, None), (1, 10, 4), (5, 20, 8), (9, 20, 8), (3, 2, 5), (1, 1, 1)])
def test_sum_min_closed_form(a, b, w):
    assert sum_min(a, b, w) == sum(min(n, w or n) for n in range(a, b + 1))


def test_sliding_window_decode_is_capped():
    spec = load_preset("mistral-7b")
    at, beyond = (flops(spec, Workload(batch=1, seq=s)).decode_flops for s in (4095, 100_000))
    assert at == beyond  # min(S+1, 4096) keys either way


def test_training_recompute():
    spec = load_preset("llama2-7b")
    none, sel, full = (flops(spec, Workload(batch=1, seq=2048, recompute=r, attention_kernel="eager"))
                       for r in ("none", "selective", "full"))
    assert none.train_flops == sel.train_flops == full.train_flops == none.train_hardware_flops  # model FLOPs
    assert none.train_hardware_flops < sel.train_hardware_flops < full.train_hardware_flops
    head = next(x.train for x in none.breakdown if x.component == "lm_head")
    assert full.train_hardware_flops == none.train_flops + (none.train_flops - head) // 3


def test_mla_absorbed_vs_decompressed_decode():
    spec = load_preset("deepseek-v3")
    s = 32768
    absorbed = flops(spec, Workload(batch=1, seq=s, mla_decode="absorbed"))
    decompress = flops(spec, Workload(batch=1, seq=s, mla_decode="decompress"))
    rows = {x.component: x.decode for x in decompress.breakdown}
    a = spec.attention
    assert rows["attention/kv_up"] == 61 * 2 * (s + 1) * a.kv_lora_rank * a.heads * (a.qk_nope_head_dim + a.v_head_dim)
    assert absorbed.decode_flops < decompress.decode_flops
