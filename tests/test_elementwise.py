"""`llmcalc flops --elementwise --embedding-matmul` against Hoffmann et al. 2022 ("Training Compute-Optimal Large
Language Models", arXiv 2203.15556), Appendix F: their FLOPs formula for the Table A4 models, written out here
from the paper (embeddings 2·S·V·d; per layer the q/k/v projections 2·3·S·d·(k·H), the key @ query logits
2·S²·(k·H), the softmax 3·H·S², softmax @ values 2·S²·(k·H), the final linear 2·S·(k·H)·d, the dense block
2·S·(d·f + d·f); logits 2·S·d·V; backward 2 × forward). Chinchilla's conventions: the full S² (dense), every
position's logits, a plain two-matrix FFN. Its models use relative positions; Appendix F counts no position
term, so the spec here has none and the terms Appendix F leaves out (norms, activations, residual adds) are
compared apart."""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.flops import flops
from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Workload
from tests.conftest import run_cli

VOCAB, SEQ = 32_000, 2048
"""Chinchilla's SentencePiece vocabulary (§4.1: 32,000 tokens) and its training sequence length."""
TABLE_A4 = [(10, 640, 2560, 10, 64), (20, 1024, 4096, 16, 64), (24, 1280, 5120, 10, 128), (26, 1792, 7168, 14, 128),
            (28, 2048, 8192, 16, 128), (40, 3584, 14336, 28, 128)]
"""Hoffmann et al. 2022, Table A4: num_layers, d_model, ffw_size, num_heads, k/q size (73M … 6.8B)."""
APPENDIX_F = {"embedding", "lm_head", "attention/q", "attention/k", "attention/v", "attention/o",
              "attention/core_scores", "attention/core_values", "elementwise/softmax", "ffn/up", "ffn/down"}
"""The rows of llmcalc's breakdown that Appendix F's terms cover."""


def chinchilla_forward(layers: int, d: int, ffw: int, heads: int, key: int) -> int:
    """Hoffmann et al. 2022, Appendix F: forward FLOPs of one sequence."""
    embeddings = 2 * SEQ * VOCAB * d
    attention = (2 * 3 * SEQ * d * (key * heads) + 2 * SEQ * SEQ * (key * heads) + 3 * heads * SEQ * SEQ
                 + 2 * SEQ * SEQ * (key * heads) + 2 * SEQ * (key * heads) * d)
    dense = 2 * SEQ * (d * ffw + d * ffw)
    logits = 2 * SEQ * d * VOCAB
    return embeddings + layers * (attention + dense) + logits


def chinchilla_spec(layers: int, d: int, ffw: int, heads: int, key: int) -> ModelSpec:
    return ModelSpec.model_validate(dict(
        name=f"chinchilla-table-a4-{layers}x{d}", vocab_size=VOCAB, d_model=d, n_layers=layers, max_seq_len=SEQ,
        tie_embeddings=False, norm=dict(kind="rmsnorm"), positions=dict(kind="none"),
        attention=dict(kind="gqa", heads=heads, kv_heads=heads, head_dim=key),
        ffn=dict(kind="dense", d_ff=ffw, activation="gelu"), layer_pattern=["full"]))


@pytest.mark.parametrize("shape", TABLE_A4, ids=lambda s: f"L{s[0]}-d{s[1]}")
def test_appendix_f_for_table_a4(shape):
    w = Workload(batch=1, seq=SEQ, attention_core="dense", logits="all", elementwise=True, embedding_matmul=True)
    r = flops(chinchilla_spec(*shape), w)
    rows = {x.component: x for x in r.breakdown}
    assert APPENDIX_F <= set(rows)
    forward = chinchilla_forward(*shape)
    assert sum(rows[k].prefill for k in APPENDIX_F) == forward
    assert sum(rows[k].train for k in APPENDIX_F) == 3 * forward  # "the backward pass has twice the FLOPs"
    # the rest is what Appendix F leaves out: norms, activations and residual adds, nothing else
    assert set(rows) - APPENDIX_F == {"elementwise/norm", "elementwise/activation", "elementwise/residual"}
    assert r.prefill_flops == forward + sum(rows[k].prefill for k in set(rows) - APPENDIX_F)


