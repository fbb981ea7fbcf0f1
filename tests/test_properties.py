"""Properties every estimate must keep, over thousands of random valid specs and workloads (hypothesis).

Specs are built directly as ModelSpec data (GQA/MHA/MQA or MLA attention; dense, gated or MoE FFNs
with shared experts and dense layers; both norms; every position kind; tied or untied heads; sliding
windows with layer patterns) and validated with ModelSpec.model_validate, so every example is a spec
a user could write. The properties compare the estimators with formulas written out here, with
each other, or with themselves on a grown copy of the spec or workload; none depends on timing.
Runs in well under 90 s on 2 cores (derandomized, no example database: the same examples every run).
"""

from __future__ import annotations

from functools import partial
from typing import get_args

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.inputs.gpus import load_gpu
from llmcalc.model.spec import DTYPE_BITS, ModelSpec
from llmcalc.views.compare import compare_models
from llmcalc.views.explain import explain
from llmcalc.views.sweep import sweep
from llmcalc.workload import StorageDtype, Workload

FAST = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SLOW = settings(FAST, max_examples=300)

ints = st.integers
ACTIVATIONS = st.sampled_from(["gelu", "gelu_tanh", "relu", "silu", "quick_gelu", "swiglu_oai"])
EXACT_DTYPES = st.sampled_from(["fp32", "bf16", "fp16", "fp8", "int8"])
"""Whole bytes per element; int4 packs two per byte and rounds up per layer, so sums of int4 byte
counts are exact only to within a byte per layer (see test_kv_linear_in_batch)."""


def gqa(draw) -> dict:
    kv = draw(ints(1, 4))
    return dict(kind="gqa", heads=kv * draw(ints(1, 4)), kv_heads=kv, head_dim=draw(ints(1, 64)),
                qkv_bias=draw(st.booleans()), o_bias=draw(st.booleans()), sinks=draw(st.booleans()))


def mla(draw) -> dict:
    return dict(kind="mla", heads=draw(ints(1, 8)), q_lora_rank=draw(st.none() | ints(1, 64)),
                kv_lora_rank=draw(ints(1, 64)), qk_nope_head_dim=draw(ints(1, 32)),
                qk_rope_head_dim=draw(ints(1, 16)), v_head_dim=draw(ints(1, 32)), bias=draw(st.booleans()))


def dense_ffn(draw) -> dict:
    return dict(kind=draw(st.sampled_from(["dense", "gated"])), d_ff=draw(ints(1, 512)), activation=draw(ACTIVATIONS), bias=draw(st.booleans()))


def moe_ffn(draw, n_layers: int) -> dict:
    experts, shared, dense = draw(ints(1, 16)), draw(ints(0, 2)), draw(ints(0, n_layers))
    return dict(kind="moe", experts=experts, top_k=draw(ints(1, experts)), d_ff=draw(ints(1, 256)),
                gated=draw(st.booleans()), activation=draw(ACTIVATIONS), expert_bias=draw(st.booleans()),
                router_bias=draw(st.booleans()), shared_experts=shared, shared_d_ff=draw(ints(1, 256)) if shared else 0,
                shared_gate=shared > 0 and draw(st.booleans()), dense_layers=dense,
                dense_d_ff=draw(ints(1, 512)) if dense else 0)


@st.composite
def spec_data(draw, attention: str | None = None, ffn: str | None = None, sliding: bool | None = None,
              max_layers: int = 8) -> dict:
    """The fields of a random valid ModelSpec; `attention` gqa|mla, `ffn` dense|moe, `sliding` force
    a pattern with (True) or without (False) sliding layers; None draws each."""
    n_layers = draw(ints(1, max_layers))
    attention = attention or draw(st.sampled_from(["gqa", "mla"]))
    kind = draw(st.sampled_from(["rmsnorm", "layernorm"]))
    ffn = ffn or draw(st.sampled_from(["dense", "moe"]))
    pattern = draw(st.lists(st.sampled_from(["full", "sliding"]), min_size=1, max_size=n_layers))
    if sliding is False:
        pattern = ["full"]
    elif sliding and "sliding" not in pattern:
        pattern[draw(ints(0, len(pattern) - 1))] = "sliding"
    return dict(
        name="random", vocab_size=draw(ints(2, 5000)), d_model=draw(ints(1, 512)), n_layers=n_layers,
        max_seq_len=draw(ints(1, 1 << 20)), tie_embeddings=draw(st.booleans()), lm_head_bias=draw(st.booleans()),
        norm=dict(kind=kind, bias=kind == "layernorm" and draw(st.booleans()), per_layer=draw(ints(0, 4)),
                  final=draw(st.booleans()), qk_norm=draw(st.sampled_from(["none", "head", "full"]))),
        positions=dict(kind=draw(st.sampled_from(["rope", "none", "learned", "sinusoidal", "alibi"]))),
        attention=gqa(draw) if attention == "gqa" else mla(draw),
        ffn=dense_ffn(draw) if ffn == "dense" else moe_ffn(draw, n_layers),
        sliding_window=draw(ints(1, 300)) if "sliding" in pattern else None, layer_pattern=pattern,
    )


