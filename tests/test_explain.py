"""`llmcalc explain`: each step's arithmetic evaluates to its value, and the steps and totals equal
what the plain commands print for the same model and workload."""

from __future__ import annotations

import ast
import csv
import io
import re
import subprocess
import sys
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.views.explain import explain
from llmcalc.workload import Layout, Workload

PRESETS = ["llama2-7b", "mixtral-8x7b", "deepseek-v2-lite", "gemma2-9b", "gpt2", "falcon-7b", "qwen3-30b-a3b",
           "gpt-oss-20b", "olmo2-7b", "qwen1.5-moe-a2.7b", "gemma3-1b"]
H200 = load_gpu("h200")


def arith(text: str) -> int | float:
    """Evaluate the substituted text: numbers, · × + − / // ( ) and min/max only."""
    tree = ast.parse(text.replace("·", "*").replace("×", "*").replace("−", "-"), mode="eval")
    allowed = (ast.Expression, ast.BinOp, ast.Constant, ast.Call, ast.Name, ast.Load,
               ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)
    for node in ast.walk(tree):
        assert isinstance(node, allowed), ast.dump(node)
        assert not isinstance(node, ast.Name) or node.id in ("min", "max"), node.id
        assert not isinstance(node, ast.Constant) or type(node.value) in (int, float)
    return eval(compile(tree, "<arith>", "eval"), {"__builtins__": {}}, {"min": min, "max": max})


def by_prefix(steps, depth: int = 1) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for s in steps:
        out["/".join(s.component.split("/")[:depth])] += s.value
    return dict(out)


def check_topics(spec: ModelSpec, kv: Workload, flops: Workload, train: Workload, latency: Workload) -> None:
    """`check` of every topic on one model: params; kv, flops, a training step's memory and latency (on an H200)
    at the workloads given; flops with dense attention and all logits; inference memory at 4 × 2,048."""
    check("params", spec, Workload())
    check("kv", spec, kv)
    check("flops", spec, flops)
    check("flops", spec, Workload(seq=300, attention_core="dense", logits="all"))
    check("memory", spec, Workload(batch=4, seq=2048))
    check("memory", spec, train)
    check("latency", spec, latency, H200)


def check(topic: str, spec: ModelSpec, w: Workload, gpu: GPU | None = None) -> None:
    """The explanation agrees with the estimators, row by row where they have rows."""
    r = explain(topic, spec, w, gpu)
    assert r.matches, [(t.component, t.value, t.check) for t in r.totals]
    for s in [*r.steps, *r.totals]:
        if isinstance(s.value, int):
            assert arith(s.substituted) == s.value, (s.component, s.substituted)
    got = {s.component: s.value for s in r.steps}
    if topic == "params":
        p = params(spec)
        assert got == {x.component: x.params for x in p.breakdown}
        assert [t.value for t in r.totals] == [p.total] + ([p.active] if len(r.totals) > 1 else [])
    elif topic == "kv":
        assert r.total == kv_cache(spec, w).total_bytes
    elif topic == "flops":
        f = flops(spec, w)
        phases = ("prefill", "decode", "train")
        positions = {k: got.pop(k) for k in list(got) if k.startswith("positions/")}  # element-wise, apart
        assert got == {f"{p}/{x.component}": getattr(x, p) for x in f.breakdown for p in phases if getattr(x, p)}
        assert [t.value for t in r.totals][:3] == [f.prefill_flops, f.decode_flops, f.train_flops]
        assert positions == ({f"positions/{p}": getattr(f.positions, p) for p in ("prefill", "decode")}
                             if f.positions.kind != "none" else {})
    elif topic == "memory":
        m = memory(spec, w)
        assert by_prefix(r.steps) == {x.component: x.bytes for x in m.breakdown}
        assert r.total == m.total_bytes
    else:
        lat = latency(spec, gpu, w)
        want = (lat.ttft_s, lat.tpot_s, lat.total_s)
        assert [t.value for t in r.totals] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_topic_matches_the_plain_commands(preset):
    spec = load_preset(preset)
    check("params", spec, Workload())
    for w in (Workload(batch=64, seq=32768), Workload(batch=3, seq=100, kv_dtype="int4")):
        check("kv", spec, w)
    check("flops", spec, Workload(batch=2, seq=5000, gen=7))
    check("flops", spec, Workload(seq=300, attention_core="dense", logits="all", mla_decode="decompress"))
    check("memory", spec, Workload(batch=4, seq=2048))
    check("memory", spec, Workload(seq=1024, train=True, optimizer="adamw-8bit"))
    if spec.d_model % 128 == 0:
        check("memory", spec, Workload(weights_dtype="int4"))
    check("latency", spec, Workload(batch=4, seq=8192, gen=64), H200)


