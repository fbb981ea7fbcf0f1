"""Exact equality with transformers' own parameter count of the same architecture (meta device).

Each model of tests/fixtures/hf_architectures.yaml is a real config.json's architecture (its source named there),
written as a config.json once per test run. transformers builds the model on the meta device (no weights) and counts
model.parameters(); llmcalc must agree for the matching preset and for its own import of the same config.json.
"""

from __future__ import annotations

from functools import cache

import pytest

from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset, preset_names

pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")

from hf_counts import (  # noqa: E402
    GEMMA3N_PRESETS,
    LLAMA4_PRESETS,
    LONGCAT_PRESETS,
    SHARED_CONFIGS,
    SHARED_MODELS,
    fixture_config,
    fixture_names,
    transformers_counts,
)

FIXTURES = fixture_names()


@cache
def reference(name: str) -> tuple[int, int]:
    c = transformers_counts(fixture_config(name))
    return c["total"], c["active"]


@pytest.mark.parametrize("name", FIXTURES)
def test_hf_import_equals_transformers(name, hf_fixture):
    r = params(load_hf_config(hf_fixture(name)))
    assert (r.total, r.active) == reference(name)


@pytest.mark.parametrize("name", sorted(set(FIXTURES) & set(preset_names())))
def test_preset_equals_transformers(name):
    r = params(load_preset(name))
    assert (r.total, r.active) == reference(name)


def test_every_hf_backed_preset_has_a_fixture():
    """Presets whose source is a checkpoint's config (adapted examples cite a paper first); those of the real files
    of ../shared/model-configs-2026/ are held to transformers in tests/test_hf_2026_text.py and
    tests/test_hf_2026_multimodal.py, Llama 4's in tests/test_hf_llama4.py, LongCat-Flash's in
    tests/test_hf_longcat.py, Gemma 3n's in tests/test_hf_gemma3n.py."""
    hf_presets = {n for n in preset_names() if (load_preset(n).source or "").startswith("https://huggingface.co")}
    assert hf_presets <= (set(FIXTURES) | set(SHARED_MODELS.values()) | set(SHARED_CONFIGS) | LLAMA4_PRESETS
                          | LONGCAT_PRESETS | GEMMA3N_PRESETS)


def test_config_file_path_and_folder_agree(hf_fixture):
    folder = hf_fixture("qwen3-30b-a3b")
    assert load_hf_config(folder) == load_hf_config(folder / "config.json")
