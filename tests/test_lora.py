"""LoRA and QLoRA fine-tuning (llmcalc/model/lora.py, llmcalc/costs/lora.py): parameter counts against PEFT's
printed figures worked by hand, FLOPs and parameters against the torch reference model with adapters, QLoRA's base
bytes against the nf4-dq format's own count, and the command line's exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.lora import adapter_params
from llmcalc.costs.memory import memory
from llmcalc.costs.weights import weights_bytes
from llmcalc.inputs.presets import load_preset
from llmcalc.model.formats import WeightFormats, weight_format
from llmcalc.model.lora import QLORA_FORMATS, TARGETS
from llmcalc.workload import Workload

ROOT = Path(__file__).parents[1]


def trainable(preset: str, rank: int, targets=TARGETS) -> int:
    return sum(adapter_params(load_preset(preset), Workload(train=True, lora_rank=rank,
                                                            lora_targets=tuple(targets))).values())


def test_llama2_7b_r8_q_v_is_peft_figure():
    """PEFT prints "trainable params: 4,194,304" for Llama-2-7b, r=8, q_proj and v_proj: by hand, 32 layers ×
    2 matrices × 8 · (4096 + 4096)."""
    assert 32 * 2 * 8 * (4096 + 4096) == 4_194_304
    assert trainable("llama2-7b", 8, ("q", "v")) == 4_194_304


def test_llama2_7b_r64_all_linear_by_hand():
    """QLoRA's setup (r=64 on every linear of the layers): per layer q, k, v, o 64 · (4096 + 4096) each,
    gate and up 64 · (4096 + 11008), down 64 · (11008 + 4096); 159,907,840 in all (PEFT's all-linear figure)."""
    per_layer = 4 * 64 * (4096 + 4096) + 3 * 64 * (4096 + 11008)
    assert 32 * per_layer == 159_907_840
    assert trainable("llama2-7b", 64) == 159_907_840


def test_moe_gets_one_adapter_per_expert_matrix():
    """Mixtral-8x7B, r=16 on gate, up, down: every one of the 8 experts' three matrices in each of 32 layers."""
    d, f, e = 4096, 14336, 8
    assert trainable("mixtral-8x7b", 16, ("gate", "up", "down")) == 32 * e * 3 * 16 * (d + f)


def test_mla_targets_map_onto_latent_projections():
    """DeepSeek-V2-Lite (no query latent): q → q; k and v → kv_down and kv_up, adapted once for either."""
    spec = load_preset("deepseek-v2-lite")
    a = spec.attention
    kv = 8 * (spec.d_model + a.kv_lora_rank + a.qk_rope_head_dim) + 8 * (a.kv_lora_rank + a.heads * (
        a.qk_nope_head_dim + a.v_head_dim))
    assert trainable("deepseek-v2-lite", 8, ("k",)) == trainable("deepseek-v2-lite", 8, ("k", "v")) == 27 * kv
    assert trainable("deepseek-v2-lite", 8, ("q",)) == 27 * 8 * (spec.d_model + a.heads * a.qk_head_dim)


def test_lora_flops_are_frozen_2x_adapters_3x():
    """Train FLOPs under LoRA: 2 × the frozen matmuls, 3 × the attention core, 3 × the adapters' forward
    (2 · tokens · r · (d_in + d_out) each), the same as full training less one forward of the weights' matmuls."""
    spec, tokens = load_preset("llama2-7b"), 4 * 2048
    full = flops(spec, Workload(batch=4, seq=2048))
    lora = flops(spec, Workload(batch=4, seq=2048, lora_rank=8, lora_targets=("q", "v")))
    weights = sum(r.train // 3 for r in full.breakdown if "core_" not in r.component)  # one forward of them
    adapters = 3 * 2 * tokens * 4_194_304
    assert lora.train_flops == full.train_flops - weights + adapters
    assert {r.component for r in lora.breakdown if r.component.startswith("lora/")} == {
        "lora/attention/q", "lora/attention/v"}


def test_qlora_base_bytes_are_the_nf4_dq_count():
    """QLoRA's frozen base: every layer matrix in nf4-dq as the formats module counts it, the rest bf16."""
    spec = load_preset("llama2-7b")
    fmt, d, f, v = weight_format("nf4-dq"), 4096, 11008, 32000
    per_layer = 4 * fmt.matrix_bytes(d, d) + 2 * fmt.matrix_bytes(d, f) + fmt.matrix_bytes(f, d) + 2 * 2 * d
    by_hand = 32 * per_layer + 2 * (v * d + d + d * v)
    qlora = WeightFormats.parse(QLORA_FORMATS)
    assert weights_bytes(spec, qlora)[0] == by_hand
    r = memory(spec, Workload(batch=1, seq=512, train=True, lora_rank=64, weights_format=qlora))
    assert r.weights_bytes == by_hand and r.trainable_params == 159_907_840
    assert r.adapter_bytes == r.gradient_bytes == 2 * 159_907_840 and r.optimizer_bytes == 12 * 159_907_840


def test_frozen_linears_keep_no_input():
    """LoRA on q, v only keeps neither the FFN's input nor down's input (the gated product): d + f fewer
    elements per token and layer than all targets, less the adapters' own r-wide intermediates."""
    spec = load_preset("llama2-7b")
    base = dict(batch=1, seq=1024, train=True, lora_rank=8)
    qv = memory(spec, Workload(**base, lora_targets=("q", "v"))).activation_bytes
    every = memory(spec, Workload(**base)).activation_bytes
    assert every - qv == 2 * 1024 * 32 * ((4096 + 11008) + 8 * 5)


def test_full_training_of_quantised_weights_stays_refused():
    from llmcalc.errors import UserError

    with pytest.raises(UserError, match="lora_rank"):
        memory(load_preset("llama2-7b"), Workload(train=True, weights_dtype="int4"))


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,targets", [("llama2-7b", ("q", "v")), ("llama2-7b", TARGETS),
                                          ("deepseek-v2-lite", TARGETS), ("mixtral-8x7b", ("up", "down")),
                                          ("gpt2", ("q", "o", "up"))])
