"""Encoder-decoder models (T5, Flan-T5, BART): parameters against independent sources.

- transformers' T5ForConditionalGeneration built from the real config.json on the meta device (every fixture is
  compared in tests/test_transformers_parity.py; here the relative-bias tables module by module);
- the size Raffel et al. 2020 (arXiv:1910.10683) give T5-Small in Section 3.7: "about 60 million parameters";
- the figures not modelled yet (serving, training memory) are refused with exit code 2.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from hf_counts import fixture_source
from pydantic import ValidationError

from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.model.embedding import Positions



def test_t5_small_is_about_60_million(hf_fixture):
    assert round(params(load_hf_config(hf_fixture("t5-small"))).total, -7) == 60_000_000


@pytest.mark.parametrize("name", ["t5-small", "flan-t5-base", "bart-large", "whisper-large-v3"])
def test_preset_is_the_import_of_its_config(name, hf_fixture):
    preset, imported = load_preset(name), load_hf_config(hf_fixture(name))
    keep = {"name", "source", "checkpoint"}
    assert preset.model_dump(exclude=keep) == imported.model_dump(exclude=keep)
    assert preset.source == fixture_source(name)


@pytest.mark.parametrize("name", ["t5-small", "flan-t5-base"])
def test_relative_bias_and_cross_attention_match_transformers_modules(name, hf_fixture):
    """The bucketed bias (num_buckets × H in the first layer of each stack) and the cross-attention blocks, each
    against the parameters of transformers' own modules."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hf_counts import build_config, load_config_dict

    with torch.device("meta"):
        model = transformers.AutoModelForSeq2SeqLM.from_config(build_config(load_config_dict(hf_fixture(name))))
    named = dict(model.named_parameters())
    bias = {k: p.numel() for k, p in named.items() if "relative_attention_bias" in k}
    cross = sum(p.numel() for k, p in named.items() if ".EncDecAttention." in k)
    cross_norms = sum(p.numel() for k, p in named.items() if ".layer.1.layer_norm" in k and k.startswith("decoder."))
    rows = {r.component: r.params for r in params(load_hf_config(hf_fixture(name))).breakdown}
    assert sorted(bias) == ["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    assert rows["embedding/position"] == rows["encoder/position"] == max(bias.values()) == min(bias.values())
    assert sum(v for k, v in rows.items() if k.startswith("cross_attention/")) == cross
    assert rows["norms/cross"] == cross_norms


def test_bart_positions_and_embedding_norms_match_transformers_modules(hf_fixture):
    """BART's learned tables hold max_position_embeddings + 2 rows in each stack, and each stack has a LayerNorm
    over its embeddings: against transformers' BartForConditionalGeneration's own modules."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hf_counts import build_config, load_config_dict

    with torch.device("meta"):
        model = transformers.AutoModelForSeq2SeqLM.from_config(build_config(load_config_dict(hf_fixture("bart-large"))))
    named = {k: p.numel() for k, p in model.named_parameters()}
    rows = {r.component: r.params for r in params(load_preset("bart-large")).breakdown}
    assert rows["embedding/position"] == named["model.decoder.embed_positions.weight"] == 1026 * 1024
    assert rows["encoder/position"] == named["model.encoder.embed_positions.weight"]
    assert rows["norms/embedding"] == sum(v for k, v in named.items() if k.startswith("model.decoder.layernorm_emb"))
    assert rows["encoder/norms/embedding"] == sum(v for k, v in named.items()
                                                  if k.startswith("model.encoder.layernorm_emb"))


def test_bucket_fields_go_with_their_kind():
    with pytest.raises(ValidationError, match="num_buckets"):
        Positions(kind="rope", num_buckets=32, max_distance=128)
    with pytest.raises(ValidationError, match="num_buckets"):
        Positions(kind="t5_buckets", num_buckets=32)
    with pytest.raises(ValidationError, match="offset"):
        Positions(kind="rope", offset=2)


@pytest.mark.parametrize("command", [["serve", "--gpu", "h100-sxm"], ["fit", "--gpu", "h100-sxm"],
                                     ["memory", "--train"]])
def test_figures_not_modelled_yet_are_refused(command):
    r = run_cli(*command, "-p", "t5-small")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert "encoder-decoder" in r.stderr


def test_presets_shows_its_decoder_cache_per_token():
    """The self-attention cache per decoder token (6 layers · 2 · 512 · 2 bytes); the cross cache is per
    sequence."""
    r = run_cli("presets", "t5-small", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"kv_bytes_per_token": 12288' in r.stdout


def test_explain_writes_the_bias_table_of_a_decoder(tmp_path):
    """A decoder spec with T5's bias: explain's total, worked out from n_b · H, equals params' count."""
    data = load_preset("gpt2").model_dump(mode="json")
    data["positions"] = {"kind": "t5_buckets", "num_buckets": 32, "max_distance": 128}
    path = tmp_path / "gpt2-t5-bias.yaml"
    path.write_text(json.dumps(data))
    r = run_cli("explain", "params", "--config", str(path))
    assert r.returncode == 0, r.stderr
    assert "n_b · H" in r.stdout and "32 · 12" in r.stdout


@pytest.mark.parametrize("config", [{"model_type": "whisper"}, "whisper-large-v3"], ids=["tiny-defaults", "large-v3"])
def test_whisper_parameters_match_transformers_modules(config, tmp_path, hf_fixture):
    """WhisperForConditionalGeneration on the meta device (transformers' WhisperConfig defaults are whisper-tiny's
    shape; large-v3 from its config.json): the total, the conv stem, both position tables (the encoder's frozen
    sinusoidal one counted as transformers counts it), the biases (q, v and out biased, k not) and the cross-attention
    blocks, module by module."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hf_counts import build_config, load_config_dict

    if isinstance(config, str):
        raw, path = load_config_dict(hf_fixture(config)), hf_fixture(config)
    else:
        raw, path = config, tmp_path / "config.json"
        path.write_text(json.dumps(config))
    with torch.device("meta"):
        model = transformers.AutoModelForSpeechSeq2Seq.from_config(build_config(raw))
    named = {k: p.numel() for k, p in model.named_parameters()}
    rows = {r.component: r.params for r in params(load_hf_config(path)).breakdown}
    assert params(load_hf_config(path)).total == sum(named.values())
    assert rows["encoder/conv_stem"] == sum(v for k, v in named.items() if ".conv" in k)
    assert rows["encoder/position"] == named["model.encoder.embed_positions.weight"] == 1500 * model.config.d_model
    assert rows["embedding/position"] == named["model.decoder.embed_positions.weight"]
    assert not any(k.endswith("k_proj.bias") for k in named)
    assert sum(v for k, v in rows.items() if k.startswith("cross_attention/")) == sum(
        v for k, v in named.items() if ".encoder_attn." in k)
    assert rows["norms/cross"] == sum(v for k, v in named.items() if ".encoder_attn_layer_norm." in k)
