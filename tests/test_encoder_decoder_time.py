"""The time model (latency, sweep) of encoder-decoders (T5, BART, Whisper) against independent sources.

- FLOPs: torch's FlopCounterMode on transformers' tiny T5, BART and Whisper (the models and inputs of
  tests/test_encoder_decoder_costs.py): the prefill latency times is the forward of an encoder input and a decoder
  prompt, its first decode step the step after it; and `llmcalc flops` on the presets.
- Weight bytes: transformers' models on the meta device: what a prefill reads whatever its tokens (the constant of
  its bytes) is every parameter but the token embedding's rows (read per token), the LM head read once (a tied head:
  the embedding read again); a decode step reads the same but the encoder's.
- Cache bytes: the EncoderDecoderCache of a real tiny forward (via `llmcalc kv`, checked against it in
  tests/test_encoder_decoder_costs.py): a decode step's bytes grow with the decoder context by the self cache alone
  and with the encoder length by the cross cache alone.
- Identities of the one cost form: the sweep's compiled form is latency at each point, the closed-form decode sum
  is the step-by-step sum.
- Exit codes in a subprocess.
"""

from __future__ import annotations

import math
import re

import pytest
import test_encoder_decoder_costs as costs
from conftest import run_cli
from test_encoder_decoder_costs import BART, S_E, T5, T5_RELU, WHISPER, _measure, _model, _spec, _workload

from llmcalc.costs.flops import flops
from llmcalc.costs.form import value
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.step import step_costs, step_form
from llmcalc.costs.step_time import StepTime
from llmcalc.costs.memory import memory
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.views.sweep import Sweeper
from llmcalc.workload import Layout, Workload

H100 = load_gpu("h100-sxm")
PARTIAL = TimeModel(name="test", compute_efficiency=0.7, attention_efficiency=0.6, memory_efficiency=0.75,
                    matmul_pad_rows=48, overlap=0.4, kernel_s=3e-6, collective_s=1e-5, step_s=2e-4)
"""Every term a calibrated profile has (arbitrary figures)."""
PRESETS = ["t5-small", "bart-large", "whisper-large-v3"]
CONFIGS = pytest.mark.parametrize("config", [T5, T5_RELU, BART, WHISPER], ids=["t5-gated", "t5-relu", "bart",
                                                                             "whisper"])


def _phases(r):
    return {p.phase: p for p in r.phases}


# ---- FLOPs -------------------------------------------------------------------------------------------------------

@CONFIGS
def test_latency_flops_are_flop_counter_mode(config, tmp_path, monkeypatch):
    """The prefill latency costs is transformers' forward (encoder + cross K/V + decoder prompt), its decode step
    the step after it, as FlopCounterMode counts them. The decoder prompt is one token (the start token, as a
    seq2seq model generates): latency counts the causal pairs a kernel computes, FlopCounterMode eager attention's
    full square, and for one token they agree."""
    monkeypatch.setattr(costs, "S", 1)
    prefill, decode, _, _ = _measure(config)
    spec, w = _spec(config, tmp_path), _workload(config).model_copy(update={"seq": 1})
    phases = _phases(latency(spec, H100, w.model_copy(update={"gen": 2, "weights_dtype": "fp32",
                                                               "compute_dtype": "fp32"})))
    assert (phases["prefill"].flops, phases["decode first"].flops) == (prefill, decode)


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("batch,seq,enc", [(1, 64, None), (3, 200, 700)])
def test_latency_flops_are_the_flops_report(name, batch, seq, enc):
    spec = load_preset(name)
    enc = None if name == "whisper-large-v3" else enc
    w = Workload(batch=batch, seq=seq, encoder_seq=enc, gen=2)
    r, f = latency(spec, H100, w), flops(spec, w.model_copy(update={"gen": 1}))
    phases = _phases(r)
    assert (phases["prefill"].flops, phases["decode first"].flops) == (f.prefill_flops, f.decode_flops)
    ops = {o.op for o in r.ops if o.phase == "prefill"}
    assert {"encoder/proj", "encoder/core", "encoder/ffn", "cross_attention/proj", "cross_attention/core"} <= ops
    assert ("encoder/stem" in ops) == (name == "whisper-large-v3")
    assert not any(o.op.startswith("encoder/") for o in r.ops if o.phase != "prefill")  # nothing re-encoded