def test_default_is_unchanged_and_the_rows_add_up():
    spec = load_preset("llama2-7b")
    plain = flops(spec, Workload(batch=2, seq=1024, gen=8))
    both = flops(spec, Workload(batch=2, seq=1024, gen=8, elementwise=True, embedding_matmul=True))
    assert not any(x.component.startswith(("elementwise/", "embedding")) for x in plain.breakdown)
    extra = [x for x in both.breakdown if x.component.startswith(("elementwise/", "embedding"))]
    for phase in ("prefill", "decode", "generate", "train"):
        assert getattr(both, f"{phase}_flops") == getattr(plain, f"{phase}_flops") + sum(
            getattr(x, phase) for x in extra)


def test_each_variant_answers_its_own_count():
    """The conventions of docs/formulas.md#element-wise-flops worked out by hand for three families."""
    b, s = 1, 512
    # Llama-2-7B: RMSNorm (4 per element, 2 per layer + final), SwiGLU (SiLU 4 + gate product 1), RoPE, MHA 32 heads
    llama = {x.component: x for x in flops(load_preset("llama2-7b"), Workload(batch=b, seq=s, elementwise=True))
             .breakdown}
    L, d, f, H, h = 32, 4096, 11008, 32, 128
    assert llama["elementwise/norm"].prefill == s * (L * 4 * 2 * d + 4 * d)
    assert llama["elementwise/activation"].prefill == L * s * 5 * f
    assert llama["elementwise/softmax"].prefill == L * 3 * H * s * (s + 1) // 2  # causal: S(S+1)/2 pairs
    assert llama["elementwise/softmax"].decode == L * 3 * H * (s + 1)  # one query over S + 1 keys
    assert llama["elementwise/residual"].prefill == L * s * 2 * d
    assert llama["elementwise/positions"].prefill == L * s * 3 * (H + H) * h
    # GPT-2: LayerNorm with bias (7), tanh-GELU (9), learned positions (d once per token)
    gpt2 = {x.component: x for x in flops(load_preset("gpt2"), Workload(batch=b, seq=s, elementwise=True))
            .breakdown}
    L, d, f = 12, 768, 3072
    assert gpt2["elementwise/norm"].prefill == s * (L * 7 * 2 * d + 7 * d)
    assert gpt2["elementwise/activation"].prefill == L * s * 9 * f
    assert gpt2["elementwise/positions"].prefill == s * d
    # Mixtral-8x7B: router softmax over 8 experts, 2 SwiGLU experts, their outputs weighted and summed
    mix = {x.component: x for x in flops(load_preset("mixtral-8x7b"), Workload(batch=b, seq=s, elementwise=True))
           .breakdown}
    L, d, f = 32, 4096, 14336
    assert mix["elementwise/activation"].prefill == L * s * (3 * 8 + 2 * 5 * f + 2 * 2 * d)
    # DeepSeek-V2-Lite: MLA's kv latent norm (512, no query latent) beside the two RMSNorms of each layer
    ds = {x.component: x for x in flops(load_preset("deepseek-v2-lite"), Workload(batch=b, seq=s, elementwise=True))
          .breakdown}
    L, d = 27, 2048
    assert ds["elementwise/norm"].prefill == s * (L * 4 * (2 * d + 512) + 4 * d)


def test_cli_flags(cli):
    r = cli("flops", "-p", "gpt2", "--seq", "256", "--elementwise", "--embedding-matmul", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = {x["component"]: x for x in json.loads(r.stdout)["breakdown"]}
    assert rows["embedding"]["prefill"] == 2 * 256 * 50257 * 768
    assert "elementwise/softmax" in rows
    assert "elementwise/positions" not in cli("flops", "-p", "gpt2", "--format", "json").stdout


def test_layers_without_an_ffn_add_no_activation():
    """Nemotron-H 8B: 52 layers, 24 of them with an MLP of 21,504 under squared ReLU (2 FLOPs an element: relu,
    square), the others Mamba-2 or attention alone: 24 · 1,000 tokens · 2 · 21,504 activation FLOPs."""
    out = run_cli("flops", "-p", "nemotron-h-8b", "--elementwise", "--batch", "1", "--seq", "1000", "-f", "json")
    assert out.returncode == 0, out.stderr
    rows = {b["component"]: b for b in json.loads(out.stdout)["breakdown"]}
    assert rows["elementwise/activation"]["prefill"] == 24 * 1000 * 2 * 21504
