"""T5's bucketed relative attention bias (the `t5_buckets` position kind) in the reference decoder
(llmcalc/reference/buckets.py) against llmcalc's estimators and transformers' T5 code.

Independent sources: transformers' T5 modules, built on the meta device (the bias table's size, one per stack, in
the first layer only), `T5Attention._relative_position_bucket` (the bucket of every offset, causal and
bidirectional) and `T5Attention.compute_bias` (the bias of a query block after a cached prefix). Measured: the
parameters by module, prefill, decode and train FLOPs under FlopCounterMode and the cache bytes, exactly; cached
decode steps against one full forward; `llmcalc validate` on a small spec.
"""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.params import params
from llmcalc.inputs.presets import spec_from_data

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from test_reference import BASE, assert_cache_consistent, assert_matches  # noqa: E402
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

from llmcalc.reference.buckets import BucketAttention, relative_bucket  # noqa: E402
from llmcalc.reference.measure import PARTS, measure  # noqa: E402
from llmcalc.reference.model import Decoder  # noqa: E402

B, SEQ = 2, 12
T5_BIAS = dict(kind="t5_buckets", num_buckets=32, max_distance=128)
TINY = {
    "gqa": dict(positions=T5_BIAS),  # 4 query heads over 2 K/V heads
    "mha-small-buckets-tied": dict(positions=T5_BIAS | dict(num_buckets=8, max_distance=10), tie_embeddings=True,
                                   attention=BASE["attention"] | dict(kv_heads=4)),
    "sliding": dict(positions=T5_BIAS | dict(num_buckets=6, max_distance=8), sliding_window=5,
                    layer_pattern=["sliding", "full"]),
}


def tiny(name: str):
    return spec_from_data(BASE | TINY[name], name)


def test_table_is_t5s_relative_attention_bias():
    """transformers' T5 holds one num_buckets × H table per stack, in its first layer: a decoder's is
    llmcalc's embedding/position, and the reference's first layer holds a table of the same shape."""
    heads, buckets = 8, 32
    cfg = transformers.T5Config(vocab_size=100, d_model=64, d_kv=8, d_ff=128, num_layers=3, num_decoder_layers=3,
                                num_heads=heads, relative_attention_num_buckets=buckets,
                                relative_attention_max_distance=128)
    with torch.device("meta"):
        t5 = transformers.T5Model(cfg)
    tables = {k: p.numel() for k, p in t5.decoder.named_parameters() if "relative_attention_bias" in k}
    assert list(tables) == ["block.0.layer.0.SelfAttention.relative_attention_bias.weight"]  # the first layer only
    spec = spec_from_data(BASE | dict(positions=T5_BIAS, attention=dict(kind="gqa", heads=heads, kv_heads=heads,
                                                                          head_dim=8)), "t5-bias")
    rows = {r.component: r.params for r in params(spec).breakdown}
    with torch.device("meta"):
        model = Decoder(spec, device="meta")
    ours = {k: p.numel() for k, p in model.named_parameters() if "relative_attention_bias" in k}
    assert ours == {"layers.0.attn.relative_attention_bias.weight": buckets * heads}
    assert rows["embedding/position"] == sum(ours.values()) == sum(tables.values()) == buckets * heads


@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (8, 10), (6, 8), (16, 500), (4, 3)])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
def test_buckets_equal_transformers(buckets, distance, bidirectional):
    """Every offset j − i of a 700 × 700 grid of query and key positions, past max_distance both ways."""
    offset = torch.arange(700)[None, :] - torch.arange(700)[:, None]  # [i, j]: j − i, −699 … 699
    want = T5Attention._relative_position_bucket(offset, bidirectional, buckets, distance)
    got = relative_bucket(offset, buckets, distance, bidirectional)
    assert torch.equal(got, want)
    assert got.min() == 0 and got.max() == buckets - 1