@pytest.mark.parametrize("preset", preset_names())
def test_every_preset_explains_each_topic_or_refuses_it_in_one_line(preset):
    """Each mixer a preset holds (attention beside a Mamba, cross-attention over image tokens, recurrent states)
    writes its own symbols and terms: every topic's totals are the plain commands' (`matches`), under causal
    and causal-half alike, a VLM's training memory and its latency with images with its tower, or the topic is
    refused in words."""
    spec = load_preset(preset)
    for topic, w, gpu in (("params", Workload(), None), ("kv", Workload(batch=3, seq=700), None),
                          ("flops", Workload(batch=2, seq=900, gen=3), None),
                          ("flops", Workload(seq=600, attention_core="causal-half"), None),
                          ("memory", Workload(batch=2, seq=1024), None),
                          ("memory", Workload(seq=1024, train=True), None),  # a VLM's tower trains too
                          ("latency", Workload(batch=2, seq=1024, gen=4), H200),
                          ("latency", Workload(batch=2, seq=1024, gen=4, images=1), H200)):  # a VLM's tower
        try:
            r = explain(topic, spec, w, gpu)
        except UserError as e:
            assert "\n" not in str(e), (topic, str(e))
            continue
        assert r.matches, (topic, [(t.component, t.value, t.check) for t in r.totals])


@pytest.mark.parametrize("preset", ["t5-small", "bart-large", "whisper-large-v3"])
def test_every_topic_of_an_encoder_decoder_matches_the_plain_commands(preset):
    """The encoder's terms, the cross-attention's and the decoder's: every total equals the plain command's (T5 and
    BART at a given encoder length and at the default one, the prompt's; Whisper's is fixed)."""
    spec = load_preset(preset)
    lengths = [None] if preset == "whisper-large-v3" else [None, 700]
    check("params", spec, Workload())
    for enc in lengths:
        for w in (Workload(batch=3, seq=100, encoder_seq=enc), Workload(batch=3, seq=100, encoder_seq=enc,
                                                                        kv_dtype="int4")):
            check("kv", spec, w)
        check("flops", spec, Workload(batch=2, seq=50, gen=7, encoder_seq=enc))
        check("flops", spec, Workload(seq=30, attention_core="dense", logits="all", encoder_seq=enc))
        check("memory", spec, Workload(batch=4, seq=256, encoder_seq=enc))
        check("latency", spec, Workload(batch=4, seq=64, gen=64, encoder_seq=enc), H200)
    r = explain("flops", spec, Workload(batch=2, seq=50))
    rows = {s.component: s.formula for s in r.steps}
    assert rows["prefill/encoder/attention/core_scores"] == "L_e · B · S_e · S_e · 2 · H · h"
    assert rows["decode/cross_attention/core_scores"] == "L · B · S_e · 2 · H · h"
    assert "decode/cross_attention/k" not in rows  # projected once, at the prefill
    assert ("prefill/encoder/conv1" in rows) == (preset == "whisper-large-v3")
    kv = {s.component: s.formula for s in explain("kv", spec, Workload(batch=2, seq=50)).steps}
    assert kv["kv/cross"] == "2 · L · H_kv · h · B · S_e · bytes"


def test_llama2_7b_kv_is_the_seed_arithmetic():
    r = explain("kv", load_preset("llama2-7b"), Workload(batch=64, seq=32768))
    (s,) = r.steps
    assert (s.component, s.formula) == ("kv/full", "2 · L · H_kv · h · B · S · bytes")
    assert s.substituted == "2 · 32 · 32 · 128 · 64 · 32768 · 2"
    assert s.value == r.total == r.check == 1_099_511_627_776  # 2 · 32 layers · 4096 · 64 · 32768 · 2 bytes
    assert explain("kv", load_preset("llama2-7b"), Workload(seq=4096)).total == 2_147_483_648


