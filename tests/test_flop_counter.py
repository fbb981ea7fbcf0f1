"""FLOPs and KV bytes against torch's FlopCounterMode and the cache tensors of the transformers models.

Each preset backed by a Hugging Face config is built by transformers on the meta device (no weights)
and run: prefill at S = 128 and 2048 with all and last logits, one decode step at context 2048, and the
KV cache after a prefill. FlopCounterMode counts matmuls only and never halves attention, so llmcalc is
asked for the same conventions: attention dense, MLA decode decompress (what transformers runs).
"""

from __future__ import annotations

from functools import cache

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.workload import Workload

pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")

from hf_counts import fixture_config, fixture_names  # noqa: E402
from hf_flops import build_meta_model, decode_flops, kv_cache_bytes, prefill_flops  # noqa: E402

FIXTURES = fixture_names()
PRESETS = sorted(n for n in set(FIXTURES) & set(preset_names()) if load_preset(n).stack.kind == "decoder"
                 and not any(m.kind == "cross" for m in load_preset(n).mixers.values()))
"""Decoders, built as causal LMs (the others: tests/test_encoders.py, tests/test_encoder_decoder.py). Llama 3.2
Vision's cross-attention layers need images to run: its FLOPs and cache are checked on a tiny mllama with images
(tests/test_vision.py)."""
TOLERANCE = 1e-4  # 0.01 %


@cache
def model(name: str):
    return build_meta_model(fixture_config(name))


def close(ours: int, measured: int) -> bool:
    return abs(ours - measured) <= TOLERANCE * measured


UNIFORM = [n for n in PRESETS if not load_preset(n).hybrid]
"""The hybrid presets' recurrent mixers are checked exactly on tiny models instead, with the terms their torch paths
count differently stated (the conv's padded outputs, DeltaNet's triangular solves): tests/test_hybrid.py,
test_deltanet.py, test_jamba.py, test_falcon_h1.py."""


@pytest.mark.parametrize("name", UNIFORM)
@pytest.mark.parametrize("seq", [128, 2048])
@pytest.mark.parametrize("logits", ["all", "last"])
def test_prefill_matches_flop_counter(name, seq, logits):
    ours = flops(load_preset(name), Workload(batch=1, seq=seq, attention_core="dense", logits=logits)).prefill_flops
    measured = prefill_flops(model(name), 1, seq, logits=logits)["total"]
    assert close(ours, measured), (ours, measured, ours - measured)


@pytest.mark.parametrize("name", [n for n in UNIFORM if load_preset(n).attention.kind not in ("dsa", "mamba2")])
def test_decode_matches_flop_counter(name):
    """DSA: transformers masks, not gathers (test_sparse_attention.py); Mamba-2: transformers' torch path runs a
    decode token through the chunked scan, not the recurrent step (test_state_space.py)."""
    w = Workload(batch=1, seq=2048, attention_core="dense", mla_decode="decompress")
    ours = flops(load_preset(name), w).decode_flops
    measured = decode_flops(model(name), 1, 2048)["total"]
    assert close(ours, measured), (ours, measured, ours - measured)


@pytest.mark.parametrize("name", PRESETS)
def test_kv_bytes_equal_transformers_cache(name):
    spec = load_preset(name)
    seq = min(512 if spec.hybrid else 4096, spec.max_seq_len)  # Jamba's torch scan steps token by token
    ours = kv_cache(spec, Workload(batch=2, seq=seq, kv_dtype="bf16")).total_bytes
    assert ours == kv_cache_bytes(model(name), 2, seq)