def test_reference_measures_the_estimate(name, targets):
    """The reference decoder with adapters (a scaled copy, real tensors): trainable and total parameters and the
    training step's FLOPs (FlopCounterMode) equal the estimate; without routed experts, the activation bytes
    the adapters add and the static memory too."""
    from llmcalc.costs.params import params
    from llmcalc.reference.measure import measure_lora
    from llmcalc.views.validate import compare_lora, scaled_copy

    spec = scaled_copy(load_preset(name), 2, 8)
    w = Workload(batch=2, seq=32, train=True, attention_core="dense", lora_rank=4, lora_targets=targets)
    m = measure_lora(spec, 2, 32, 4, frozenset(targets), "cpu")
    assert m.trainable_params == memory(spec, w).trainable_params
    assert m.params_total == params(spec).total + m.trainable_params
    assert m.train_flops == flops(spec, w).train_flops
    rows = compare_lora(spec, 2, 32, m, w)
    assert all(r.ok for r in rows if r.tolerance == 0), [r for r in rows if not r.ok]


def llmcalc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.mark.parametrize("args,flag", [
    (("memory", "--train", "--lora", "0"), "--lora"),
    (("memory", "--train", "--lora", "8", "--lora-targets", "q,qkv"), "--lora-targets"),
    (("memory", "--lora", "8"), "--lora"),
    (("memory", "--train", "--qlora"), "--qlora"),
    (("memory", "--train", "--lora-targets", "q"), "--lora-targets"),
    (("flops", "--lora", "-3"), "--lora"),
    (("validate", "--lora", "8"), "--lora"),
])
def test_bad_input_exits_2_naming_the_flag(args, flag):
    out = llmcalc(*args, "--preset", "llama2-7b")
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and flag in out.stderr, out.stderr


def test_memory_json_keeps_fields_and_adds_lora():
    import json

    out = llmcalc("memory", "-p", "llama2-7b", "--train", "--lora", "64", "--qlora", "-f", "json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert {"weights_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "total_bytes"} <= set(r)
    assert r["trainable_params"] == 159_907_840 and r["adapter_bytes"] == 2 * 159_907_840
    assert r["lora_rank"] == 64 and [x["component"] for x in r["breakdown"]][:2] == ["weights", "adapters"]


def test_validate_train_lora_exit_code(tmp_path):
    out = llmcalc("validate", "-p", "llama2-7b", "--device", "cpu", "--layers", "2", "--scale", "8", "--batch", "2",
                  "--seq", "32", "--train", "--lora", "8", "--lora-targets", "q,v", "-f", "json")
    assert out.returncode == 0, out.stdout + out.stderr
