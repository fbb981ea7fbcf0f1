"""The reference encoder and encoder-decoder (llmcalc/reference/encoder_decoder.py) against independent sources.

- `llmcalc validate` (fake tensors, full size; cpu, a scaled copy) on BERT, ModernBERT (sliding layers), T5, BART
  and Whisper: parameters, FLOPs under FlopCounterMode, cache bytes and the peak of live tensors, against the
  estimates;
- logits: transformers' T5ForConditionalGeneration (tiny, random weights) and the reference built from the same
  config with the same weights give the same logits, for a whole forward and for a cached prefill + decode step
  (the cross-attention K and V read back from the cache).
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["t5-small", "bert-base-uncased"])
def test_validate_fake_passes(name):
    r = run_cli("validate", "--device", "fake", "-p", name, "--batch", "1", "--seq", "32")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout


@pytest.mark.parametrize("name", ["modernbert-base", "bart-large", "flan-t5-base"])
def test_validate_cpu_scaled_copy_passes(name):
    """Real tensors on a scaled copy (2 layers, widths ÷8): every row passes, the encoder's and the cross-attention's
    FLOPs and cache bytes exactly."""
    from llmcalc.views.validate import scaled_copy, validate

    report = validate([scaled_copy(load_preset(name), 2, 8)], batch=1, seq=16, device="cpu")
    assert report.ok, [(r.quantity, r.estimate, r.measured) for r in report.rows if not r.ok]
    rows = {r.quantity: r for r in report.rows}
    assert rows["prefill FLOPs"].rel_error == rows["train FLOPs"].rel_error == rows["KV cache bytes"].rel_error == 0


def test_validate_cpu_tiny_whisper_passes(tmp_path):
    """A tiny Whisper (8 mel bins, 16 encoder positions) on real tensors: the conv stem's FLOPs (conv1's backward
    the weight gradient only), the fixed encoder length and the cross cache, exactly."""
    from llmcalc.views.validate import validate

    config = dict(model_type="whisper", vocab_size=96, num_mel_bins=8, d_model=32, encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48,
                  max_source_positions=16, max_target_positions=32)
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = validate([load_hf_config(tmp_path)], batch=2, seq=8, device="cpu")
    assert report.ok, [(r.quantity, r.estimate, r.measured) for r in report.rows if not r.ok]


T5 = dict(model_type="t5", vocab_size=96, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=3,
          num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
          feed_forward_proj="gated-gelu", tie_word_embeddings=False, n_positions=512, decoder_start_token_id=0,
          pad_token_id=0, dropout_rate=0.0)


def _copy_t5(hf, ref, spec) -> None:
    """transformers' T5 weights into the reference. The reference scales the scores by 1/√h, which T5 folds into
    its query weights: the query weights go in × √h."""
    scale = spec.attention.head_dim ** 0.5
    names = {"SelfAttention": "attn", "EncDecAttention": "cross"}
    ffn = {"wi": "up", "wi_0": "gate", "wi_1": "up", "wo": "down"}
    out = {"embed.weight": hf["shared.weight"], "lm_head.weight": hf["lm_head.weight"],
           "encoder.final_norm.weight": hf["encoder.final_layer_norm.weight"],
           "final_norm.weight": hf["decoder.final_layer_norm.weight"]}
    for key, value in hf.items():
        parts = key.split(".")
        if parts[1] != "block":
            continue
        stack, i, sub = parts[0], parts[2], int(parts[4])
        mine = f"encoder.layers.{i}" if stack == "encoder" else f"layers.{i}"
        last = stack == "decoder" and sub == 2 or stack == "encoder" and sub == 1  # the FFN's sub-layer
        if parts[5] == "layer_norm":
            slot = "norms.1" if last else "cross_norm" if sub == 1 else "norms.0"
            out[f"{mine}.{slot}.weight"] = value
        elif parts[5] == "DenseReluDense":
            out[f"{mine}.ffn.{ffn[parts[6]]}.weight"] = value
        elif parts[6] == "relative_attention_bias":
            out[f"{mine}.attn.relative_attention_bias.weight"] = value
        else:
            out[f"{mine}.{names[parts[5]]}.{parts[6]}.weight"] = value * (scale if parts[6] == "q" else 1)
    missing = ref.load_state_dict(out, strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys


def test_t5_logits_equal_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    from llmcalc.reference.encoder_decoder import EncoderDecoder

    path = tmp_path / "t5"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(T5))
    spec = load_hf_config(path)
    torch.manual_seed(0)
    hf = transformers.AutoModelForSeq2SeqLM.from_config(transformers.AutoConfig.for_model(**T5)).eval()
    B, S, S_e = 2, 6, 9
    ref = EncoderDecoder(spec, encoder_seq=S_e).eval()
    _copy_t5(hf.state_dict(), ref, spec)
    gen = torch.Generator().manual_seed(1)
    enc, dec = torch.randint(1, 96, (B, S_e), generator=gen), torch.randint(1, 96, (B, S), generator=gen)
    with torch.no_grad():
        expected = hf(input_ids=enc, decoder_input_ids=dec).logits  # [B, S, V]
        whole = ref(dec, None, 0, "all", source=enc)
        cache = ref.new_cache(B, S)
        first = ref(dec[:, :-1], cache, 0, "all", source=enc)  # the prefill: encoder, cross K/V into the cache
        last = ref(dec[:, -1:], cache, S - 1, "last")  # a step: the cross K/V read from the cache
    torch.testing.assert_close(whole, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(first, expected[:, :-1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(last, expected[:, -1:], rtol=1e-4, atol=1e-5)
