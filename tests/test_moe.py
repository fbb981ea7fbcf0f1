"""`llmcalc moe` (capacity, expected drops, router and expert FLOPs), the Switch/GShard-style presets,
the reference model's capacity dropping, and the position-encoding FLOPs reported apart."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import random

import pytest

from llmcalc.costs import moe
from llmcalc.costs.flops import flops
from llmcalc.costs.moe import capacity, expected_overflow, moe_report
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.model.embedding import Positions
from llmcalc.model.moe import MoE
from llmcalc.views.explain import explain
from llmcalc.workload import Workload

MOE_PRESETS = [n for n in preset_names() if isinstance(load_preset(n).ffn, MoE)]


# ---- capacity and drops -------------------------------------------------------------------------

def test_capacity_is_the_ceiling_of_cf_tokens_k_over_experts():
    assert capacity(1.25, 4096, 1, 8) == 640  # Switch: cf · tokens / experts
    assert capacity(1.0, 4096, 2, 8) == 1024  # GShard: 2N/E
    assert capacity(1.2, 10, 1, 3) == 4  # 1.2 read as 6/5: exactly 4, not a float just above it
    assert capacity(1.0, 1, 1, 8) == 1 and capacity(0.5, 7, 1, 8) == 1


def brute_force_drops(tokens: int, top_k: int, experts: int, cap: int) -> float:
    """Average dropped assignments over every routing (each token: any k-subset, equally likely)."""
    subsets = list(itertools.combinations(range(experts), top_k))
    total = 0
    for routing in itertools.product(subsets, repeat=tokens):
        load = [0] * experts
        for chosen in routing:
            for e in chosen:
                load[e] += 1
        total += sum(max(0, n - cap) for n in load)
    return total / len(subsets) ** tokens


@pytest.mark.parametrize("tokens,top_k,experts,cf", [
    (6, 1, 4, 1.0), (6, 2, 4, 1.0), (5, 1, 3, 1.25), (7, 1, 2, 0.5), (4, 3, 4, 1.0), (6, 2, 3, 2.0), (1, 1, 8, 1.25),
])
def test_expected_drops_equal_brute_force_enumeration(tokens, top_k, experts, cf):
    cap = capacity(cf, tokens, top_k, experts)
    want = brute_force_drops(tokens, top_k, experts, cap)
    assert math.isclose(experts * expected_overflow(tokens, top_k, experts, cap), want, rel_tol=1e-12, abs_tol=1e-12)


def test_expected_drops_match_monte_carlo():
    """T = 256 tokens, 8 experts, top-2, cf 1.0 (C = 64 = the mean load): 4,000 seeded random routings."""
    tokens, k, experts, trials = 256, 2, 8, 4000
    rng = random.Random(0)
    cap = capacity(1.0, tokens, k, experts)
    samples = []
    for _ in range(trials):
        load = [0] * experts
        for _ in range(tokens):
            for e in rng.sample(range(experts), k):
                load[e] += 1
        samples.append(sum(max(0, n - cap) for n in load))
    mean = sum(samples) / trials
    se = math.sqrt(sum((s - mean) ** 2 for s in samples) / (trials - 1) / trials)
    want = experts * expected_overflow(tokens, k, experts, cap)
    assert abs(mean - want) < 4 * se, (mean, want, se)


def test_drops_are_stable_far_from_the_mean():
    """C far above the mean: a tiny positive number (no cancellation); far below: ≈ E[X] − C."""
    tiny = expected_overflow(10**6, 1, 8, 130_000)
    assert 0 < tiny < 1e-40  # 15 σ above the mean
    assert math.isclose(expected_overflow(10**6, 1, 8, 1000), 125_000 - 1000, rel_tol=1e-12)
    assert expected_overflow(100, 1, 8, 100) == 0.0


def test_normal_approximation_beyond_the_exact_bound(monkeypatch):
    exact = expected_overflow(200_000, 1, 8, 25_100)
    monkeypatch.setattr(moe, "EXACT_TERMS", 10)
    approx = expected_overflow(200_000, 1, 8, 25_100)
    assert not moe.exact(200_000, 1, 8)
    assert math.isclose(exact, approx, rel_tol=0.05), (exact, approx)


@pytest.mark.parametrize("cf", [1.0, 1.25, 3.0])
def test_one_expert_top1_with_cf_at_least_1_never_drops(cf):
    base = load_preset("mixtral-8x7b")
    spec = base.model_copy(update={"ffn": base.ffn.model_copy(update={"experts": 1, "top_k": 1})})
    for row in moe_report(spec, Workload(batch=3, seq=1000), cf).rows:
        assert row.expected_dropped == 0 and row.capacity >= row.tokens
        assert row.expert_flops_padded == row.capacity * row.expert_flops_dropless // row.tokens


def test_top_k_equal_experts_sends_every_token_everywhere():
    assert expected_overflow(100, 4, 4, 90) == 10.0
    assert moe.expected_busiest(100, 4, 4) == 100.0


def test_dropless_by_default_and_the_option_overrides_the_spec():
    mixtral = moe_report(load_preset("mixtral-8x7b"), Workload(batch=8, seq=4096))
    assert mixtral.capacity_factor is None and mixtral.capacity_source == "none"
    assert all(r.capacity is None and r.expected_dropped == 0 and r.expert_flops_padded is None for r in mixtral.rows)
    switch = moe_report(load_preset("switch-base-8-decoder"), Workload(batch=8, seq=512))
    assert switch.capacity_factor == 1.25 and switch.capacity_source == "spec"
    assert switch.rows[0].capacity == 640  # ceil(1.25 · 4096 / 8)
    assert moe_report(load_preset("switch-base-8-decoder"), Workload(batch=8, seq=512), 2.0).rows[0].capacity == 1024


# ---- FLOPs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MOE_PRESETS)
def test_router_and_dropless_flops_equal_the_flops_rows(name):
    spec = load_preset(name)
    f = {row.component: row for row in flops(spec, Workload(batch=2, seq=300)).breakdown}
    r = moe_report(spec, Workload(batch=2, seq=300), 1.25)
    prefill, decode = r.rows
    assert prefill.router_flops == f["ffn/router"].prefill and decode.router_flops == f["ffn/router"].decode
    assert prefill.expert_flops_dropless == f["ffn/experts"].prefill
    assert decode.expert_flops_dropless == f["ffn/experts"].decode
    assert prefill.router_flops_per_layer == 2 * 600 * spec.d_model * (spec.ffn.experts + spec.ffn.zero_experts)


def test_padded_flops_are_two_E_C_expert_weights():
    spec = load_preset("gshard-top2-decoder")  # relu experts: up and down, 2 · 768 · 3072 weights
    r = moe_report(spec, Workload(batch=4, seq=512)).rows[0]
    w = 2 * 768 * 3072
    assert r.capacity == 512 and r.layers == 6  # ceil(1.0 · 2048 · 2 / 8): GShard's 2N/E
    assert r.expert_flops_padded == 6 * 2 * 8 * 512 * w
    assert r.expert_flops_dropless == 6 * 2 * 2048 * 2 * w
    assert math.isclose(r.expert_flops_processed, 6 * 2 * (4096 - r.expected_dropped) * w)


# ---- presets ----------------------------------------------------------------------------------------

def test_switch_and_gshard_presets_carry_the_published_shapes():
    s, g = load_preset("switch-base-8-decoder"), load_preset("gshard-top2-decoder")
    for spec in (s, g):
        assert (spec.d_model, spec.n_layers, spec.attention.heads, spec.attention.head_dim) == (768, 12, 12, 64)
        assert (spec.ffn.experts, spec.ffn.d_ff, spec.ffn.dense_layers, spec.vocab_size) == (8, 3072, 6, 32128)
        assert spec.ffn.activation == "relu" and not spec.ffn.gated and "switch-base-8" in spec.source
    assert (s.ffn.top_k, s.ffn.capacity_factor, g.ffn.top_k, g.ffn.capacity_factor) == (1, 1.25, 2, 1.0)


# ---- reference model: capacity drops measured ------------------------------------------------------

@pytest.mark.parametrize("top_k,cf", [(1, 1.25), (2, 1.0), (2, 0.5)])
def test_reference_model_drops_overflow_under_forced_routing(top_k, cf):
    """A router that sends every token to experts 0 (and 1): each takes all T tokens and keeps C."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from llmcalc.reference.model import Decoder, MoEFFN

    base = load_preset("gshard-top2-decoder")
    spec = base.model_copy(update={
        "d_model": 32, "vocab_size": 64, "n_layers": 2,
        "attention": base.attention.model_copy(update={"heads": 2, "kv_heads": 2, "head_dim": 16}),
        "ffn": base.ffn.model_copy(update={"d_ff": 16, "top_k": top_k, "dense_layers": 1, "dense_d_ff": 16})})
    torch.manual_seed(0)
    model = Decoder(spec)
    layers = [m for m in model.modules() if isinstance(m, MoEFFN)]
    for m in layers:
        m.router = nn.Linear(32, 8, bias=True)
        with torch.no_grad():
            m.router.weight.zero_()
            m.router.bias.copy_(torch.tensor([10.0, 5.0, 0, 0, 0, 0, 0, 0]))
    B, S = 3, 7
    tokens = torch.randint(0, 64, (B, S))
    dropless = model(tokens, logits="all")
    assert all(m.last_dropped is None for m in layers)
    model.drop_overflow(cf)
    dropping = model(tokens, logits="all")
    T, C = B * S, capacity(cf, B * S, top_k, 8)
    assert [m.last_dropped for m in layers] == [top_k * (T - C)]
    assert top_k * (T - C) == T * top_k - top_k * C  # = T·k − C for top-1
    assert not torch.allclose(dropless, dropping)
    model.drop_overflow(8 / top_k)  # C = T: nothing dropped, the dropless output again
    assert torch.allclose(model(tokens, logits="all"), dropless) and layers[0].last_dropped == 0
    model.drop_overflow(None)
    assert torch.equal(model(tokens, logits="all"), dropless)


