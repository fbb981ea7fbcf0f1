"""The time model, sweep, serve and memory over hybrid layer patterns (each layer group with its own mixer).

Independent sources: transformers' Nemotron-H (Mamba-2, attention and MLP layers) built on the meta device
(parameters: the weight bytes a step reads) and run on CPU (its cache's bytes: how a decode step's traffic grows
with the context), and `llmcalc flops`, itself checked against FlopCounterMode on the same model
(tests/test_hybrid.py). The rest are identities the one cost form must keep: a pattern of attention layers alone
is the uniform model, the sweep's compiled form is latency at each point, the closed-form decode sum is the
step-by-step sum, and a recurrent layer's decode step costs the same at every context.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.form import value
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.step import step_costs, step_form
from llmcalc.costs.step_time import StepTime
from llmcalc.costs.memory import memory
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.views.sweep import Sweeper
from llmcalc.workload import Layout, Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from hf_flops import cache_tensors  # noqa: E402
from test_hybrid import NEMOTRON_H, hf_config  # noqa: E402
from test_sweep import assert_equal, points  # noqa: E402

H100 = load_gpu("h100-sxm")
PARTIAL = TimeModel(name="test", compute_efficiency=0.7, attention_efficiency=0.6, memory_efficiency=0.75,
                    matmul_pad_rows=48, overlap=0.4, kernel_s=3e-6, collective_s=1e-5, step_s=2e-4)
"""Every term a calibrated profile has (arbitrary figures)."""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("nemotron_h") / "config.json"
    path.write_text(json.dumps(NEMOTRON_H))
    return path


@pytest.fixture(scope="module")
def spec(config):
    return load_hf_config(config)


def jamba_like() -> ModelSpec:
    """Mixtral-8x7B's attention and MoE with Mamba-2 layers between: two Mamba-2, a sliding and a full attention
    layer per cycle (a Jamba-like pattern, with a window so that decode crosses a knee)."""
    data = load_preset("mixtral-8x7b").model_dump()
    data |= {"name": "jamba-like", "sliding_window": 4096,
             "mixers": {"mamba": {"kind": "mamba2", "heads": 128, "head_dim": 64, "state_size": 128, "groups": 8,
                                  "conv_kernel": 4, "chunk_size": 256}},
             "hybrid_pattern": [{"mixer": "mamba"}, {"mixer": "mamba"}, {"mixer": "sliding"}, {"mixer": "attention"}]}
    return ModelSpec.model_validate(data)


def attention_only(name: str) -> tuple[ModelSpec, ModelSpec]:
    """A preset and the same model written as a hybrid pattern of its own attention layers."""
    spec = load_preset(name)
    data = spec.model_dump()
    slots = [{"mixer": "sliding" if kind == "sliding" else "attention"} for kind in spec.layer_pattern]
    data |= {"hybrid_pattern": slots, "layer_pattern": ["full"]}
    return spec, ModelSpec.model_validate(data)


def assert_same(a, b, path: str = "") -> None:
    """Equal reports: every int and string exactly, every float to 1e-12 (the hybrid lists its layer groups in
    pattern order, gemma2's sliding one first, so its seconds add in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert math.isclose(a, b, rel_tol=1e-12), (path, a, b)
    else:
        assert a == b, (path, a, b)


# ---- the figures the roofline uses ----------------------------------------------------------------------------

@pytest.mark.parametrize("batch,seq", [(2, 19), (3, 40)])
def test_latency_flops_are_the_flops_report(spec, batch, seq):
    """A hybrid's prefill and decode FLOPs in the time model are `llmcalc flops`' (tests/test_hybrid.py checks
    those against FlopCounterMode on transformers' Nemotron-H)."""
    r = latency(spec, H100, Workload(batch=batch, seq=seq, gen=2))
    f = flops(spec, Workload(batch=batch, seq=seq, gen=1))
    phases = {p.phase: p for p in r.phases}
    assert phases["prefill"].flops == f.prefill_flops
    assert phases["decode first"].flops == f.decode_flops
    ops = {o.op for o in r.ops}
    assert {"mamba/proj", "mamba/core", "attention/proj", "attention/core", "ffn"} <= ops


def test_weight_bytes_a_step_reads_are_transformers_parameters(spec):
    """What a step reads whatever its tokens (the constant of its bytes) is every parameter but the token
    embedding, at 4 bytes in fp32: transformers' Nemotron-H on the meta device."""
    with torch.device("meta"):
        m = transformers.NemotronHForCausalLM(hf_config())
    held = sum(p.numel() for p in m.parameters()) - m.get_input_embeddings().weight.numel()
    w = Workload(weights_dtype="fp32", compute_dtype="fp32", kv_dtype="fp32")
    for prefill in (True, False):
        zero = {v: 0 for cost in step_form(spec, w, prefill).values() for c in cost if not isinstance(c, int)
                for v in c.variables}
        assert sum(value(c[1], zero) for c in step_form(spec, w, prefill).values()) == 4 * held


def test_decode_traffic_grows_as_transformers_cache(spec):
    """A decode step's bytes grow with the context by exactly what transformers' cache grows by (the attention
    layer's K and V); the Mamba-2 layers' states, read and written once per step, do not grow."""
    torch.manual_seed(0)
    m = transformers.NemotronHForCausalLM(hf_config()).eval()
    held = {}
    with torch.no_grad():
        for seq in (19, 40):
            cache = m(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
            held[seq] = sum(t.nbytes for t in cache_tensors(cache))
    w = Workload(batch=2, gen=2, kv_dtype="fp32")
    step = {seq: next(p for p in latency(spec, H100, w.model_copy(update={"seq": seq})).phases
                      if p.phase == "decode first") for seq in (19, 40)}
    assert step[40].bytes - step[19].bytes == held[40] - held[19]
    mamba = {seq: sum(o.bytes for o in latency(spec, H100, w.model_copy(update={"seq": seq})).ops
                      if o.phase == "decode first" and o.op.startswith("mamba/")) for seq in (19, 40)}
    assert mamba[19] == mamba[40]


def test_a_mamba_layers_decode_step_reads_and_writes_its_state(spec):
    """The Mamba-2 core's decode bytes are twice the states (read once, written once: what transformers' cache
    holds for those layers, tests/test_hybrid.py) and the scan's per-token inputs and outputs, a few widths."""
    w = Workload(batch=2, seq=19, gen=2, kv_dtype="fp32")
    core = sum(o.bytes for o in latency(spec, H100, w).ops if o.phase == "decode first" and o.op == "mamba/core")
    state = kv_cache(spec, w).state_bytes_per_sequence * 2  # checked against transformers in tests/test_hybrid.py
    io = core - 2 * state
    assert 0 < io < state  # the per-token inputs and outputs of the scan: a few widths per token


# ---- the one form: identities --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama2-7b", "gemma2-9b", "mixtral-8x7b"])
@pytest.mark.parametrize("tm", [ROOFLINE, PARTIAL], ids=["roofline", "partial"])
def test_a_pattern_of_attention_layers_is_the_uniform_model(name, tm):
    uniform, hybrid = attention_only(name)
    w = Workload(batch=3, seq=5000, gen=300, layout=Layout(tp=2))
    a, b = (latency(s, H100, w, tm).model_dump(exclude={"model"}) for s in (uniform, hybrid))
    assert_same(a, b)
    assert memory(uniform, w.model_copy(update={"layout": Layout()})).total_bytes == memory(
        hybrid, w.model_copy(update={"layout": Layout()})).total_bytes


def test_pure_mamba_decode_does_not_grow_with_context():
    spec = load_preset("mamba-codestral-7b")
    short, long = (latency(spec, H100, Workload(batch=4, seq=s, gen=100)) for s in (1000, 200_000))
    assert short.tpot_s == long.tpot_s == short.tpot_end_s
    assert short.decode_s == pytest.approx(99 * short.tpot_s, rel=1e-12)
    assert [p.bytes for p in short.phases[1:]] == [p.bytes for p in long.phases[1:]]


def test_hybrid_decode_grows_only_by_its_attention_layers():
    spec = jamba_like()
    short, long = (latency(spec, H100, Workload(batch=2, seq=s, gen=2, layout=Layout(tp=2))) for s in (1000, 9000))
    grow = {o.op: o for o in long.ops if o.phase == "decode first"}
    for o in short.ops:
        if o.phase == "decode first":
            assert (grow[o.op].bytes > o.bytes) == (o.op == "attention/core"), o.op


@pytest.mark.parametrize("tm", [ROOFLINE, PARTIAL], ids=["roofline", "partial"])
@pytest.mark.parametrize("seq,gen", [(100, 300), (4000, 300)])  # the second crosses the sliding window
def test_hybrid_decode_sum_equals_step_by_step(tm, seq, gen):
    spec = jamba_like()
    w = Workload(batch=2, seq=seq, gen=gen, layout=Layout(tp=2))
    r = latency(spec, H100, w, tm)
    st = StepTime(spec, H100, w, tm, prefill=False)
    brute = sum(sum(st.time(k, c) for k, c in step_costs(spec, w, 2, 1, ctx).items()) + tm.step_s
                for ctx in range(seq, seq + gen - 1))
    assert r.decode_s == pytest.approx(brute, rel=1e-9)


@pytest.mark.parametrize("tm", [ROOFLINE, PARTIAL], ids=["roofline", "partial"])
@pytest.mark.parametrize("tp,dp,ep", [(1, 1, 1), (2, 2, 4)])
def test_sweep_on_a_hybrid_is_latency_at_each_point(tm, tp, dp, ep):
    w = Workload(layout=Layout(tp=tp, dp=dp, ep=ep))
    assert_equal(Sweeper(jamba_like(), H100, w, tm), w, points(dp, n=6))


def test_sweep_on_nemotron_h_is_latency_at_each_point(spec):
    w = Workload()
    sweeper = Sweeper(spec, H100, w)
    assert_equal(sweeper, w, [(1, 1), (2, 19), (3, 40), (64, 256)])


# ---- serve, plan, fit ---------------------------------------------------------------------------------------

def test_serve_steps_of_a_hybrid_are_latency_steps():
    """A serving engine's decode step of one batch at one context is latency's decode step (same form)."""
    from llmcalc.costs.engine_step import EngineStep

    spec = jamba_like()
    w = Workload(batch=4, seq=6000, gen=2, layout=Layout(tp=2))
    engine = EngineStep(spec, H100, w, ROOFLINE)
    r = latency(spec, H100, w)
    assert math.isclose(engine.decode_time(4, 6000), r.tpot_s, rel_tol=1e-12)
    assert math.isclose(engine.time([(6000, 0)] * 4, []), r.ttft_s, rel_tol=1e-12)


# ---- memory -------------------------------------------------------------------------------------------------

def test_memory_of_a_hybrid_is_weights_cache_and_activations(spec):
    """Weights: transformers' parameters at 4 bytes; cache: what transformers' cache holds after the prefill."""
    with torch.device("meta"):
        n = sum(p.numel() for p in transformers.NemotronHForCausalLM(hf_config()).parameters())
    torch.manual_seed(0)
    with torch.no_grad():
        cache = transformers.NemotronHForCausalLM(hf_config()).eval()(
            torch.randint(0, 100, (2, 19)), use_cache=True).past_key_values
    m = memory(spec, Workload(batch=2, seq=19, weights_dtype="fp32", kv_dtype="fp32", act_dtype="fp32"))
    assert m.weights_bytes == 4 * n
    assert m.kv_cache_bytes == sum(t.nbytes for t in cache_tensors(cache))
    assert m.activation_bytes > 0 and m.total_bytes == m.weights_bytes + m.kv_cache_bytes + m.activation_bytes
    t = memory(spec, Workload(batch=2, seq=19, train=True))
    assert t.activation_bytes > 0 and t.weights_bytes == 2 * n


def test_training_memory_of_a_hybrid_sums_its_groups():
    """A pattern of attention layers alone is the uniform model in training too; a Mamba-2 layer keeps no
    per-head core (its scan's backward recomputes from the saved inputs)."""
    uniform, hybrid = attention_only("gemma2-9b")
    w = Workload(batch=8, seq=4096, train=True, layout=Layout(tp=2, pp=2, dp=2))
    assert_same(memory(uniform, w).model_dump(exclude={"model"}), memory(hybrid, w).model_dump(exclude={"model"}))
    j = jamba_like()
    flash, eager = (memory(j, Workload(batch=1, seq=4096, train=True, flash=f)).activation_bytes for f in (True, False))
    assert eager > flash  # only the attention layers' S×S scores add


# ---- the CLI ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["latency", "--gpu", "h100-sxm"], ["memory"], ["memory", "--train"],
                                     ["sweep", "--gpu", "h100-sxm", "--batch", "1,8", "--seq", "512,4096"],
                                     ["fit", "--gpu", "h100-sxm"], ["serve", "--gpu", "h100-sxm"],
                                     ["explain", "latency", "--gpu", "h100-sxm"]])
