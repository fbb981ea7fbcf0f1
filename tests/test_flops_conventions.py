"""FLOPs conventions of the literature: causal-half against Megatron-LM's num_floating_point_operations (on the
arguments of its own unit test) and FlashAttention's benchmark formula; the window and chunk analogues against
the area under the key count, integrated piecewise."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction as F

import pytest

from llmcalc.costs.flops import flops
from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Workload

# NVIDIA/Megatron-LM tests/unit_tests/test_training.py, create_test_flops_args(): GQA 4 heads over 2 groups,
# kv_channels 4, hidden 16, 3 layers, ffn 32 (no SwiGLU), padded vocab 64.
MEGATRON_ARGS = dict(heads=4, groups=2, kv_channels=4, hidden=16, layers=3, ffn=32, vocab=64)


def megatron_test_spec() -> ModelSpec:
    a = MEGATRON_ARGS
    return ModelSpec.model_validate(dict(
        name="megatron-flops-test", source="Megatron-LM tests/unit_tests/test_training.py", vocab_size=a["vocab"],
        d_model=a["hidden"], n_layers=a["layers"], max_seq_len=64, tie_embeddings=False, lm_head_bias=False,
        norm=dict(kind="layernorm", bias=True, per_layer=2, final=True, qk_norm="none"), positions=dict(kind="none"),
        attention=dict(kind="gqa", heads=a["heads"], kv_heads=a["groups"], head_dim=a["kv_channels"],
                       qkv_bias=False, o_bias=False, sinks=False),
        ffn=dict(kind="dense", d_ff=a["ffn"], activation="gelu", bias=False), sliding_window=None,
        layer_pattern=["full"], mtp_modules=0))


def megatron_expected(lengths: list[int]) -> F:
    """Megatron-LM's expected_transformer_flops for a dense GQA model: Σs × the per-token GEMMs (3 · 2 · …) +
    Σs² × the core term 3 · 2 · (H·kv_channels / 2) · 2 — the causal mask halving S²."""
    a = MEGATRON_ARGS
    q = a["kv_channels"] * a["heads"]
    kv = a["kv_channels"] * a["groups"]
    attn = 3 * 2 * (a["hidden"] * (q + kv + kv) + q * a["hidden"])
    core = 3 * 2 * F(q, 2) * 2
    per_token = 3 * 2 * a["hidden"] * a["ffn"] * 2 * a["layers"] + attn * a["layers"] \
        + 3 * 2 * a["hidden"] * a["vocab"]
    return sum(lengths) * per_token + sum(s * s for s in lengths) * core * a["layers"]


@pytest.mark.parametrize("lengths", [[8, 8], [4, 12]])  # the test's dense_gqa even and packed lengths
def test_megatron_num_floating_point_operations(lengths):
    """Packed sequences attend within themselves only: the step is the sum over the lengths."""
    spec = megatron_test_spec()
    ours = sum(flops(spec, Workload(batch=1, seq=s, attention_core="causal-half")).train_flops for s in lengths)
    assert ours == megatron_expected(lengths)
    causal = sum(flops(spec, Workload(batch=1, seq=s)).train_flops for s in lengths)
    per_pair = 4 * MEGATRON_ARGS["heads"] * MEGATRON_ARGS["kv_channels"]
    assert causal - ours == 3 * MEGATRON_ARGS["layers"] * sum(lengths) * per_pair // 2  # ½ pair per query


def flash_benchmark_fwd(batch: int, seqlen: int, headdim: int, nheads: int, causal: bool) -> int:
    """flash-attn benchmarks/benchmark_flash_attention.py flops(): 4·b·s²·h·d, // 2 when causal."""
    return 4 * batch * seqlen**2 * nheads * headdim // (2 if causal else 1)


@pytest.mark.parametrize("name,seq", [("llama2-7b", 4096), ("llama3-8b", 2048), ("gpt2", 1023)])
def test_flash_attention_benchmark_forward(name, seq):
    spec, b = load_preset(name), 2
    a = spec.attention
    for conv, causal in (("causal-half", True), ("dense", False)):
        r = flops(spec, Workload(batch=b, seq=seq, attention_core=conv))
        core = sum(x.prefill for x in r.breakdown if "/core_" in x.component)
        assert core == spec.n_layers * flash_benchmark_fwd(b, seq, a.head_dim, a.heads, causal)