def test_deepseek_v2_kv_caches_the_576_element_latent():
    spec = load_preset("deepseek-v2")
    (s,) = explain("kv", spec, Workload(batch=1, seq=1000)).steps
    assert s.symbols["r_kv"] + s.symbols["d_r"] == 512 + 64 == 576
    assert s.value == 60 * 1000 * 576 * 2  # no ×2 for K and V: one latent per token per layer


def test_sliding_layers_keep_window_minus_one_tokens():
    r = explain("kv", load_preset("gemma2-9b"), Workload(seq=10_000))
    sliding = next(s for s in r.steps if s.component == "kv/sliding")
    assert "min(S, W − 1)" in sliding.formula and sliding.value == 21 * 2 * 8 * 256 * 4095 * 2


def test_latency_splits_an_op_whose_layer_types_are_bound_differently():
    # gpt-oss: the 128-token sliding layers' attention core is memory-bound, the full layers' compute-bound
    r = explain("latency", load_preset("gpt-oss-20b"), Workload(gen=256), H200)
    core = next(s for s in r.steps if s.component == "prefill/attention/core")
    assert {"F_1", "M_1", "F_2", "M_2"} <= set(core.symbols) and r.matches


def test_latency_with_tensor_parallel_shows_the_all_reduce():
    r = explain("latency", load_preset("llama2-7b"), Workload(gen=256, layout=Layout(tp=2)), H200)
    assert any(s.component == "decode/comm/tp_all_reduce" for s in r.steps) and r.matches


mla = st.builds(dict, kind=st.just("mla"), q_lora_rank=st.none() | st.integers(1, 16), kv_lora_rank=st.integers(1, 16),
                qk_nope_head_dim=st.integers(1, 8), qk_rope_head_dim=st.integers(1, 8), v_head_dim=st.integers(1, 8),
                bias=st.booleans())


@st.composite
def specs(draw) -> ModelSpec:
    kv = draw(st.integers(1, 4))
    heads, layers = kv * draw(st.integers(1, 3)), draw(st.integers(1, 6))
    attention = draw(mla | st.builds(dict, kind=st.just("gqa"), kv_heads=st.just(kv), head_dim=st.integers(1, 16),
                                     qkv_bias=st.booleans(), o_bias=st.booleans(), sinks=st.booleans()))
    kind = draw(st.sampled_from(["dense", "gated", "moe"]))
    ffn = {"kind": kind, "d_ff": draw(st.integers(1, 64))}
    if kind == "moe":
        experts, shared, dense = draw(st.integers(1, 8)), draw(st.integers(0, 2)), draw(st.integers(0, layers))
        ffn |= dict(experts=experts, top_k=draw(st.integers(1, experts)), gated=draw(st.booleans()),
                    expert_bias=draw(st.booleans()), router_bias=draw(st.booleans()), shared_experts=shared,
                    shared_d_ff=shared and draw(st.integers(1, 32)), shared_gate=bool(shared) and draw(st.booleans()),
                    dense_layers=dense, dense_d_ff=dense and draw(st.integers(1, 32)))
    else:
        ffn["bias"] = draw(st.booleans())
    pattern = draw(st.lists(st.sampled_from(["full", "sliding"]), min_size=1, max_size=layers))
    norm = draw(st.sampled_from(["rmsnorm", "layernorm"]))
    return ModelSpec.model_validate(dict(
        name="random", vocab_size=draw(st.integers(1, 500)), d_model=heads * draw(st.integers(1, 16)),
        n_layers=layers, max_seq_len=draw(st.integers(1, 4096)), tie_embeddings=draw(st.booleans()),
        lm_head_bias=draw(st.booleans()), positions={"kind": draw(st.sampled_from(["rope", "learned"]))},
        norm=dict(kind=norm, bias=norm == "layernorm" and draw(st.booleans()), per_layer=draw(st.integers(0, 4)),
                  final=draw(st.booleans()), qk_norm=draw(st.sampled_from(["none", "head", "full"]))),
        attention=attention | {"heads": heads}, ffn=ffn, layer_pattern=pattern,
        sliding_window=draw(st.integers(1, 300)) if "sliding" in pattern else None))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), st.integers(1, 5), st.integers(1, 700), st.sampled_from(["bf16", "fp32", "int4"]),
       st.sampled_from(["causal", "dense"]), st.sampled_from(["absorbed", "decompress"]), st.booleans())