def test_cli_on_a_hybrid_exits_0(config, command):
    r = subprocess.run([sys.executable, "-m", "llmcalc", *command, "--hf-config", str(config)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr


def test_cli_compare_on_a_hybrid_spec_file_exits_0(spec, tmp_path):
    path = tmp_path / "nemotron_h.yaml"
    path.write_text(json.dumps(spec.model_dump(mode="json")))
    r = subprocess.run([sys.executable, "-m", "llmcalc", "compare", "gqa", "mamba2", "-c", str(path), "--gpu",
                        "h100-sxm"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "state bytes/seq" in r.stdout, r.stderr


def test_cli_nonsense_on_a_hybrid_exits_2(config, tmp_path):
    r = subprocess.run([sys.executable, "-m", "llmcalc", "latency", "--hf-config", str(config), "--gpu", "h100-sxm",
                        "--batch", "0"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    bad = load_preset("mixtral-8x7b").model_dump(mode="json") | {"hybrid_pattern": [{"mixer": "mamba"}]}
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(bad))
    r = subprocess.run([sys.executable, "-m", "llmcalc", "memory", "-c", str(path)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 2 and "mixers" in r.stderr and "Traceback" not in r.stderr


# ---- explain ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("topic,extra", [("params", {}), ("kv", {}), ("flops", {}), ("memory", {}),
                                         ("memory", {"train": True}), ("latency", {})])
def test_explain_works_out_every_layer_group_of_a_hybrid(spec, topic, extra):
    """Each mixer's rows over its own layers (Mamba-2's parts, state and scan terms beside the attention's), their
    sum equal to the plain command's figure (themselves checked against transformers: tests/test_hybrid.py)."""
    from llmcalc.views.explain import explain

    for model in (spec, jamba_like()):
        w = Workload(batch=2, seq=300, gen=4, **extra)
        r = explain(topic, model, w, load_gpu("h200"))
        assert r.matches, [(t.component, t.value, t.check) for t in r.totals]
        names = {s.component for s in r.steps}
        want = {"params": {"mamba/in_proj", "mamba/conv", "attention/q", "norms/layer"},
                "kv": {"kv/mamba", "kv/full"}, "flops": {"prefill/mamba/core_scores", "decode/mamba/core_state_update",
                                                         "prefill/attention/core_scores", "train/mamba/in_proj"},
                "memory": {"kv_cache/mamba", "kv_cache/full"} if not extra else {
                    f"activations/{m}+{'none' if model is spec else 'moe'}" for m in ("mamba", "attention")},
                "latency": {"prefill/mamba/core", "decode/mamba/proj", "decode/attention/core"}}[topic]
        assert want <= names, want - names


# ---- compare ------------------------------------------------------------------------------------------------

def test_compare_sets_kv_per_token_against_state_per_sequence(spec):
    """On the Nemotron-H base (its attention layer swapped, its Mamba-2 layers kept): the GQA row's bytes per token
    and per sequence are what transformers' cache holds (2·S·per token + 2·per sequence after a prefill), and a
    decode step grows per token of context by what that cache grows by; swapped for Mamba-2, nothing grows."""
    from llmcalc.views.compare import compare_attention

    torch.manual_seed(0)
    m = transformers.NemotronHForCausalLM(hf_config()).eval()
    held = {}
    with torch.no_grad():
        for seq in (19, 40):
            held[seq] = sum(t.nbytes for t in cache_tensors(m(torch.randint(0, 100, (2, seq)),
                                                                use_cache=True).past_key_values))
    w = Workload(batch=2, seq=19, kv_dtype="fp32")
    rows = {r.name: r for r in compare_attention(spec, ["gqa", "mamba2", "gdn"], w, gpu=H100).rows}
    gqa = rows["gqa"]
    assert 2 * 19 * gqa.kv_bytes_per_token + 2 * gqa.state_bytes_per_sequence == held[19]
    assert gqa.decode_bytes_per_context == (held[40] - held[19]) // 21
    assert gqa.decode_flops_per_context > 0
    for name in ("mamba2", "gdn"):
        r = rows[name]
        assert r.kv_bytes_per_token == r.kv_elements_per_token == 0
        assert r.decode_bytes_per_context == r.decode_flops_per_context == 0
        assert r.state_bytes_per_sequence > gqa.state_bytes_per_sequence
    long = compare_attention(spec, ["mamba2"], w.model_copy(update={"seq": 200}), gpu=H100).rows[1]
    assert (long.decode_bytes, long.decode_flops, long.tpot_s) == (rows["mamba2"].decode_bytes,
                                                                   rows["mamba2"].decode_flops, rows["mamba2"].tpot_s)


def test_compare_on_a_hybrid_base_swaps_its_attention_layers_only():
    from llmcalc.views.compare import compare_attention

    base = jamba_like()
    r = compare_attention(base, ["gqa", "swa", "mla", "mamba2", "longformer"], Workload(batch=2, seq=8192), gpu=None)
    rows = {x.name: x for x in r.rows}
    gqa = rows["gqa"]  # the base's own attention (8 kv heads): its figures are the plain commands'
    assert gqa.kv_cache_bytes == kv_cache(base, Workload(batch=2, seq=8192)).total_bytes
    assert gqa.prefill_flops == flops(base, Workload(batch=2, seq=8192, gen=1)).prefill_flops
    # the Mamba-2 layers' states are kept by every attention swap
    assert len({rows[v].state_bytes_per_sequence for v in ("mha", "gqa", "swa", "mla", "longformer")}) == 1
    assert rows["swa"].kv_cache_bytes < gqa.kv_cache_bytes
    assert any("hybrid base" in n for n in r.notes)


# ---- Gated DeltaNet: Qwen3-Next's hybrid ----------------------------------------------------------------------

def test_qwen3_next_time_memory_explain(tmp_path):
    """Qwen3-Next (3 DeltaNet : 1 gated attention, MoE FFNs): the time model's FLOPs are `llmcalc flops`' (checked
    against FlopCounterMode in tests/test_deltanet.py), its memory's cache is transformers' cache after a prefill,
    the DeltaNet layers' decode step costs the same at any context, and explain's totals match."""
    from test_deltanet import QWEN3_NEXT, hf_model

    from llmcalc.views.explain import explain

    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_NEXT))
    spec = load_hf_config(path)
    for seq in (19, 40):
        r = latency(spec, H100, Workload(batch=2, seq=seq, gen=2))
        f = flops(spec, Workload(batch=2, seq=seq, gen=1))
        assert (r.phases[0].flops, r.phases[1].flops) == (f.prefill_flops, f.decode_flops)
    steps = {seq: [(o.op, o.flops, o.bytes) for o in latency(spec, H100, Workload(batch=2, seq=seq, gen=2)).ops
                   if o.phase == "decode first" and o.op.startswith("linear/")] for seq in (19, 4000)}
    assert steps[19] == steps[4000] and steps[19]
    with torch.no_grad():
        cache = hf_model()(torch.randint(0, 100, (2, 19)), use_cache=True).past_key_values
    m = memory(spec, Workload(batch=2, seq=19, kv_dtype="fp32"))
    assert m.kv_cache_bytes == sum(t.nbytes for t in cache_tensors(cache))
    for topic in ("params", "kv", "flops", "memory", "latency"):
        assert explain(topic, spec, Workload(batch=2, seq=19, gen=3), H100).matches, topic