def specs(**kw):
    return spec_data(**kw).map(ModelSpec.model_validate)


conventions = st.fixed_dictionaries(dict(
    attention_core=st.sampled_from(["causal", "dense"]), logits=st.sampled_from(["last", "all"]),
    mla_decode=st.sampled_from(["absorbed", "decompress"]), recompute=st.sampled_from(["none", "selective", "full"])))
"""Workload fields: the counting conventions."""
batches, seqs, gens = ints(1, 64), ints(1, 4096), ints(1, 300)


def kv(spec: ModelSpec, batch: int, seq: int, dtype: str):
    return kv_cache(spec, Workload(batch=batch, seq=seq, kv_dtype=dtype))


def layer_kinds(spec: ModelSpec) -> list[str]:
    """Each layer's kind, the pattern repeated over the layers (written out, not spec.sliding_layers)."""
    p = spec.layer_pattern
    return [p[i % len(p)] for i in range(spec.n_layers)]


def component_sum(rows, prefix: str, field: str = "params") -> int:
    return sum(getattr(r, field) for r in rows if r.component.startswith(prefix))


# ---- GQA at its ends is MHA and MQA ---------------------------------------------------------------

@FAST
@given(data=spec_data(attention="gqa", sliding=False), mqa=st.booleans(), batch=batches, seq=seqs,
       dtype=EXACT_DTYPES, dense=st.booleans())
def test_gqa_ends_are_mha_and_mqa(data, mqa, batch, seq, dtype, dense):
    """kv_heads = heads costs what MHA's own formulas give; kv_heads = 1 what MQA's give."""
    a = data["attention"]
    a["kv_heads"] = 1 if mqa else a["heads"]
    spec = ModelSpec.model_validate(data)
    d, H, h, L = spec.d_model, a["heads"], a["head_dim"], spec.n_layers
    kv_heads = 1 if mqa else H
    # MHA: q, k, v, o are d × H·h each; MQA: q and o d × H·h, k and v d × h
    per_layer = 2 * d * H * h + 2 * d * kv_heads * h
    per_layer += (H * h + 2 * kv_heads * h if a["qkv_bias"] else 0) + (d if a["o_bias"] else 0)
    per_layer += H if a["sinks"] else 0
    assert component_sum(params(spec).breakdown, "attention/") == L * per_layer

    r = kv(spec, batch, seq, dtype)
    elements = 2 * kv_heads * h  # K and V of every kv head, per token per layer
    assert [row.elements_per_token for row in r.per_layer] == [elements]
    assert r.total_bytes == L * batch * seq * elements * DTYPE_BITS[dtype] // 8

    f = flops(spec, Workload(batch=batch, seq=seq, gen=1, attention_core="dense" if dense else "causal"))
    pairs = seq * seq if dense else seq * (seq + 1) // 2
    core = {"prefill": L * batch * pairs * 4 * H * h, "decode": L * batch * (seq + 1) * 4 * H * h}
    for phase, want in core.items():
        assert component_sum(f.breakdown, "attention/core_", phase) == want


# ---- one expert, top-1, is the dense FFN plus its router ---------------------------------------------

@FAST
@given(data=spec_data(ffn="dense"), batch=batches, seq=seqs, gen=gens, conv=conventions, dtype=EXACT_DTYPES)
def test_moe_with_one_expert_is_dense_plus_router(data, batch, seq, gen, conv, dtype):
    ffn = data["ffn"]
    dense = ModelSpec.model_validate(data)
    moe = ModelSpec.model_validate(data | dict(ffn=dict(
        kind="moe", experts=1, top_k=1, d_ff=ffn["d_ff"], gated=ffn["kind"] == "gated",
        activation=ffn["activation"], expert_bias=ffn["bias"], router_bias=False)))
    L, d = dense.n_layers, dense.d_model
    router = L * d  # d·1 weights per layer

    p, q = params(dense), params(moe)
    assert (q.total, q.active) == (p.total + router, p.active + router)

    w = Workload(batch=batch, seq=seq, gen=gen, **conv)
    f, g = flops(dense, w), flops(moe, w)
    assert g.prefill_flops == f.prefill_flops + router * 2 * batch * seq
    assert g.decode_flops == f.decode_flops + router * 2 * batch
    assert g.generate_flops == f.generate_flops + router * 2 * batch * gen
    # training: forward and backward (3 passes) over every position; recompute redoes layers too (hardware)
    assert g.train_flops == f.train_flops + 3 * router * 2 * batch * seq
    passes = 3 + (conv["recompute"] == "full")
    assert g.train_hardware_flops == f.train_hardware_flops + passes * router * 2 * batch * seq

    o = Workload(batch=batch, seq=seq, weights_dtype=dtype)
    m, n = memory(dense, o), memory(moe, o)
    assert n.weights_bytes == m.weights_bytes + router * DTYPE_BITS[dtype] // 8
    assert n.kv_cache_bytes == m.kv_cache_bytes
    # the routed kernel holds a permuted copy of the tokens beside the expert's intermediates: never less
    assert n.activation_bytes >= m.activation_bytes
    assert n.total_bytes - n.activation_bytes == m.total_bytes - m.activation_bytes + router * DTYPE_BITS[dtype] // 8


