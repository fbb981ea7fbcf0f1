"""Transformer-XL relative positions (the `relative` position kind) against published counts and measurements.

Parameters: Chinchilla's Table A9 (Hoffmann et al. 2022, arXiv 2203.15556: all 50 model configurations of the
Gopher architecture, tests/fixtures/chinchilla_table_a9.json) and Gopher's Table 1 (Rae et al. 2021, arXiv
2112.11446), and the relative-attention parameters of transformers' XLNet layer (W_r, u, v) on the meta device.
FLOPs: torch's FlopCounterMode on the reference RelativeAttention (llmcalc/reference/relative.py), exactly; its
scores against a per-pair evaluation of Dai et al.'s formula; cached decode steps against one full forward.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.params import params
from llmcalc.errors import UserError
from llmcalc.inputs.presets import load_preset, spec_from_data
from llmcalc.views.compare import compare_attention
from llmcalc.views.explain import explain
from llmcalc.workload import Workload

TABLE_A9 = json.loads((Path(__file__).parent / "fixtures" / "chinchilla_table_a9.json").read_text())

GOPHER_TABLE_1 = [  # Rae et al. 2021, Table 1: published size, n_layers, n_heads, key/value size, d_model
    ("44M", 8, 16, 32, 512), ("117M", 12, 12, 64, 768), ("417M", 12, 12, 128, 1536),
    ("1.4B", 24, 16, 128, 2048), ("7.1B", 32, 32, 128, 4096), ("280B", 80, 128, 128, 16384)]


def gopher_like(d: int, ffw: int, kv_size: int, heads: int, layers: int, positions: str = "relative"):
    """The Gopher/Chinchilla architecture (as presets/gopher-280b.yaml describes it) at the given shape."""
    data = load_preset("chinchilla-70b").model_dump()
    data |= dict(name=f"d{d}-L{layers}", d_model=d, n_layers=layers)
    data["attention"] |= dict(heads=heads, kv_heads=heads, head_dim=kv_size)
    data["ffn"] |= dict(d_ff=ffw)
    data["positions"] = {"kind": positions}
    return spec_from_data(data, "test")


@pytest.mark.parametrize("row", TABLE_A9["rows"], ids=lambda r: f"{r[0]}M")
def test_chinchilla_table_a9_within_one_percent(row):
    published, d, ffw, kv_size, heads, layers = row
    total = params(gopher_like(d, ffw, kv_size, heads, layers)).total
    assert abs(total / (published * 1e6) - 1) < 0.01, (total, published)


def test_table_a9_needs_the_relative_projection():
    """Without W_r and the biases every configuration falls 4.5–8% short: the table counts them."""
    short = [1 - params(gopher_like(*r[1:], positions="none")).total / (r[0] * 1e6) for r in TABLE_A9["rows"]]
    assert min(short) > 0.045 and max(short) < 0.08


@pytest.mark.parametrize(("size", "layers", "heads", "kv_size", "d"), GOPHER_TABLE_1)
def test_gopher_table_1_sizes(size, layers, heads, kv_size, d):
    """Each count rounds to the published size at its printed precision (1.4B: 1.37B rounds to 1.4B)."""
    total = params(gopher_like(d, 4 * d, kv_size, heads, layers)).total
    value, unit = float(size[:-1]), {"M": 1e6, "B": 1e9}[size[-1]]
    decimals = len(size[:-1].partition(".")[2])
    assert round(total / unit, decimals) == value, (total, size)


@pytest.mark.parametrize(("name", "published"), [("gopher-280b", 280e9), ("chinchilla-70b", 70e9)])
def test_presets_match_their_papers(name, published):
    assert round(params(load_preset(name)).total / 1e9) == published / 1e9


def test_shared_biases_counted_once():
    spec = load_preset("chinchilla-70b")
    shared = spec.model_copy(update={"positions": spec.positions.model_copy(update={"shared_biases": True})})
    a = spec.attention
    assert params(spec).total - params(shared).total == (spec.n_layers - 1) * 2 * a.heads * a.head_dim


def test_relative_needs_multi_head_attention():
    data = load_preset("deepseek-v2-lite").model_dump() | {"positions": {"kind": "relative"}}
    with pytest.raises(UserError, match="positions.kind"):
        spec_from_data(data, "test")


def test_flops_conventions():
    """Causal prefill counts S(S+1)/2 position-score pairs, dense S·S; the projection is per forward, shared by
    the batch, S distances in prefill and S + 1 in a decode step; train: projection 2× (R is fixed), scores 3×."""
    spec = load_preset("chinchilla-70b")
    B, S, L, width, d = 4, 2048, spec.n_layers, spec.attention.q_width, spec.d_model
    rows = {}
    for conv in ("causal", "dense"):
        r = flops(spec, Workload(batch=B, seq=S, attention_core=conv))
        rows[conv] = {row.component: row for row in r.breakdown}
    causal, dense = rows["causal"], rows["dense"]
    assert causal["attention/core_position_scores"].prefill == L * 2 * B * S * (S + 1) // 2 * width
    assert dense["attention/core_position_scores"].prefill == L * 2 * B * S * S * width
    assert causal["attention/position_projection"].prefill == L * 2 * S * d * width
    assert causal["attention/position_projection"].decode == L * 2 * (S + 1) * d * width
    assert causal["attention/position_projection"].train == 2 * causal["attention/position_projection"].prefill
    assert causal["attention/core_position_scores"].train == 3 * causal["attention/core_position_scores"].prefill
    assert any(n.startswith("relative positions: each forward projects") for n in flops(spec, Workload()).notes)
    element_wise = flops(spec, Workload(batch=B, seq=S)).positions  # q + u, q + v per token; AC + BD per pair
    assert element_wise.prefill == L * (B * S * 2 * width + spec.attention.heads * B * S * (S + 1) // 2)


def test_compare_leaves_out_what_relative_positions_refuse():
    r = compare_attention(load_preset("chinchilla-70b"), ["gqa", "mla"], Workload(batch=1, seq=1024))
    assert [row.name for row in r.rows] == ["mha", "gqa"]
    assert any(n.startswith("mla: left out: positions.kind") for n in r.notes)


@pytest.mark.parametrize("topic", ["params", "flops"])
def test_explain_works_out_relative_terms(topic):
    r = explain(topic, load_preset("gopher-280b"), Workload(batch=2, seq=1000))
    assert r.matches and any("position" in s.component for s in r.steps)


transformers = pytest.importorskip("transformers", reason="transformers is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")

from test_reference import BASE, assert_cache_consistent, assert_matches  # noqa: E402

from llmcalc.reference.layers import Step, sinusoidal  # noqa: E402
from llmcalc.reference.measure import measure  # noqa: E402
from llmcalc.reference.relative import RelativeAttention  # noqa: E402

B, SEQ = 2, 12
TINY = {"per-layer-biases-gqa": dict(positions=dict(kind="relative")),  # 4 query heads over 2 K/V heads
        "shared-biases-mha": dict(positions=dict(kind="relative", shared_biases=True), tie_embeddings=True,
                                  attention=BASE["attention"] | dict(kv_heads=4))}


def tiny(name: str):
    return spec_from_data(BASE | TINY[name], name)


def test_position_params_equal_xlnet_layers():
    """transformers' XLNet relative attention holds Transformer-XL's W_r, u (r_w_bias) and v (r_r_bias) per layer."""
    d, heads, head_dim, layers = 1024, 16, 64, 3
    cfg = transformers.XLNetConfig(d_model=d, n_head=heads, d_head=head_dim, n_layer=layers, vocab_size=1000)
    with torch.device("meta"):
        model = transformers.XLNetModel(cfg)
    theirs = sum(layer.rel_attn.r.numel() + layer.rel_attn.r_w_bias.numel() + layer.rel_attn.r_r_bias.numel()
                 for layer in model.layer)
    spec = gopher_like(d, 4 * d, head_dim, heads, layers)
    ours = {row.component: row.params for row in params(spec).breakdown}
    assert ours["attention/position_projection"] + ours["attention/position_biases"] == theirs


@pytest.mark.parametrize("name", TINY)
def test_tiny_relative_matches_estimators(name):
    """Params by module, prefill, decode and train FLOPs (FlopCounterMode) and the cache, exactly."""
    spec = tiny(name)
    m = measure(spec, B, SEQ, "cpu")
    assert_matches(m, spec, B, SEQ)
    by_module = {"embedding": 0, "layers.attention": 0}
    for row in params(spec).breakdown:
        head = row.component.split("/")[0]
        if head in ("embedding", "attention"):
            by_module["embedding" if head == "embedding" else "layers.attention"] += row.params
    assert {k: m.params_by_module[k] for k in by_module} == by_module


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("chunks", [(SEQ, 1), (4, 3, SEQ - 7, 1, 1)], ids=["prefill+decode", "chunked"])
def test_cached_steps_equal_one_full_forward(name, chunks):
    assert assert_cache_consistent(tiny(name), chunks).std() > 0.1


def test_scores_follow_dai_et_al():
    """The module's output equals softmax over keys j ≤ i of ((q_i + u)·k_j + (q_i + v)·W_r R_{i−j}) / √h, summed
    pair by pair: the relative shift puts distance i − j under key j."""
    torch.manual_seed(0)
    spec = tiny("per-layer-biases-gqa")
    a, T = spec.attention, 7
    attn = RelativeAttention(spec, None).to_empty(device="cpu")
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(1, T, spec.d_model)
    with torch.no_grad():
        got = attn(x, None, Step(0, None, None, False))[0]
        q = (x[0] @ attn.q.weight.T).view(T, a.heads, a.head_dim)
        k = (x[0] @ attn.k.weight.T).view(T, a.kv_heads, a.head_dim)
        v = (x[0] @ attn.v.weight.T).view(T, a.kv_heads, a.head_dim)
        r = (sinusoidal(torch.arange(T), spec.d_model) @ attn.r.weight.T).view(T, a.heads, a.head_dim)
        u, bias_v = attn.biases
        group = a.heads // a.kv_heads
        heads_out = torch.zeros(T, a.heads, a.head_dim)
        for i in range(T):
            for n in range(a.heads):
                kv = n // group
                scores = torch.stack([(q[i, n] + u[n]) @ k[j, kv] + (q[i, n] + bias_v[n]) @ r[i - j, n]
                                      for j in range(i + 1)]) / math.sqrt(a.head_dim)
                heads_out[i, n] = scores.softmax(0) @ v[: i + 1, kv]
        want = heads_out.reshape(T, -1) @ attn.o.weight.T
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