def test_reference_model_drops_match_the_expectation_on_random_routing():
    """Uniform random routing (a zero-weight router with random logits per token is not uniform, so
    the routing is drawn directly): the mean measured drop over seeded draws ≈ llmcalc.costs.moe's."""
    torch = pytest.importorskip("torch")
    from llmcalc.reference.model import MoEFFN

    spec = MoE(experts=8, top_k=2, d_ff=8, capacity_factor=1.0)
    layer = MoEFFN(spec, 16)
    layer.capacity_factor = 1.0
    gen = torch.Generator().manual_seed(0)
    T, trials, measured = 64, 3000, []
    for _ in range(trials):
        idx = torch.rand(T, 8, generator=gen).topk(2, -1).indices  # a uniform 2-subset per token
        layer._within_capacity(idx)
        measured.append(layer.last_dropped)
    mean = sum(measured) / trials
    se = math.sqrt(sum((m - mean) ** 2 for m in measured) / (trials - 1) / trials)
    want = 8 * expected_overflow(T, 2, 8, capacity(1.0, T, 2, 8))
    assert abs(mean - want) < 4 * se, (mean, want, se)


# ---- position encoding FLOPs --------------------------------------------------------------------

def with_positions(name: str, kind: str):
    return load_preset(name).model_copy(update={"positions": Positions.variant(kind)()})


