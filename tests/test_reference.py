"""The reference PyTorch decoder (llmcalc/reference) against llmcalc's estimators, exactly.

Every preset is measured under FakeTensorMode at full width with its layers cut to the fewest that keep
every layer shape (MoE dense layers, one cycle of the sliding/full pattern): the formulas are sums
over layer groups, so this checks each group's terms, and keeps the file fast (the uncut presets take
~4 minutes on 2 cores; they match too). Tiny random-weight models of each family, and random small
specs, run for real on the CPU: exact estimates again, and cached steps (prefill, cached chunks, decode)
give the logits of one full forward, for both MLA decode paths and both MoE implementations.
"""

from __future__ import annotations

from collections import Counter
from functools import cache, partial
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.inputs.presets import load_preset, preset_names, spec_from_data
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")

from llmcalc.reference.measure import PARTS, measure, prefill_peak  # noqa: E402
from llmcalc.reference.model import Decoder, layer_shape  # noqa: E402

B, S = 2, 64
MLA_PRESETS = [n for n in preset_names() if load_preset(n).attention.kind == "mla"]
DECODERS = [n for n in preset_names() if load_preset(n).stack.kind == "decoder" and not load_preset(n).hybrid]
"""Uniform decoders (the hybrid presets' reference checks: tests/test_hybrid_reference.py)."""
"""The presets the reference decoder builds (the others: tests/test_encoders.py, tests/test_encoder_decoder.py)."""


def cut(spec):
    """`spec` with n_layers = MoE dense layers + one cycle of layer_pattern (at most n_layers)."""
    dense = getattr(spec.ffn, "dense_layers", 0)
    n = min(spec.n_layers, dense + len(spec.layer_pattern))
    return spec.model_copy(update={"n_layers": n})


def expected(spec, batch: int, seq: int, mla_decode: str = "absorbed") -> dict[str, int]:
    f = flops(spec, Workload(batch=batch, seq=seq, gen=1, attention_core="dense", logits="last", mla_decode=mla_decode))
    kv = kv_cache(spec, Workload(batch=batch, seq=seq, kv_dtype="bf16"))
    return dict(params_total=params(spec).language, prefill_flops=f.prefill_flops, decode_flops=f.decode_flops,
                train_flops=f.train_flops, kv_bytes=kv.total_bytes)


def assert_matches(m, spec, batch: int, seq: int, mla_decode: str = "absorbed", train: bool = True) -> None:
    want = expected(spec, batch, seq, mla_decode)
    if not train:
        want.pop("train_flops")
    got = {k: getattr(m, k) for k in want}
    assert got == want, {k: (got[k], want[k], got[k] - want[k]) for k in want if got[k] != want[k]}


@cache
def measured(name: str):
    return measure(cut(load_preset(name)), B, S, "fake")


@pytest.mark.parametrize("name", DECODERS)
def test_preset_matches_estimators(name):
    spec = cut(load_preset(name))
    groups = {(g.window, g.ffn) for g in load_preset(name).layer_groups()}
    assert {(g.window, g.ffn) for g in spec.layer_groups()} == groups  # the cut keeps every layer shape
    assert_matches(measured(name), spec, B, S)


@pytest.mark.parametrize("name", MLA_PRESETS)
def test_mla_decompressed_decode(name):
    spec = cut(load_preset(name))
    assert_matches(measure(spec, B, S, "fake", mla_decode="decompress", train=False), spec, B, S, "decompress",
                   train=False)


@pytest.mark.parametrize("name", ["gpt2", "mistral-7b"])
def test_full_size_preset(name):
    spec = load_preset(name)
    assert_matches(measure(spec, B, S, "fake", train=False), spec, B, S, train=False)


@pytest.mark.parametrize("name", DECODERS)
def test_params_by_module_match_breakdown(name):
    spec = cut(load_preset(name))
    part = {"embedding": "embedding", "attention": "layers.attention", "ffn": "layers.ffn", "norms": "layers.norms",
            "lm_head": "lm_head"}
    want = dict.fromkeys(PARTS, 0)
    for row in params(spec).breakdown:
        want["final_norm" if row.component == "norms/final" else part[row.component.split("/")[0]]] += row.params
    assert measured(name).params_by_module == want