# ---- bytes ---------------------------------------------------------------------------------------------------------

@CONFIGS
def test_weight_bytes_a_step_reads_are_transformers_parameters(config, tmp_path):
    """The constant of a prefill's bytes is every parameter of transformers' model on the meta device but the token
    embedding and the position tables (their rows are looked up per token, as a decoder's are), with the LM head
    read once (a tied one again); a decode step's is the same less the encoder's parameters and the cross-attention's
    K and V projections (nothing re-encoded or re-projected). fp32 weights: 4 bytes each."""
    torch = pytest.importorskip("torch")

    with torch.device("meta"):
        model = _model(config)
    params = dict(model.named_parameters())  # a tied or shared tensor once
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tables = {name for name in params if "embed_positions" in name or "relative_attention_bias" in name}
    held = (sum(p.numel() for name, p in params.items() if name not in tables) - embedding.numel()
            + head.numel() * (head is embedding))
    encoder = sum(p.numel() for name, p in params.items()
                  if ".encoder." in f".{name}" and p is not embedding and name not in tables)
    # a decode step projects nothing from the encoder output: its cross-attention K and V weights go unread
    cross_kv = sum(p.numel() for name, p in params.items()
                   if re.search(r"(EncDecAttention\.|encoder_attn\.)(k|v)(_proj)?\.", name))
    spec = _spec(config, tmp_path)
    w = Workload(weights_dtype="fp32", compute_dtype="fp32", kv_dtype="fp32")
    for prefill, want in ((True, held), (False, held - encoder - cross_kv)):
        form = step_form(spec, w, prefill)
        zero = {v: 0 for cost in form.values() for c in cost if not isinstance(c, int) for v in c.variables}
        assert sum(value(c[1], zero) for c in form.values()) == 4 * want


@pytest.mark.parametrize("name", PRESETS)
def test_decode_step_reads_the_self_cache_and_the_fixed_cross_cache(name):
    """A decode step's bytes grow with the decoder context by what `llmcalc kv`'s self cache grows by, and with the
    encoder length by what its cross cache grows by (both checked against transformers' EncoderDecoderCache in
    tests/test_encoder_decoder_costs.py); the cross-attention ops do not change with the decoder context."""
    spec = load_preset(name)
    enc = (None, None) if name == "whisper-large-v3" else (300, 900)

    def step(seq, e):
        w = Workload(batch=3, seq=seq, encoder_seq=e, gen=2)
        return latency(spec, H100, w), kv_cache(spec, w)

    (r1, kv1), (r2, kv2) = step(50, enc[0]), step(400, enc[0])
    assert _phases(r2)["decode first"].bytes - _phases(r1)["decode first"].bytes == kv2.total_bytes - kv1.total_bytes
    assert kv2.cross_bytes_per_sequence == kv1.cross_bytes_per_sequence
    first, second = ({o.op: (o.flops, o.bytes) for o in r.ops if o.phase == "decode first" and
                      o.op.startswith("cross_attention/")} for r in (r1, r2))
    assert first == second and len(first) == 2
    grows = {o.op for o in r2.ops if o.phase == "decode first"} - {"attention/core"}
    for op in grows:  # only the self-attention core grows with the decoder context
        a, b = ([o.bytes for o in r.ops if o.phase == "decode first" and o.op == op] for r in (r1, r2))
        assert a == b, op
    if enc[0] is not None:
        (r3, kv3) = step(50, enc[1])
        assert _phases(r3)["decode first"].bytes - _phases(r1)["decode first"].bytes == (
            3 * (kv3.cross_bytes_per_sequence - kv1.cross_bytes_per_sequence))
        assert r3.tpot_s > r1.tpot_s and r3.ttft_s > r1.ttft_s


@pytest.mark.parametrize("name", PRESETS)
def test_kv_and_weights_of_the_report_are_kv_and_memory(name):
    """The cache after the last token (the prompt and G − 1 decode steps) at the prompt's encoder length, and the
    weights `memory` counts (checked against transformers' parameters in tests/test_encoder_decoder.py)."""
    spec = load_preset(name)
    w = Workload(batch=2, seq=128, gen=64, encoder_seq=None if name == "whisper-large-v3" else 128)
    r = latency(spec, H100, w)
    assert r.kv_bytes_per_gpu == kv_cache(spec, w.model_copy(update={"seq": 128 + 63})).total_bytes
    # the encoder, the cross-attention, the embedding norm and the final norm (a tied head's too) are all in
    assert r.weights_bytes_per_gpu == memory(spec, w).weights_bytes


