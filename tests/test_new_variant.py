"""A new attention variant is one class: `Strided` below is defined in this file alone, and params, kv,
flops, memory, latency, sweep, compare and explain all take it with no edit to the package.

Strided is the fixed-stride pattern of Child et al. 2019 ("Generating Long Sequences with Sparse
Transformers", arXiv:1904.10509), one pattern for every head, causal: query i (1-based) sees key j ≤ i
when i − j < w (its local window) or i − j is a multiple of s (every s-th earlier key). Its projections
and cache are GQA's: every token's K and V stay cached, since a later query may reach any of them.
Figures are checked against a brute-force count of the mask and against the GQA model it is built on.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset, spec_from_data
from llmcalc.model.attention import GQA, Attention, sum_min
from llmcalc.model.base import PosInt
from llmcalc.model.spec import ModelSpec
from llmcalc.views.compare import compare_attention, compare_models
from llmcalc.views.explain import TOPICS, explain
from llmcalc.views.sweep import sweep
from llmcalc.workload import Workload


class Strided(GQA):
    """GQA heads with the fixed-stride pattern: query i sees min(i, w) local keys and every s-th key before
    them, min(i, w) + max(0, ⌊(i − 1)/s⌋ − ⌊(w − 1)/s⌋) keys. dense convention: S×S (a masked dense kernel)."""

    kind: Literal["strided"] = "strided"
    local: PosInt
    stride: PosInt

    own_key_pattern: ClassVar[bool] = True
    explain_legend: ClassVar[dict[str, str]] = {"W_s": "strided local window (tokens)", "s_s": "stride"}

    @property
    def label(self) -> str:
        return f"Strided {self.heads}q/{self.kv_heads}kv × {self.head_dim}, local {self.local}, stride {self.stride}"

    @property
    def kind_label(self) -> str:
        return f"Strided {self.heads}h"

    def keys_upto(self, n: int) -> int:
        """Σ_{i=1..n} keys of query i: Σ min(i, w), plus Σ_{t<N} ⌊t/s⌋ with N = n − s·⌊(w − 1)/s⌋ (t = i − 1
        shifted so the strided keys start past the window): s·q(q − 1)/2 + r·q, q = ⌊N/s⌋, r = N mod s."""
        n_past = max(0, n - (self.local - 1) // self.stride * self.stride)
        q, r = divmod(n_past, self.stride)
        return sum_min(1, n, self.local) + self.stride * q * (q - 1) // 2 + r * q

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        if attention == "dense" and context == 0:
            return new * new
        return self.keys_upto(context + new) - self.keys_upto(context)

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return super().explain_symbols(kv_bits) | {"W_s": self.local, "s_s": self.stride}

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        if phase == "decode":
            return "min(S + 1, W_s) + max(0, S // s_s − (W_s − 1) // s_s)"
        if attention == "dense":
            return "S · S"
        past = "max(0, S − (W_s − 1) // s_s · s_s)"
        q = f"{past} // s_s"
        return (f"min(S, W_s) · (min(S, W_s) + 1) // 2 + (S − min(S, W_s)) · W_s + s_s · ({q}) · ({q} − 1) // 2 "
                f"+ ({past} − ({q}) · s_s) · ({q})")


def keys(i: int, w: int, s: int) -> int:
    """Keys query i sees, counted from the mask."""
    return sum(1 for j in range(1, i + 1) if i - j < w or (i - j) % s == 0)


def tiny(w: int = 5, s: int = 3, **attn) -> ModelSpec:
    return spec_from_data(dict(
        name="strided", vocab_size=97, d_model=32, n_layers=2, max_seq_len=64, tie_embeddings=False,
        norm=dict(kind="rmsnorm"), positions=dict(kind="rope"),
        attention=dict(kind="strided", heads=4, kv_heads=2, head_dim=8, local=w, stride=s) | attn,
        ffn=dict(kind="gated", d_ff=48)), "test")


def llama(kind: str = "strided") -> ModelSpec:
    """llama2-7b with its attention swapped for Strided (local 256, stride 128), or kept (gqa)."""
    data = load_preset("llama2-7b").model_dump()
    data["name"] = f"llama2-7b {kind}"
    if kind == "strided":
        data["attention"] |= {"kind": "strided", "local": 256, "stride": 128}
    return spec_from_data(data, "test")


# ---- the registry ----------------------------------------------------------------------------------


def test_subclassing_registers_the_kind_and_specs_take_it():
    assert Attention.kinds["strided"] is Strided
    spec = llama()
    assert isinstance(spec.attention, Strided) and spec.attention.stride == 128
    assert ModelSpec.model_validate(spec.model_dump()) == spec
    assert ModelSpec.model_validate_json(spec.model_dump_json()) == spec
    assert spec.model_dump()["attention"] == {"kind": "strided", "heads": 32, "kv_heads": 32, "head_dim": 128,
                                              "qkv_bias": False, "key_bias": True, "o_bias": False,
                                              "sinks": False, "output_gate": False, "local": 256,
                                              "stride": 128}


def test_bad_input_names_the_field_and_lists_the_new_kind():
    with pytest.raises(UserError, match=r"attention: .*'gqa', 'mla'.*'strided'.*use one of the listed kinds"):
        tiny(kind="strode")
    with pytest.raises(UserError, match=r"^test: attention\.stride: .*greater than 0"):
        tiny(s=0)
    with pytest.raises(UserError, match="layer_pattern: strided attention sets its own key pattern"):
        spec_from_data(tiny().model_dump() | {"layer_pattern": ["sliding"], "sliding_window": 8}, "test")


# ---- figures against the mask and against GQA ---------------------------------------------------------


@pytest.mark.parametrize("w, s", [(5, 3), (1, 1), (4, 4), (3, 7), (8, 2)])
def test_pairs_count_the_mask(w, s):
    a = tiny(w, s).attention
    for seq in range(41):
        assert a.keys_upto(seq) == sum(keys(i, w, s) for i in range(1, seq + 1))
        assert a.pairs(1, seq, None) == keys(seq + 1, w, s)
        assert a.pairs(3, seq, None) == sum(keys(i, w, s) for i in range(seq + 1, seq + 4))


@pytest.mark.parametrize("seq", [1, 6, 17, 40])
def test_flops_kv_and_params_by_hand(seq):
    spec, (w, s), B = tiny(), (5, 3), 2
    H, H_kv, h, L = 4, 2, 8, 2
    gqa = spec.model_copy(update={"attention": GQA(heads=H, kv_heads=H_kv, head_dim=h)})
    work = Workload(batch=B, seq=seq, gen=1)
    f, g = flops(spec, work), flops(gqa, work)
    rows, plain = {r.component: r for r in f.breakdown}, {r.component: r for r in g.breakdown}
    pairs = sum(keys(i, w, s) for i in range(1, seq + 1))
    assert rows["attention/core_scores"].prefill == L * B * pairs * 2 * H * h
    assert rows["attention/core_values"].decode == L * B * keys(seq + 1, w, s) * 2 * H * h
    assert rows["attention/core_scores"].train == 3 * rows["attention/core_scores"].prefill
    for name in ("attention/q", "attention/k", "attention/v", "attention/o", "ffn/gate", "lm_head"):
        assert rows[name] == plain[name]
    dense = Workload(batch=B, seq=seq, gen=1, attention_core="dense")
    assert flops(spec, dense).prefill_flops == flops(gqa, dense).prefill_flops
    assert params(spec) == params(gqa)
    assert kv_cache(spec, work).total_bytes == kv_cache(gqa, work).total_bytes == L * B * seq * 2 * H_kv * h * 2


def test_a_preset_with_strided_attention_costs_as_its_gqa_but_for_the_pairs():
    spec, gqa, seq = llama(), llama("gqa"), 4096
    assert params(spec).total == params(gqa).total == 6_738_415_616
    work = Workload(batch=4, seq=seq)
    assert kv_cache(spec, work).total_bytes == kv_cache(gqa, work).total_bytes
    for w in (work, Workload(batch=4, seq=seq, train=True),
              Workload(batch=4, seq=seq, weights_dtype="int4", kv_dtype="fp8")):
        assert memory(spec, w).total_bytes == memory(gqa, w).total_bytes
    f, g = flops(spec, Workload(batch=1, seq=seq)), flops(gqa, Workload(batch=1, seq=seq))
    pairs = sum(keys(i, 256, 128) for i in range(1, seq + 1))
    assert f.prefill_flops == g.prefill_flops - 2 * 32 * 2 * 4096 * (seq * (seq + 1) // 2 - pairs)
    assert f.positions == g.positions


# ---- the views ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("topic", list(TOPICS))
def test_explain_works_out_every_topic(topic):
    h100 = load_gpu("h100-sxm")
    gen = 256 if topic == "latency" else 1  # the command's default when none is given
    for w in (Workload(gen=gen), Workload(batch=3, seq=1000, gen=5, kv_dtype="int4"),
              Workload(seq=300, gen=gen, attention_core="dense", logits="all", train=topic != "latency")):
        r = explain(topic, llama(), w, h100)
        assert r.matches, [(t.component, t.value, t.check) for t in r.totals if not t.matches]
    r = explain(topic, tiny(), Workload(batch=2, seq=40, gen=gen), h100)
    assert r.matches
    if topic == "flops":
        assert {"W_s", "s_s"} <= set(r.legend)


def test_compare_takes_it_as_a_model_and_as_a_base():
    w = Workload(seq=8192, gen=256)
    r = compare_models([llama("gqa"), llama()], w, load_gpu("h100-sxm"))
    gqa, strided = r.rows
    assert strided.attention.startswith("Strided") and strided.kv_cache_bytes == gqa.kv_cache_bytes
    assert strided.ratios["prefill_flops"] < 1 and strided.total_params == gqa.total_params
    swapped, plain = compare_attention(llama(), ["gqa", "mla"], w), compare_attention(llama("gqa"), ["gqa", "mla"], w)
    same = ("kv_cache_bytes", "prefill_flops", "decode_flops", "decode_bytes", "memory_bytes", "total_params")
    assert [[getattr(x, k) for k in same] for x in swapped.rows] == [[getattr(x, k) for k in same] for x in plain.rows]


def test_latency_runs_and_is_cheaper_than_its_gqa_at_a_long_prompt():
    h100, seq = load_gpu("h100-sxm"), 16384
    w = Workload(batch=1, seq=seq, gen=4)
    r, g = latency(llama(), h100, w), latency(llama("gqa"), h100, w)
    assert 0 < r.ttft_s < g.ttft_s and 0 < r.tpot_s <= g.tpot_s
    core = next(op for op in r.ops if op.phase == "prefill" and op.op == "attention/core")
    pairs = llama().attention.pairs(seq, 0, None)
    assert core.flops == 32 * 2 * (2 * 4096) * pairs


def test_sweep_runs_with_the_estimators():
    spec, h100 = llama(), load_gpu("h100-sxm")
    r = sweep([spec], h100, [1, 2], [64, 1000, 5000])
    for row in r.rows:
        w = Workload(batch=row.batch, seq=row.seq, gen=1)
        assert row.kv_bytes == kv_cache(spec, w).total_bytes
        assert row.prefill_flops == flops(spec, w).prefill_flops
        assert row.decode_flops == flops(spec, w).decode_flops
        assert row.memory_bytes == memory(spec, w).total_bytes
        lat = latency(spec, h100, w)
        assert row.tpot_s == pytest.approx(lat.tpot_s, rel=1e-12)
        assert row.ttft_s == pytest.approx(lat.ttft_s, rel=1e-12)


class StridedWithScratch(Strided):
    """Strided with a prefill scratch buffer that grows with the prompt (one byte per 8 tokens per token, say),
    written as an author might: prefill_activation_bytes redefined, activation_key not. The sweep, which
    computes the layer peak once per activation_key, must not reuse one length's peak for another."""

    kind: Literal["strided-scratch"] = "strided-scratch"

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        return super().prefill_activation_bytes(d_model, seq, window, act, rope, qk_norm) + 100_000 + seq // 8


def test_a_variant_whose_activations_grow_with_the_prompt_is_swept_exactly():
    data = llama().model_dump()
    data["attention"]["kind"] = "strided-scratch"
    spec = spec_from_data(data, "test")
    r = sweep([spec], None, [1, 2], [64, 1000, 1001, 5000])
    for row in r.rows:
        assert row.activation_bytes == memory(spec, Workload(batch=row.batch, seq=row.seq)).activation_bytes