def test_layer_shapes_follow_layer_groups():
    for name in DECODERS:
        spec = load_preset(name)
        shapes = Counter(layer_shape(spec, i) for i in range(spec.n_layers))
        assert shapes == Counter({(g.window, g.ffn): g.count for g in spec.layer_groups()})


@pytest.mark.parametrize("name", ["tiny-decoder-example", "mixtral-8x7b", "deepseek-v3"])
def test_peak_is_weights_cache_and_activations(name):
    """No gathered copy of expert weights (T·k·d·f) in the peak: the peak pass runs experts in place."""
    spec, m = cut(load_preset(name)), measured(name)
    floor = 2 * params(spec).total + m.kv_bytes
    assert floor < m.peak_bytes < 1.05 * floor


AT_SCALE = {"llama3-8b": (16, 8192), "mixtral-8x7b": (8, 8192), "deepseek-v3": (4, 4096), "gemma2-9b": (2, 16384),
            "gpt-oss-20b": (4, 8192), "falcon-7b": (16, 2047), "olmo2-7b": (8, 4096), "qwen3-8b": (8, 4096),
            "phi3-mini": (4, 4096), "qwen1.5-moe-a2.7b": (8, 8192), "deepseek-v3.2-exp": (2, 4096),
            "longformer-decoder-example": (4, 4000), "reformer-decoder-example": (4, 4096), "gpt2": (32, 1023)}
"""Every attention, FFN and norm family at a batch × context where activations outweigh the cut weights."""


@pytest.mark.parametrize("name", AT_SCALE)
def test_activation_peak_at_scale(name):
    """The prefill's activation peak on the reference's serving kernels (flash attention, grouped GEMM experts)
    is llmcalc memory's activations: within 1%, the reference's bounded block scratch and its routing
    bookkeeping (docs/formulas.md#inference-peak) being all that differs."""
    spec, (batch, seq) = cut(load_preset(name)), AT_SCALE[name]
    with torch._subclasses.fake_tensor.FakeTensorMode():
        _, _, peak = prefill_peak(spec, batch, seq)
    m = memory(spec, Workload(batch=batch, seq=seq))
    measured = peak - m.weights_bytes - m.kv_cache_bytes
    assert abs(measured - m.activation_bytes) <= 0.01 * measured, (measured, m.activation_bytes)


# Tiny families, run for real ------------------------------------------------------------------------

BASE = dict(name="tiny", vocab_size=97, d_model=32, n_layers=3, max_seq_len=64, tie_embeddings=False,
            norm=dict(kind="rmsnorm"), positions=dict(kind="rope"),
            attention=dict(kind="gqa", heads=4, kv_heads=2, head_dim=8), ffn=dict(kind="gated", d_ff=48))
MOE = dict(kind="moe", experts=6, top_k=2, d_ff=16)
MLA = dict(kind="mla", heads=4, q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4,
           v_head_dim=6)