# ---- KV cache: linear in batch; in length until the window fills -------------------------------------

@FAST
@given(spec=specs(), batch=batches, seq=seqs, dtype=st.sampled_from(get_args(StorageDtype)))
def test_kv_linear_in_batch(spec, batch, seq, dtype):
    one, two = kv(spec, batch, seq, dtype).total_bytes, kv(spec, 2 * batch, seq, dtype).total_bytes
    if DTYPE_BITS[dtype] % 8:  # int4: each layer's bytes round up to a whole byte, so doubling can save one per layer
        assert two <= 2 * one <= two + spec.n_layers
    else:
        assert two == 2 * one


@FAST
@given(spec=specs(), batch=batches, seq=seqs, more=ints(1, 4096), dtype=EXACT_DTYPES)
def test_kv_linear_in_length_until_the_window_fills(spec, batch, seq, more, dtype):
    """Full layers hold B·S tokens; sliding layers B·min(S, W − 1): linear until S ≥ W − 1, then constant."""
    kinds = layer_kinds(spec)
    a = spec.attention  # GQA: K and V of each kv head; MLA: the latent and the shared RoPE key
    elements = 2 * a.kv_heads * a.head_dim if a.kind == "gqa" else a.kv_lora_rank + a.qk_rope_head_dim
    per_token = elements * DTYPE_BITS[dtype] // 8
    w = spec.sliding_window

    def expected(s: int) -> int:
        return batch * per_token * sum(s if k == "full" else min(s, w - 1) for k in kinds)

    r = kv(spec, batch, seq, dtype)
    assert r.total_bytes == expected(seq)
    longer = kv(spec, batch, seq + more, dtype).total_bytes
    if "sliding" not in kinds:
        assert longer == r.total_bytes + kv(spec, batch, more, dtype).total_bytes
    elif "full" not in kinds and seq >= w - 1:
        assert longer == r.total_bytes


# ---- nothing costs less when anything grows ------------------------------------------------------------

def grown(data: dict, draw) -> dict | None:
    """A copy of the spec data with one size grown (kept valid), or None when that size cannot grow."""
    data = {**data, "attention": dict(data["attention"]), "ffn": dict(data["ffn"])}
    a, f = data["attention"], data["ffn"]
    options = ["d_model", "n_layers", "vocab_size", "max_seq_len", "ffn.d_ff"]
    options += ["attention.heads", "attention.head_dim", "attention.kv_heads"] if a["kind"] == "gqa" else \
        ["attention.heads", "attention.kv_lora_rank", "attention.qk_nope_head_dim", "attention.qk_rope_head_dim",
         "attention.v_head_dim"] + (["attention.q_lora_rank"] if a["q_lora_rank"] else [])
    if f["kind"] == "moe":
        options += ["ffn.experts", "ffn.top_k"] + (["ffn.shared_d_ff", "ffn.shared_experts"] if f["shared_experts"]
                                                   else []) + (["ffn.dense_d_ff"] if f["dense_layers"] else [])
    if data["sliding_window"]:
        options.append("sliding_window")
    field = draw(st.sampled_from(options))
    by = draw(ints(1, 64))
    node, key = (data, field) if "." not in field else (data[field.split(".")[0]], field.split(".")[1])
    if field == "attention.heads" and a["kind"] == "gqa":
        by *= a["kv_heads"]  # stay a multiple of kv_heads
    if field == "attention.kv_heads":  # the next divisor of heads
        bigger = [k for k in range(a["kv_heads"] + 1, a["heads"] + 1) if a["heads"] % k == 0]
        if not bigger:
            return None
        by = bigger[0] - a["kv_heads"]
    if field == "ffn.top_k" and f["top_k"] + by > f["experts"]:
        return None
    node[key] += by
    return data


@st.composite
def spec_and_grown(draw):
    data = draw(spec_data())
    bigger = grown(data, draw)
    assume(bigger is not None)
    return ModelSpec.model_validate(data), ModelSpec.model_validate(bigger)