def test_random_specs_match_every_estimator(spec, batch, seq, dtype, attention, mla_decode, train):
    w = Workload(batch=batch, seq=seq, gen=3, kv_dtype=dtype, attention_core=attention,
                 logits="all" if train else "last", mla_decode=mla_decode, train=train)
    for topic in ("params", "kv", "flops", "memory"):
        check(topic, spec, w, H200)
    check("latency", spec, w.model_copy(update={"train": False}), H200)  # latency times inference


@pytest.mark.parametrize(("args", "field"), [
    (["kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768"], "total_bytes"),
    (["params", "--preset", "mixtral-8x7b"], "total"),
    (["flops", "--preset", "deepseek-v2-lite", "--mla-decode", "decompress", "--logits", "all"], "prefill_flops"),
    (["memory", "--preset", "gemma2-9b", "--train", "--seq", "2048"], "total_bytes"),
    (["latency", "--preset", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gen", "32"], "total_s"),
])
def test_cli_explain_total_is_the_plain_commands(cli_json, args, field):
    explained = cli_json("explain", *args)
    assert explained["matches"] is True
    want = cli_json(*args)[field]
    assert explained["total"] == pytest.approx(want, rel=1e-9) and type(explained["total"]) is type(want)


def test_cli_table_csv_and_errors(cli):
    r = cli("explain", "kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768")
    assert r.returncode == 0, r.stderr
    for text in ("kv/full: 2 · L · H_kv · h · B · S · bytes", "= 2 · 32 · 32 · 128 · 64 · 32768 · 2",
                 "1,099,511,627,776 bytes", "matches `llmcalc kv`: yes"):
        assert text in r.stdout
    r = cli("explain", "flops", "--preset", "gpt2", "--format", "csv")
    *rows, summary = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {x["row"] for x in rows} == {"item"} and summary["row"] == "summary" and summary["matches"] == "True"
    assert rows[0]["component"] == "prefill/attention/q" and rows[0]["symbols.L"] == "12"
    assert all(arith(x["substituted"]) == int(x["value"]) for x in rows)
    r = cli("explain", "latency", "--preset", "gpt2")
    assert r.returncode == 2 and "--gpu" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_explain_imports_no_ui_or_torch():
    code = "import sys, llmcalc.views.explain; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    assert not loaded & {"rich", "typer", "torch"}


def test_options_a_topic_does_not_work_out_are_refused_not_dropped():
    """`explain memory --train --tp 2 --dp 2` worked out one GPU holding the whole model (169 GB) and said it
    matched, where `memory` with the same options gives each GPU's share (76.6 GB); `explain kv --tp 2`,
    `explain latency --train` and an optimizer beside no training step were dropped unread. Each is refused,
    naming the option."""
    spec = load_preset("llama3-8b")
    for topic, w, gpu, says in (
            ("memory", Workload(batch=2, train=True, layout=Layout(tp=2, dp=2)), None, "`tp`: explain memory works "
             "out the whole model on one GPU"),
            ("kv", Workload(layout=Layout(pp=2)), None, "`pp`: explain kv"),
            ("latency", Workload(train=True), H200, "`train`: explain latency works out inference"),
            ("flops", Workload(train=True, optimizer="sgd"), None, "`optimizer`: explain flops holds no optimizer"),
            ("memory", Workload(optimizer="sgd"), None, "drop `optimizer` or add `train`")):
        with pytest.raises(UserError, match=re.escape(says)):
            explain(topic, spec, w, gpu)
    assert explain("memory", spec, Workload(train=True, optimizer="sgd")).matches
    assert explain("latency", spec, Workload(layout=Layout(tp=2)), H200).matches  # latency times the layout