WINDOW = 5
TINY = {
    "llama": {},
    "mistral-sliding": dict(sliding_window=WINDOW, layer_pattern=["sliding"]),
    "mixtral-moe": dict(ffn=MOE),
    "deepseek-mla-moe": dict(attention=MLA, ffn=MOE | dict(shared_experts=1, shared_d_ff=24, dense_layers=1,
                                                           dense_d_ff=40)),
    "gpt2-learned-layernorm-tied": dict(
        positions=dict(kind="learned"), tie_embeddings=True, norm=dict(kind="layernorm", bias=True),
        attention=BASE["attention"] | dict(kv_heads=4, qkv_bias=True, o_bias=True),
        ffn=dict(kind="dense", d_ff=48, activation="gelu_tanh", bias=True)),
    # the rest of what a spec can express
    "gpt-oss-sinks-sliding-biases": dict(
        sliding_window=WINDOW, layer_pattern=["sliding", "full"], lm_head_bias=True,
        attention=BASE["attention"] | dict(qkv_bias=True, o_bias=True, sinks=True),
        ffn=MOE | dict(activation="swiglu_oai", expert_bias=True, router_bias=True)),
    "gemma-sandwich-qknorm-sinusoidal-tied-bias": dict(
        norm=dict(kind="rmsnorm", per_layer=4, qk_norm="head"), positions=dict(kind="sinusoidal"),
        tie_embeddings=True, lm_head_bias=True, sliding_window=WINDOW, layer_pattern=["sliding", "sliding", "full"],
        ffn=dict(kind="gated", d_ff=48, activation="gelu_tanh")),
    "falcon-parallel-alibi-mqa-qwenmoe": dict(
        norm=dict(kind="layernorm", per_layer=1, qk_norm="full"), positions=dict(kind="alibi"),
        attention=BASE["attention"] | dict(heads=6, kv_heads=1),
        ffn=MOE | dict(gated=False, activation="gelu", shared_experts=2, shared_d_ff=8, shared_gate=True)),
    "mla-sliding-nolora-nonorm": dict(
        attention=MLA | dict(q_lora_rank=None, bias=True, qk_rope_head_dim=3), sliding_window=WINDOW,
        layer_pattern=["full", "sliding"], norm=dict(kind="rmsnorm", per_layer=0, final=False)),
    "mla-alibi-qknorm-full": dict(attention=MLA, positions=dict(kind="alibi"),
                                  norm=dict(kind="rmsnorm", qk_norm="full")),
    # Mamba-2: no FFN, no positions, chunks of 5 (the last padded), biases on
    "mamba2-chunked-no-ffn": dict(
        attention=dict(kind="mamba2", heads=4, head_dim=8, state_size=4, groups=2, conv_kernel=4, chunk_size=5,
                       bias=True), ffn=dict(kind="none"), norm=dict(kind="rmsnorm", per_layer=1),
        positions=dict(kind="none")),
}
SEQ = 12  # > WINDOW, so sliding caches shift


def tiny(name: str):
    return spec_from_data(BASE | TINY[name], name)


def decodes(spec) -> list[str]:
    if spec.attention.kind != "mla":
        return ["absorbed"]
    return ["decompress"] if spec.norm.qk_norm != "none" else ["absorbed", "decompress"]


CASES = [(n, d) for n in TINY for d in decodes(tiny(n))]


@pytest.mark.parametrize(("name", "mla_decode"), CASES)
def test_tiny_matches_estimators(name, mla_decode):
    spec = tiny(name)
    assert_matches(measure(spec, B, SEQ, "cpu", mla_decode), spec, B, SEQ, mla_decode)


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("chunks", [(SEQ, 1), (4, 3, SEQ - 7, 1, 1), (2,) + (1,) * (3 * WINDOW)],
                         ids=["prefill+decode", "chunked", "decode steps"])
def test_cached_steps_equal_one_full_forward(name, chunks):
    assert assert_cache_consistent(tiny(name), chunks).std() > 0.1  # logits with signal: a wrong key would show


def assert_cache_consistent(spec, chunks, mla_decodes: list[str] | None = None):
    """Logits of cached steps (prefill, cached chunks, decode steps) equal those of one forward over all
    tokens, for each MLA decode path (default: those `spec` supports) and MoE implementation; returns
    the full forward's logits."""
    torch.manual_seed(0)
    model = Decoder(spec)
    model.reset_parameters(std=0.2)
    tokens = torch.randint(0, spec.vocab_size, (B, sum(chunks)))
    with torch.no_grad():
        full = model(tokens, logits="all")
        for mla_decode, kernels in product(mla_decodes or decodes(spec), ["counted", "serving"]):
            model.use_kernels(kernels)
            cache_, start, steps = model.new_cache(B, sum(chunks)), 0, []
            for t in chunks:
                steps.append(model(tokens[:, start:start + t], cache_, start, "all", mla_decode))
                start += t
            torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-4, atol=1e-5)
    return full


@pytest.mark.parametrize("name", ["deepseek-mla-moe", "gemma-sandwich-qknorm-sinusoidal-tied-bias",
                                  "falcon-parallel-alibi-mqa-qwenmoe"])