def test_rope_flops_of_llama2_7b_by_hand():
    p = flops(load_preset("llama2-7b"), Workload(batch=1, seq=4096)).positions
    per = 3 * (32 + 32) * 128  # 2 multiplies + 1 add per rotated element of q and k
    assert (p.kind, p.per_token_per_layer) == ("rope", per)
    assert p.prefill == 32 * 4096 * per and p.decode == 32 * per and p.train == 2 * p.prefill


def test_rope_flops_of_mla_rotate_the_rope_part_and_the_shared_key():
    p = flops(load_preset("deepseek-v2-lite"), Workload(batch=2, seq=100)).positions
    assert p.per_token_per_layer == 3 * (16 + 1) * 64 and p.prefill == 27 * 200 * 3 * 17 * 64


def test_alibi_flops_are_heads_per_pair_per_layer():
    spec = with_positions("gpt2", "alibi")
    p = flops(spec, Workload(batch=2, seq=5000, gen=3)).positions
    assert p.per_pair_per_layer == 12
    assert p.prefill == 12 * 12 * 2 * 5000 * 5001 // 2
    assert p.decode == 12 * 12 * 2 * 5001
    assert p.generate == 12 * 12 * 2 * (5001 + 5002 + 5003)
    dense = flops(spec, Workload(batch=2, seq=5000, attention_core="dense")).positions
    assert dense.prefill == 12 * 12 * 2 * 5000 * 5000