# ---- the one form --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tm", [ROOFLINE, PARTIAL], ids=["roofline", "partial"])
@pytest.mark.parametrize("name", PRESETS)
def test_decode_sum_equals_step_by_step(tm, name):
    spec = load_preset(name)
    w = Workload(batch=2, seq=40, gen=120, encoder_seq=None if name == "whisper-large-v3" else 333)
    r = latency(spec, H100, w, tm)
    st = StepTime(spec, H100, w, tm, prefill=False)
    brute = sum(sum(st.time(k, c) for k, c in step_costs(spec, w, 2, 1, ctx).items()) + tm.step_s
                for ctx in range(40, 40 + 119))
    assert r.decode_s == pytest.approx(brute, rel=1e-9)
    assert r.tpot_end_s > r.tpot_s  # the self cache grows


def _estimators(spec, w: Workload, batch: int, seq: int, tm: TimeModel) -> dict:
    """A sweep point's figures from the plain estimators, at the workload's encoder length."""
    at = dict(batch=batch, seq=seq, encoder_seq=w.encoder_seq, kv_dtype=w.kv_dtype)
    m, kv = memory(spec, Workload(**at)), kv_cache(spec, Workload(**at))
    f = flops(spec, Workload(**at, gen=1))
    out = {"kv_bytes": kv.total_bytes, "weights_bytes": m.weights_bytes, "activation_bytes": m.activation_bytes,
           "memory_bytes": m.total_bytes, "prefill_flops": f.prefill_flops, "decode_flops": f.decode_flops}
    try:
        r = latency(spec, H100, w.model_copy(update={"batch": batch, "seq": seq, "gen": 1}), tm)
    except UserError:
        return out | {"ttft_s": None, "tpot_s": None, "tokens_per_s": None, "fits": False}
    return out | {"ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "tokens_per_s": r.decode_tokens_per_s, "fits": r.fits}


@pytest.mark.parametrize("tm", [ROOFLINE, PARTIAL], ids=["roofline", "partial"])
@pytest.mark.parametrize("name,enc,dp", [("t5-small", None, 1), ("t5-small", 700, 2), ("bart-large", 1024, 1),
                                         ("whisper-large-v3", None, 1)])
def test_sweep_is_latency_at_each_point(tm, name, enc, dp):
    """S_e follows the grid's seq where the workload gives none (T5, BART), else it is fixed (Whisper's 1,500)."""
    spec = load_preset(name)
    w = Workload(encoder_seq=enc, kv_dtype="fp8", layout=Layout(dp=dp))
    sweeper = Sweeper(spec, H100, w, tm)
    for batch, seq in [(dp, 1), (2 * dp, 37), (8 * dp, 448), (dp, 4096)]:
        got = sweeper.point(batch, seq)._asdict()
        for field, want in _estimators(spec, w, batch, seq, tm).items():
            if isinstance(want, float):
                assert math.isclose(got[field], want, rel_tol=1e-9), (batch, seq, field, got[field], want)
            else:
                assert got[field] == want, (batch, seq, field, got[field], want)


# ---- the command line ------------------------------------------------------------------------------------------------

def test_latency_of_t5_exits_0():
    r = run_cli("latency", "-p", "t5-small", "--gpu", "h100-sxm", "--encoder-seq", str(S_E * 100))
    assert r.returncode == 0, r.stderr
    assert "encoder/core" in r.stdout and "cross_attention/core" in r.stdout


@pytest.mark.parametrize("args,field", [
    (("latency", "-p", "gpt2", "--gpu", "h100-sxm", "--encoder-seq", "64"), "--encoder-seq"),
    (("latency", "-p", "t5-small", "--gpu", "h100-sxm", "--tp", "2"), "--tp"),
    (("serve", "-p", "t5-small", "--gpu", "h100-sxm"), "latency"),
])
def test_refusals_exit_2_with_one_line(args, field):
    r = run_cli(*args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert field in r.stderr
