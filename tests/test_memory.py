"""Memory against Korthikanti et al. 2022 and EleutherAI's Transformer Math 101."""

from __future__ import annotations

import pytest

from llmcalc.costs.memory import memory
from llmcalc.costs.train_memory import layer_activation_bytes
from llmcalc.costs.params import params
from llmcalc.errors import UserError
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Layout, Workload


@pytest.mark.parametrize("seq, batch", [(2048, 1), (2048, 4), (512, 2)])
def test_korthikanti_gpt3_layer(seq, batch):
    """Per layer, 16-bit, dropout, no flash, no tensor parallel: s·b·h·(34 + 5·a·s/h) bytes."""
    spec = load_preset("gpt3-175b")
    h, a = 12288, 96
    lin, core = layer_activation_bytes(spec, spec.layer_groups()[0], batch, seq,
                                       Workload(train=True, flash=False, dropout=True))
    assert lin + core == seq * batch * h * 34 + 5 * a * seq * seq * batch
    assert core == 5 * a * seq * seq * batch  # the part selective recompute removes


def test_selective_and_full_recompute_reduce_activations():
    spec = load_preset("gpt3-175b")
    acts = [memory(spec, Workload(batch=1, seq=2048, train=True, flash=False, dropout=True, recompute=r))
            .activation_bytes for r in ("none", "selective", "full")]
    assert acts[0] > acts[1] > acts[2]
    logits = 4 * 2048 * 50257
    full_expected = 96 * 2 * 2048 * 12288 + (2048 * 12288 * 34 + 5 * 96 * 2048 * 2048) + logits
    assert acts[2] == full_expected