def test_alibi_in_a_sliding_layer_counts_only_its_window():
    spec = with_positions("gemma2-9b", "alibi")  # 21 sliding (4096) + 21 full layers, 16 heads
    p = flops(spec, Workload(batch=1, seq=8192)).positions
    window = sum(min(i, 4096) for i in range(1, 8193))
    assert p.prefill == 16 * (21 * 8192 * 8193 // 2 + 21 * window)


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_added_positions_cost_d_per_token_once(kind):
    p = flops(with_positions("gpt2", kind), Workload(batch=4, seq=1000, gen=7)).positions
    assert (p.prefill, p.decode, p.generate, p.train) == (768 * 4000, 768 * 4, 768 * 28, 768 * 4000)


def test_position_flops_stay_out_of_the_matmul_totals():
    for kind in ("rope", "alibi", "sinusoidal", "none"):
        f = flops(with_positions("llama2-7b", kind), Workload(batch=2, seq=512))
        g = flops(with_positions("llama2-7b", "none"), Workload(batch=2, seq=512))
        assert (f.prefill_flops, f.decode_flops, f.train_flops) == (g.prefill_flops, g.decode_flops, g.train_flops)
    assert flops(with_positions("llama2-7b", "none"), Workload(batch=2, seq=512)).positions.prefill == 0


@pytest.mark.parametrize("name,kind", [("llama2-7b", "rope"), ("deepseek-v3", "rope"), ("gpt2", "alibi"),
                                       ("gemma2-9b", "alibi"), ("gpt2", "learned")])
def test_explain_flops_works_out_the_positions(name, kind):
    r = explain("flops", with_positions(name, kind), Workload(batch=2, seq=5000))
    assert r.matches
    assert {t.component for t in r.totals} >= {"positions/prefill", "positions/decode"}


# ---- CLI --------------------------------------------------------------------------------------------

def test_cli_json(cli_json):
    out = cli_json("moe", "--preset", "switch-base-8-decoder", "--batch", "8", "--seq", "512")
    prefill, decode = out["rows"]
    assert (prefill["phase"], prefill["tokens"], prefill["capacity"]) == ("prefill", 4096, 640)
    assert (decode["phase"], decode["tokens"], decode["capacity"]) == ("decode", 8, 2)
    assert out["capacity_factor"] == 1.25 and any("routing assumption" in n for n in out["notes"])
    assert prefill["router_flops"] == 6 * 2 * 4096 * 768 * 8


def test_cli_table_and_csv(cli):
    r = cli("moe", "--preset", "mixtral-8x7b", "--batch", "2", "--seq", "1024", "--capacity-factor", "1.25")
    assert r.returncode == 0, r.stderr
    assert "capacity C per expert" in r.stdout and "E[dropped] per layer" in r.stdout and "640" in r.stdout
    r = cli("moe", "--preset", "gshard-top2-decoder", "--batch", "2", "--seq", "64", "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [(x["row"], x["phase"]) for x in rows] == [("item", "prefill"), ("item", "decode"), ("summary", "")]
    assert int(rows[0]["capacity"]) == 32 and rows[0]["model"] == "gshard-top2-decoder"


def test_cli_dropless_note(cli_json):
    out = cli_json("moe", "--preset", "qwen3-30b-a3b", "--batch", "1", "--seq", "128")
    assert out["capacity_factor"] is None and out["notes"][0].startswith("dropless")


@pytest.mark.parametrize("args,needle", [
    (["--preset", "llama2-7b"], "--preset"),
    (["--preset", "mixtral-8x7b", "--capacity-factor", "0"], "--capacity-factor"),
    (["--preset", "mixtral-8x7b", "--capacity-factor", "nan"], "--capacity-factor"),
    (["--preset", "mixtral-8x7b", "--batch", "0"], "--batch"),
])
def test_cli_bad_input_is_one_line_exit_2(cli, args, needle):
    r = cli("moe", *args)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr and "Traceback" not in r.stderr


def test_spec_capacity_factor_is_validated(tmp_path, cli):
    data = json.loads(json.dumps(load_preset("mixtral-8x7b").model_dump()))
    data["ffn"]["capacity_factor"] = -1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    r = cli("moe", "--config", str(path))
    assert r.returncode == 2 and "capacity_factor" in r.stderr


def test_capacity_is_clamped_to_the_tokens(cli_json):
    """An expert never receives more than T tokens (top_k experts are distinct), so a huge capacity
    factor gives C = T, no drops and no overflow."""
    out = cli_json("moe", "--preset", "mixtral-8x7b", "--batch", "2", "--seq", "64", "--capacity-factor", "1e308")
    prefill = next(p for p in out["rows"] if p["tokens"] == 128)
    assert prefill["capacity"] == 128 and prefill["expected_dropped"] == 0
