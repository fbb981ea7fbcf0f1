"""Preset parameter counts against published figures (REFERENCES.md, papers, model cards)."""

from __future__ import annotations

import pytest

from llmcalc.costs.params import params
from llmcalc.inputs.presets import load_preset, preset_names

# Exact totals of the Hugging Face checkpoints (shared/REFERENCES.md).
EXACT_TOTAL = {
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "llama3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-7b": 7_615_616_512,
    "gpt2": 124_439_808,
    "deepseek-v3": 671_026_404_352,
}

# Rounded figures from papers and model cards: (total, active, digits the source gives, in billions).
ROUNDED = {
    "llama3.1-70b": (70.6, None),  # model card: 70.6B
    "qwen2.5-72b": (72.7, None),  # Qwen2.5 model card: 72.7B
    "qwen3-30b-a3b": (30.5, 3.3),  # Qwen3 model card: 30.5B total, 3.3B activated
    "deepseek-v2": (236, 21),  # DeepSeek-V2 paper, abstract
    "deepseek-v3": (671, 37),  # DeepSeek-V3 paper, abstract
    "gpt3-175b": (175, None),  # Brown et al. 2020, Table 2.1
    "gemma2-9b": (9.24, None),  # Gemma 2 report, Table 1 (9.24B with embeddings)
    "gpt-oss-20b": (20.9, None),  # gpt-oss model card: 20.91B total
}


@pytest.mark.parametrize("name", sorted(EXACT_TOTAL))
def test_exact_total(name):
    assert params(load_preset(name)).total == EXACT_TOTAL[name]


def test_mixtral_active_is_published_12_9b():
    r = params(load_preset("mixtral-8x7b"))
    assert r.active == 12_879_925_248


@pytest.mark.parametrize("name", sorted(ROUNDED))
def test_rounded_figures(name):
    """Sources round or truncate: the count must lie within one unit of the last published digit."""
    r = params(load_preset(name))
    for published, ours in zip(ROUNDED[name], (r.total, r.active)):
        if published is not None:
            unit = 10 ** -len(str(published).partition(".")[2])
            assert abs(ours / 1e9 - published) < unit, (ours, published)


def test_active_without_embedding_matches_cards():
    """gpt-oss-20b's card gives 3.61B active and DeepSeek-V2-Lite's paper 2.4B: both exclude the
    input embedding table, which is what active_excluding_embedding reports."""
    assert round(params(load_preset("gpt-oss-20b")).active_excluding_embedding / 1e9, 2) == 3.61
    assert int(params(load_preset("deepseek-v2-lite")).active_excluding_embedding / 1e8) == 24
    assert round(params(load_preset("deepseek-v2-lite")).total / 1e9, 1) == 15.7


def test_tiny_decoder_matches_its_articles_arithmetic():
    """The article "CODE: 拆解 Transformer-Decoder" counts V·d + L·(4d² + 8d² + 2·2d) + d·V for dim 512, 8 layers,
    vocab 32000."""
    d, n_layers, vocab = 512, 8, 32000
    seed = vocab * d + n_layers * (4 * d * d) + n_layers * (8 * d * d) + n_layers * 2 * (2 * d) + d * vocab
    assert params(load_preset("tiny-decoder-example")).total == seed == 57_950_208


def test_deepseek_v3_mtp_reported_apart():
    """The MTP module (one MoE layer + 2d→d projection + 3 norms) is not in total; with the copies of
    embedding and head the checkpoint stores, it comes to the repository's "685B" (which also counts
    the fp8 scale tensors, hence within 1B rather than exact)."""
    r = params(load_preset("deepseek-v3"))
    assert r.total == 671_026_404_352 and r.mtp > 0
    with_copies = r.total + r.mtp + 2 * 129280 * 7168
    assert abs(with_copies / 1e9 - 685) < 1


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_has_a_source_and_consistent_active(name):
    spec = load_preset(name)
    r = params(spec)
    assert spec.source
    assert 0 < r.active_excluding_embedding < r.active <= r.total
    assert sum(row.params for row in r.breakdown) == r.language == r.total - r.vision
    assert sum(row.params for row in r.vision_breakdown) == r.vision
    assert sum(t.layers for t in r.layer_types) == spec.n_layers