def test_mixed_precision_adam_is_16_bytes_per_param():
    spec = load_preset("llama2-7b")
    n = params(spec).total
    r = memory(spec, Workload(batch=1, seq=1024, train=True))
    assert r.weights_bytes + r.gradient_bytes + r.optimizer_bytes == 16 * n
    r8 = memory(spec, Workload(batch=1, seq=1024, train=True, optimizer="adamw-8bit"))
    assert r8.optimizer_bytes == 6 * n


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_divides_by_dp(stage):
    spec = load_preset("llama2-7b")
    n = params(spec).total
    r = memory(spec, Workload(batch=8, seq=1024, train=True, zero=stage, layout=Layout(dp=8)))
    assert r.optimizer_bytes == 12 * n // 8
    assert r.gradient_bytes == (2 * n // 8 if stage >= 2 else 2 * n)
    assert r.weights_bytes == (2 * n // 8 if stage >= 3 else 2 * n)


def test_weights_dtypes():
    spec = load_preset("llama2-7b")
    n = params(spec).total
    assert memory(spec, Workload(batch=1, seq=1, weights_dtype="fp32")).weights_bytes == 4 * n
    int4 = memory(spec, Workload(batch=1, seq=1, weights_dtype="int4", group_size=128)).weights_bytes
    layers = n - 2 * 32000 * 4096 - (65 * 4096)  # embedding, head and norms stay bf16
    assert int4 == layers // 2 + 2 * layers // 128 + 2 * (n - layers)


def test_inference_total_and_dominant():
    r = memory(load_preset("llama2-7b"), Workload(batch=64, seq=32768))
    assert r.kv_cache_bytes == 2**40 and r.dominant == "kv_cache"
    assert r.total_bytes == r.weights_bytes + r.kv_cache_bytes + r.activation_bytes
    r1 = memory(load_preset("llama2-7b"), Workload(batch=1, seq=512))
    assert r1.dominant == "weights"


def test_does_not_fit_is_still_reported(cli_json):
    out = cli_json("memory", "--preset", "llama3.1-405b", "--batch", "512", "--seq", "131072", "--train")
    assert out["total_bytes"] > 10**15 and type(out["activation_bytes"]) is int


def test_json_interface(cli_json):
    out = cli_json("memory", "--preset", "mixtral-8x7b", "--batch", "8", "--seq", "4096")
    for key in ("weights_bytes", "kv_cache_bytes", "activation_bytes", "total_bytes"):
        assert type(out[key]) is int


def test_int4_groups_run_along_each_input_with_a_partial_last_group():
    """Falcon-7B's width 4544 is 35.5 groups of 128: each matrix row keeps ⌈d_in / 128⌉ fp16 scales. By hand:
    per layer q 4544→4544, k and v 4544→64 (MQA), o 4544→4544, up 4544→18176, down 18176→4544."""
    spec, g = load_preset("falcon-7b"), 128
    shapes = [(4544, 4544), (4544, 64), (4544, 64), (4544, 4544), (4544, 18176), (18176, 4544)]
    packed = 32 * sum(i * o // 2 for i, o in shapes)
    scales = 32 * sum(o * -(-i // g) for i, o in shapes)
    matrices = 32 * sum(i * o for i, o in shapes)
    n = params(spec).total
    int4 = memory(spec, Workload(batch=1, seq=1, weights_dtype="int4")).weights_bytes
    assert int4 == packed + 2 * scales + 2 * (n - matrices)


@pytest.mark.parametrize("name", ["gpt-oss-20b", "falcon-7b", "gpt2", "deepseek-v3", "phi3-mini"])
def test_int4_works_for_presets_whose_widths_128_does_not_divide(cli_json, name):
    out = cli_json("memory", "-p", name, "--weights-dtype", "int4")
    bf16 = cli_json("memory", "-p", name)
    assert bf16["weights_bytes"] / 4.1 < out["weights_bytes"] < bf16["weights_bytes"] / 2


def test_training_batch_is_global_and_each_gpu_takes_its_share():
    spec = load_preset("llama3-8b")
    shared = memory(spec, Workload(batch=32, seq=4096, train=True, layout=Layout(dp=8)))
    alone = memory(spec, Workload(batch=4, seq=4096, train=True))
    assert (shared.per_gpu_batch, shared.micro_batch) == (4, 4)
    assert shared.activation_bytes == alone.activation_bytes
    micro = memory(spec, Workload(batch=32, seq=4096, train=True, micro_batch=1, layout=Layout(dp=8)))
    assert micro.activation_bytes == memory(spec, Workload(batch=1, seq=4096, train=True)).activation_bytes
    with pytest.raises(UserError, match="`micro_batch`"):
        memory(spec, Workload(batch=32, seq=4096, train=True, micro_batch=3, layout=Layout(dp=8)))


def test_zero_without_dp_says_it_divides_nothing():
    r = memory(load_preset("gpt2"), Workload(batch=1, seq=128, train=True, zero=3))
    assert any("divides nothing" in n for n in r.notes)


def test_a_chunked_prefill_holds_one_chunks_activations_and_the_other_is_noted(cli_json):
    """Jamba at 4 × 256k once showed 155 GB of activations from one unchunked prefill while `fit` sizes a
    server's 8k chunks. --prefill-chunk N holds the activations of one N-token prefill (what `memory --batch 1 --seq
    N` holds), the KV cache and weights unchanged; each report names the other figure."""
    whole = cli_json("memory", "-p", "jamba-v0.1", "--batch", "4", "--seq", "256k")
    chunked = cli_json("memory", "-p", "jamba-v0.1", "--batch", "4", "--seq", "256k", "--prefill-chunk", "8k")
    one = cli_json("memory", "-p", "jamba-v0.1", "--batch", "1", "--seq", "8k")
    assert chunked["activation_bytes"] == one["activation_bytes"] < whole["activation_bytes"]
    assert (chunked["weights_bytes"], chunked["kv_cache_bytes"]) == (whole["weights_bytes"], whole["kv_cache_bytes"])
    assert any("--prefill-chunk" in n and f"{one['activation_bytes'] / 1e9:,.1f} GB" in n for n in whole["notes"])
    assert any(f"{whole['activation_bytes'] / 1e9:,.1f} GB" in n for n in chunked["notes"])