def test_fake_run_equals_cpu_run(name):
    """Every measurement, peak memory included, is the same on fake and on real tensors."""
    spec = tiny(name)
    assert measure(spec, B, SEQ, "fake") == measure(spec, B, SEQ, "cpu")


def test_absorbed_mla_refuses_qk_norm():
    model = Decoder(tiny("mla-alibi-qknorm-full"))
    tokens = torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="decompress"):
        model(tokens[:, 1:], model.new_cache(1, 2), 1, mla_decode="absorbed")


def test_cache_too_small_is_refused():
    model = Decoder(tiny("llama"))
    with pytest.raises(ValueError, match="do not fit"):
        model(torch.zeros(1, 4, dtype=torch.long), model.new_cache(1, 3))


@st.composite
def random_spec(draw):
    """Any small spec: every attention, position, norm and FFN option, sliding patterns, odd sizes."""
    i, b = partial(st.integers, 1), st.booleans()
    heads_kv = draw(i(3))
    heads = heads_kv * draw(i(3))
    attention = draw(st.sampled_from([
        dict(kind="gqa", heads=heads, kv_heads=heads_kv, head_dim=draw(i(6)), qkv_bias=draw(b), o_bias=draw(b),
             sinks=draw(b)),
        dict(kind="mla", heads=heads, q_lora_rank=draw(st.none() | i(6)), kv_lora_rank=draw(i(6)),
             qk_nope_head_dim=draw(i(5)), qk_rope_head_dim=draw(i(4)), v_head_dim=draw(i(5)), bias=draw(b)),
    ]))
    kind = draw(st.sampled_from(["rmsnorm", "layernorm"]))
    norm = dict(kind=kind, bias=kind == "layernorm" and draw(b), per_layer=draw(st.integers(0, 4)), final=draw(b),
                qk_norm=draw(st.sampled_from(["none", "head", "full"])))
    n_layers = draw(i(4))
    act = st.sampled_from(["gelu", "gelu_tanh", "relu", "silu", "quick_gelu", "swiglu_oai"])
    experts, shared = draw(i(5)), draw(st.integers(0, 2))
    dense_layers = draw(st.integers(0, n_layers))
    ffn = draw(st.sampled_from([
        dict(kind="dense", d_ff=draw(i(12)), activation=draw(act), bias=draw(b)),
        dict(kind="gated", d_ff=draw(i(12)), activation=draw(act), bias=draw(b)),
        dict(kind="moe", experts=experts, top_k=draw(i(experts)), d_ff=draw(i(8)), gated=draw(b), activation=draw(act),
             expert_bias=draw(b), router_bias=draw(b), shared_experts=shared, shared_d_ff=shared and draw(i(8)),
             shared_gate=shared > 0 and draw(b), dense_layers=dense_layers, dense_d_ff=dense_layers and draw(i(8))),
    ]))
    pattern = draw(st.lists(st.sampled_from(["full", "sliding"]), min_size=1, max_size=n_layers))
    sliding = "sliding" in pattern
    return spec_from_data(dict(
        name="random", vocab_size=draw(st.integers(2, 40)), d_model=draw(i(16)), n_layers=n_layers, max_seq_len=32,
        tie_embeddings=draw(b), lm_head_bias=draw(b), norm=norm, attention=attention, ffn=ffn,
        positions=dict(kind=draw(st.sampled_from(["rope", "none", "learned", "sinusoidal", "alibi"]))),
        sliding_window=draw(i(6)) if sliding else None, layer_pattern=pattern), "random")


@settings(max_examples=40, deadline=None, derandomize=True)
@given(spec=random_spec(), seq=st.integers(1, 9), chunk=st.integers(1, 4))
def test_random_specs(spec, seq, chunk):
    """Exact estimates and cached steps equal to one full forward."""
    for mla_decode in decodes(spec):
        assert_matches(measure(spec, B, seq, "cpu", mla_decode), spec, B, seq, mla_decode)
    assert_cache_consistent(spec, (seq, chunk, 1))