@pytest.mark.parametrize(("start", "T"), [(0, 12), (7, 5), (200, 1)], ids=["prefill", "chunk", "decode"])
def test_bias_equals_t5_compute_bias(start, T):
    """The reference's bias for T queries after `start` cached positions equals transformers' decoder
    T5Attention.compute_bias with the same table, on every key the queries see (the rest: −∞)."""
    torch.manual_seed(0)
    spec = tiny("gqa")
    attn = BucketAttention(spec, None, table=True).to_empty(device="cpu")
    torch.nn.init.normal_(attn.relative_attention_bias.weight)
    cfg = transformers.T5Config(num_heads=spec.attention.heads, relative_attention_num_buckets=32,
                                relative_attention_max_distance=128, is_decoder=True)
    theirs = T5Attention(cfg, has_relative_attention_bias=True)
    theirs.relative_attention_bias.weight.data.copy_(attn.relative_attention_bias.weight)
    L = start + T
    with torch.no_grad():
        got = attn.bias(attn.relative_attention_bias.weight, start, T, L, torch.float32)  # [1, H, T, L]
        want = theirs.compute_bias(T, L, past_seen_tokens=start)  # [1, H, T, L]
    seen = torch.arange(L)[None, :] <= torch.arange(start, L)[:, None]  # [T, L]
    assert torch.equal(got[..., seen], want[..., seen])
    assert torch.isinf(got[..., ~seen]).all()


@pytest.mark.parametrize("name", TINY)
def test_tiny_matches_estimators(name):
    """Params by module (the table once, under embedding/position), prefill, decode and train FLOPs
    (FlopCounterMode: the bias is an add, no matmul) and the cache bytes, exactly."""
    spec = tiny(name)
    m = measure(spec, B, SEQ, "cpu")
    assert_matches(m, spec, B, SEQ)
    part = {"embedding": "embedding", "attention": "layers.attention", "ffn": "layers.ffn", "norms": "layers.norms",
            "lm_head": "lm_head"}
    want = dict.fromkeys(PARTS, 0)
    for row in params(spec).breakdown:
        want["final_norm" if row.component == "norms/final" else part[row.component.split("/")[0]]] += row.params
    assert m.params_by_module == want


def test_bias_adds_no_flops_and_no_cache():
    """The same model without positions: identical FLOPs and cache bytes; only the table's parameters differ."""
    spec = tiny("gqa")
    bare = spec.model_copy(update={"positions": spec_from_data(BASE | dict(positions=dict(kind="none")),
                                                               "bare").positions})
    with_bias, without = measure(spec, B, SEQ, "cpu"), measure(bare, B, SEQ, "cpu")
    for field in ("prefill_flops", "decode_flops", "train_flops", "kv_bytes"):
        assert getattr(with_bias, field) == getattr(without, field), field
    assert with_bias.params_total - without.params_total == 32 * spec.attention.heads


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("chunks", [(SEQ, 1), (4, 3, SEQ - 7, 1, 1)], ids=["prefill+decode", "chunked"])
def test_cached_steps_equal_one_full_forward(name, chunks):
    assert assert_cache_consistent(tiny(name), chunks).std() > 0.1


def test_fake_run_equals_cpu_run():
    spec = tiny("sliding")
    assert measure(spec, B, SEQ, "fake") == measure(spec, B, SEQ, "cpu")


def test_reference_refuses_latent_attention():
    data = BASE | dict(positions=T5_BIAS, attention=dict(kind="mla", heads=4, q_lora_rank=16, kv_lora_rank=12,
                                                         qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6))
    with pytest.raises(ValueError, match="t5_buckets"):
        Decoder(spec_from_data(data, "mla-t5"))


SMALL = BASE | dict(name="t5-bias-decoder", d_model=256, max_seq_len=256, positions=T5_BIAS,
                   attention=dict(kind="gqa", heads=8, kv_heads=4, head_dim=32), ffn=dict(kind="gated", d_ff=512))
"""Small enough to run on a CPU, large enough that the activations outweigh the bias's bucket indices (at d = 32 they
do not, and the peak-memory row, a model of the kernels' activations, reads 12% under, as ALiBi's 6%)."""


@pytest.mark.parametrize("device", ["fake", "cpu"])
def test_validate_passes(cli_json, tmp_path, device):
    """`llmcalc validate` on a decoder spec with T5's bias: counts exact, peak memory within its tolerance."""
    path = tmp_path / "t5-bias-decoder.yaml"
    path.write_text(json.dumps(SMALL))
    r = cli_json("validate", "--config", str(path), "--device", device, "--batch", "4", "--seq", "128")
    assert r["ok"] is True, [x for x in r["rows"] if not x["ok"]]
    assert {"params", "prefill FLOPs", "decode FLOPs", "train FLOPs", "KV cache bytes"} <= {
        x["quantity"] for x in r["rows"]}