def costs(spec: ModelSpec, batch: int, seq: int, gen: int, conv: dict, train_opts: dict) -> dict:
    f = flops(spec, Workload(batch=batch, seq=seq, gen=gen, **conv))
    return dict(prefill=f.prefill_flops, decode=f.decode_flops, generate=f.generate_flops, train=f.train_flops,
                inference_memory=memory(spec, Workload(batch=batch, seq=seq)).total_bytes,
                train_memory=memory(spec, Workload(batch=batch, seq=seq, **train_opts)).total_bytes)


train_options = st.fixed_dictionaries(dict(
    train=st.just(True), optimizer=st.sampled_from(["adamw", "adamw-8bit", "sgd"]),
    recompute=st.sampled_from(["none", "selective", "full"]), flash=st.booleans()))
"""Workload fields: a training step."""


def assert_no_less(small: dict, big: dict) -> None:
    assert all(big[k] >= small[k] for k in small), {k: (small[k], big[k]) for k in small if big[k] < small[k]}


@FAST
@given(pair=spec_and_grown(), batch=batches, seq=seqs, gen=gens, conv=conventions, opts=train_options)
def test_costs_never_decrease_when_a_size_grows(pair, batch, seq, gen, conv, opts):
    small, big = pair
    assert_no_less(costs(small, batch, seq, gen, conv, opts), costs(big, batch, seq, gen, conv, opts))


@FAST
@given(spec=specs(), batch=batches, seq=seqs, gen=gens, more=st.tuples(ints(0, 64), ints(0, 4096), ints(0, 300)),
       conv=conventions, opts=train_options)
def test_costs_never_decrease_with_the_workload(spec, batch, seq, gen, more, conv, opts):
    db, ds, dg = more
    assert_no_less(costs(spec, batch, seq, gen, conv, opts),
                   costs(spec, batch + db, seq + ds, gen + dg, conv, opts))


# ---- parameters never depend on the workload --------------------------------------------------------------

H100 = load_gpu("h100-sxm")


@SLOW
@given(spec=specs(max_layers=4), workloads=st.lists(st.tuples(batches, seqs), min_size=2, max_size=3, unique=True))
def test_params_never_depend_on_the_workload(spec, workloads):
    total = params(spec).total
    weights = memory(spec, Workload(batch=1, seq=1)).weights_bytes
    for batch, seq in workloads:
        assert params(spec).total == total
        assert memory(spec, Workload(batch=batch, seq=seq)).weights_bytes == weights
        assert memory(spec, Workload(batch=batch, seq=seq, train=True)).weights_bytes == weights
        assert compare_models([spec], Workload(batch=batch, seq=seq)).rows[0].total_params == total
        assert explain("params", spec, Workload(batch=batch, seq=seq)).total == total
    report = sweep([spec], H100, sorted({b for b, _ in workloads}), sorted({s for _, s in workloads}))
    assert {row.weights_bytes for row in report.rows} == {weights}


# ---- latency: longer or larger never makes a step faster ---------------------------------------------------

@SLOW
@given(spec=specs(max_layers=4), batch=batches, seq=seqs, more=st.tuples(ints(0, 64), ints(0, 4096)))
def test_latency_non_decreasing_in_seq_and_batch(spec, batch, seq, more):
    base = latency(spec, H100, Workload(batch=batch, seq=seq, gen=2))
    for b, s in ((batch + more[0], seq), (batch, seq + more[1]), (batch + more[0], seq + more[1])):
        r = latency(spec, H100, Workload(batch=b, seq=s, gen=2))
        assert r.ttft_s >= base.ttft_s and r.tpot_s >= base.tpot_s, (b, s, r.ttft_s, base.ttft_s, r.tpot_s, base.tpot_s)


# ---- the reference model's parameters, module by module ------------------------------------------------

PART = {"embedding": "embedding", "attention": "layers.attention", "ffn": "layers.ffn", "norms": "layers.norms",
        "lm_head": "lm_head"}


@settings(SLOW, max_examples=40)
@given(data=spec_data(max_layers=3))
def test_reference_params_by_module_equal_the_estimate(data):
    """tests/test_reference.py's random specs check the total; this checks each module's share."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from llmcalc.reference.measure import PARTS, part_of
    from llmcalc.reference.model import Decoder

    small = partial(min, 64)  # keep the fake model's construction quick
    spec = ModelSpec.model_validate(data | dict(d_model=small(data["d_model"]), vocab_size=small(data["vocab_size"]),
                                                max_seq_len=small(data["max_seq_len"])))
    with FakeTensorMode():
        model = Decoder(spec, dtype=torch.float32)
    got = dict.fromkeys(PARTS, 0)
    for name, p in model.named_parameters():
        got[part_of(name)] += p.numel()
    want = dict.fromkeys(PARTS, 0)
    for row in params(spec).breakdown:
        want["final_norm" if row.component == "norms/final" else PART[row.component.split("/")[0]]] += row.params
    assert got == want