def area(c: int, n: int, w: int | None) -> F:
    """∫_c^{c+n} min(x, W) dx, integrated piecewise (the key count's area over the new queries)."""
    hi = c + n
    if w is None or hi <= w:
        return F(hi * hi - c * c, 2)
    if c >= w:
        return F(n * w)
    return F(w * w - c * c, 2) + (hi - w) * w


@pytest.mark.parametrize("c,n,w", [(0, 4096, None), (0, 4097, 1000), (0, 999, 1000), (0, 1000, 1000),
                                   (300, 1, None), (5000, 1, 4096), (4095, 1, 4096), (100, 700, 512),
                                   (3000, 2000, 4096)])
def test_half_pairs_are_the_area_under_the_mask(c, n, w):
    a = load_preset("mistral-7b").attention
    assert F(a.half_counts(n, c, w)["pairs"], 2) == area(c, n, w)


def test_sliding_window_prefill_and_decode():
    """Mistral-7B's original 4096 window: prefill S·W − W²/2 pairs per layer, decode S + ½ under the window,
    W past it (every key of the band a whole pair)."""
    spec = load_preset("mistral-7b")
    spec = spec.model_copy(update={"sliding_window": 4096, "layer_pattern": ["sliding"]})
    a, S, W = spec.attention, 8192, 4096
    per_pair = 4 * a.heads * a.head_dim
    r = flops(spec, Workload(seq=S, attention_core="causal-half"))
    core = sum(x.prefill for x in r.breakdown if "/core_" in x.component)
    assert core == spec.n_layers * (S * W - W * W // 2) * per_pair
    for context, keys in ((100, F(201, 2)), (S, W)):
        r = flops(spec, Workload(seq=context, attention_core="causal-half"))
        core = sum(x.decode for x in r.breakdown if "/core_" in x.component)
        assert core == spec.n_layers * keys * per_pair


@pytest.mark.parametrize("name", ["llama2-7b", "mistral-7b", "gemma2-9b", "deepseek-v3", "deepseek-v3.2-exp",
                                  "longformer-decoder-example", "linformer-decoder-example",
                                  "reformer-decoder-example"])
def test_explain_writes_causal_half(name):
    """explain's formulas, evaluated, give flops' causal-half totals (odd and even S, past the windows)."""
    from llmcalc.views.explain import explain
    for seq in (4097, 100):
        r = explain("flops", load_preset(name), Workload(batch=3, seq=seq, attention_core="causal-half"), None)
        assert all(t.matches for t in r.totals), [(t.component, t.value, t.check) for t in r.totals]


# ---- hardware FLOPs: the attention kernel's backward and the recomputed ops ----------------------------------

def core(report, field: str) -> int:
    return sum(getattr(x, field) for x in report.breakdown if "/core_" in x.component)


@pytest.mark.parametrize("name,seq", [("llama2-7b", 4096), ("gpt2", 1023)])
def test_flash_attention_benchmark_backward(name, seq):
    """flash-attn's benchmark counts the backward as 2.5 × the forward (fwd_bwd 3.5 ×), causal or not."""
    spec, b = load_preset(name), 2
    a = spec.attention
    for conv, causal in (("causal-half", True), ("dense", False)):
        r = flops(spec, Workload(batch=b, seq=seq, attention_core=conv))
        assert 2 * core(r, "train_hardware") == 7 * spec.n_layers * flash_benchmark_fwd(b, seq, a.head_dim,
                                                                                        a.heads, causal)
        assert core(r, "train") == 3 * core(r, "prefill")  # model FLOPs: 3 × forward whatever the kernel


@pytest.mark.parametrize("name", ["llama3-8b", "deepseek-v2-lite"])
def test_flash_backward_is_flop_counter_sdpa_backward(name):
    """torch's FlopCounterMode counts a fused SDPA backward (flash or memory-efficient) by its formula: the scores
    recomputed, then dV, dP, dQ, dK; MLA's unequal q/k and v head widths included. It never halves: dense."""
    pytest.importorskip("torch")
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count
    spec, b, s = load_preset(name), 2, 1024
    a = spec.attention
    d_qk, d_v = (a.head_dim, a.head_dim) if not a.latent_cache else (a.qk_nope_head_dim + a.qk_rope_head_dim,
                                                                    a.v_head_dim)
    q, k, v, out = (b, a.heads, s, d_qk), (b, a.heads, s, d_qk), (b, a.heads, s, d_v), (b, a.heads, s, d_v)
    r = flops(spec, Workload(batch=b, seq=s, attention_core="dense"))
    assert core(r, "prefill") == spec.n_layers * sdpa_flop_count(q, k, v)
    assert core(r, "train_hardware") - core(r, "prefill") == spec.n_layers * sdpa_backward_flop_count(out, q, k, v)


def test_eager_backward_is_flop_counter_on_the_reference_model():
    """The reference decoder's training step under FlopCounterMode (SDPA's math backend: the backward's four
    bmm, no recompute) is the eager hardware figure with nothing recomputed."""
    pytest.importorskip("torch")
    from llmcalc.reference.measure import measure
    spec = load_preset("tiny-decoder-example")
    w = Workload(batch=2, seq=256, attention_core="dense", attention_kernel="eager")
    assert flops(spec, w).train_hardware_flops == measure(spec, 2, 256).train_flops


def test_recompute_policies_add_their_ops_forward():
    """selective = the core (Korthikanti et al. 2022), full = every layer op; a custom list redoes those ops."""
    spec = load_preset("llama3-8b")
    base = flops(spec, Workload(seq=2048, attention_kernel="eager"))
    fwd = {x.component: x.train // 3 for x in base.breakdown}
    by_op = {"attention": ["core_scores", "core_values"], "qkv": ["q", "k", "v"], "attention_out": ["o"],
             "ffn": ["gate", "up", "down"]}

    def extra(ops):
        return sum(fwd[("attention/" if n in ("q", "k", "v", "o", "core_scores", "core_values") else "ffn/") + n]
                   for op in ops for n in by_op[op])

    for kw, ops in ((dict(recompute="selective"), ["attention"]), (dict(recompute="full"), list(by_op)),
                    (dict(recompute_ops=("ffn", "attention_out")), ["ffn", "attention_out"])):
        r = flops(spec, Workload(seq=2048, attention_kernel="eager", **kw))
        assert r.train_flops == base.train_flops
        assert r.train_hardware_flops == base.train_flops + extra(ops)


def test_mtp_flops_count_the_module_and_its_head_and_train_three_passes():
    """`flops -p deepseek-v3 --mtp` was a ValueError splitting `mtp/lm_head`. With the MTP module the prefill
    grows by the module's forward (its layer, 2d→d projection and the shared head), and every MTP part trains in
    forward + backward: 3 × its forward, as the rest of the model."""
    spec = load_preset("deepseek-v3")
    on, off = (flops(spec, Workload(batch=1, seq=512, mtp=m, logits="all")) for m in (True, False))
    assert on.prefill_flops > off.prefill_flops
    assert on.train_flops - off.train_flops == 3 * (on.prefill_flops - off.prefill_flops)
    r = subprocess.run([sys.executable, "-m", "llmcalc", "flops", "-p", "deepseek-v3", "--mtp", "-f", "json"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr


def test_mtp_flops_are_the_serving_engines_mtp_step_plus_its_projection():
    """The MTP module counted by `flops --mtp` (its layer, 2d→d projection and the shared head) against the
    draft step a serving engine runs for it (llmcalc/costs/engine_step.py, mtp: the last layer of the step form,
    the embedding and the head, the projection left out): over a prefill of the same tokens on one GPU, the
    module's FLOPs less its projection equal the engine's draft step's. A second path to the same module; it
    fails if either side drops or doubles a part."""
    from llmcalc.costs.engine_step import EngineStep
    from llmcalc.inputs.gpus import load_gpu
    from llmcalc.model.time_model import ROOFLINE

    spec, batch, seq = load_preset("deepseek-v3"), 2, 300
    w = Workload(batch=batch, seq=seq, mtp=True, weights_dtype="fp8")
    rows = {r.component: r.prefill for r in flops(spec, w).breakdown if r.component.startswith("mtp/")}
    assert rows["mtp/projection"] == spec.mtp_modules * 2 * batch * seq * 2 * spec.d_model * spec.d_model
    draft = EngineStep(spec, load_gpu("h200"), w, ROOFLINE, mtp=True).costs([(seq, 0)] * batch, [])
    # the draft step projects the last position of each chunk (as a prefill with `logits` last)
    assert sum(rows.values()) - rows["mtp/projection"] == sum(c.flops for c in draft.values())
