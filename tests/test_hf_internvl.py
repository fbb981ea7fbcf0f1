"""InternVL (`internvl`) as --hf-config reads it, against transformers 5.24's own model on tiny configs:

- parameters of the language model and of the tower + projector (InternViT's layer-scale vectors, q/k norms, biases,
  mask token, the LayerNorm after the blocks, the projector's LayerNorm and two linears), built on the meta device;
- the tiles per image against GotOcr2ImageProcessorPil.get_number_of_image_patches under InternVLProcessor's
  crop_to_patches (its canvas of up to 12 tiles and the thumbnail);
- the FLOPs per image under FlopCounterMode around transformers' get_image_features (tower, pixel shuffle and
  projector, over every tile), and the image tokens it returns.
"""

from __future__ import annotations

import json
import warnings

import pytest
from conftest import explain_checks

from llmcalc.costs.params import params
from llmcalc.inputs.hf import INTERNVL_TILES, spec_dict_from_hf
from llmcalc.model.spec import ModelSpec

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

TEXT = dict(model_type="qwen2", vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2)
VISION = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, image_size=56,
              patch_size=14)
TINY = {
    "plain": dict(model_type="internvl", image_token_id=299, text_config=TEXT, vision_config=VISION),
    "switches": dict(model_type="internvl", image_token_id=299, text_config=TEXT, projector_hidden_act="silu",
                     vision_config=dict(VISION, image_size=[56, 56], patch_size=[14, 14], attention_bias=True,
                                        use_qk_norm=True, norm_type="rms_norm", use_mean_pooling=False,
                                        use_mask_token=True, use_absolute_position_embeddings=False)),
    "untied": dict(model_type="internvl", image_token_id=299, tie_word_embeddings=False,
                   text_config=dict(TEXT, tie_word_embeddings=True), vision_config=VISION),
}
"""Tiny InternVL models: 56-px tiles of 4 × 4 patches (17 encoder tokens with the class token, 4 image tokens a tile);
every switch of InternViT on; the outer tie_word_embeddings false over a text_config's true (the outer one decides)."""


def spec_of(raw: dict) -> ModelSpec:
    return ModelSpec.model_validate(spec_dict_from_hf(json.loads(json.dumps(raw)), name="tiny"))


def model_of(raw: dict, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.AutoConfig.for_model("internvl", **{k: v for k, v in raw.items() if k != "model_type"})
        return transformers.AutoModelForImageTextToText.from_config(cfg, **kwargs).eval()


@pytest.mark.parametrize("name", sorted(TINY))
def test_params_equal_transformers(name):
    with torch.device("meta"):
        model = model_of(TINY[name])
    total = sum(p.numel() for p in model.parameters())
    language = sum(p.numel() for n, p in model.named_parameters() if "language_model" in n or n.startswith("lm_head"))
    r = params(spec_of(TINY[name]))
    assert (r.total, r.language, r.vision) == (total, language, total - language)


def test_defaults_equal_the_config_class():
    """A config.json of the model_type alone: InternVLConfig's defaults (InternViT-300M, a Qwen2 text model)."""
    raw = {"model_type": "internvl"}
    with torch.device("meta"):
        model = model_of(raw)
    assert params(spec_of(raw)).total == sum(p.numel() for p in model.parameters())


SIZES = [(448, 448), (1080, 1920), (300, 2000), (2000, 300), (100, 100), (896, 448), (500, 640)]


@pytest.mark.parametrize(("height", "width"), SIZES)
def test_tiles_equal_the_processor(height, width):
    """transformers' own count of an image's tiles (GotOcr2ImageProcessorPil, 448-px tiles) with crop_to_patches,
    which InternVLProcessor turns on."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil
    from transformers.models.internvl.processing_internvl import InternVLProcessor

    assert InternVLProcessor.images_kwargs["crop_to_patches"] is True
    processor = GotOcr2ImageProcessorPil()
    assert (processor.min_patches, processor.max_patches) == INTERNVL_TILES
    want = processor.get_number_of_image_patches(height, width, {"crop_to_patches": True})
    tower = spec_of({"model_type": "internvl"}).vision
    assert tower.tile_count(height, width) == want


@pytest.mark.parametrize(("height", "width"), [(56, 56), (56, 168), (300, 2000), (1080, 1920)])
@pytest.mark.parametrize("name", ["plain", "switches"])
def test_tower_flops_equal_flop_counter(name, height, width):
    spec = spec_of(TINY[name])
    tower = spec.vision
    model = model_of(TINY[name], attn_implementation="eager")
    pixels = torch.randn(tower.tile_count(height, width), 3, tower.image_size, tower.image_size)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model.get_image_features(pixel_values=pixels, vision_feature_layer=-1,
                                       vision_feature_select_strategy="default")
    assert out.pooler_output.shape[0] * out.pooler_output.shape[1] == tower.tokens(height, width)
    assert sum(tower.flops(height, width, 64).values()) == counter.get_total_flops()


@pytest.mark.parametrize(("field", "value"), [("downsample_ratio", 0.3), ("vision_feature_select_strategy", "full")])
def test_unmodelled_settings_are_refused(field, value, tmp_path, cli):
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY["plain"], **{field: value})))
    r = cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and field in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_non_square_tiles_are_refused(tmp_path, cli):
    raw = dict(TINY["plain"], vision_config=dict(VISION, image_size=[56, 84]))
    (tmp_path / "config.json").write_text(json.dumps(raw))
    r = cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and "image_size" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("topic", ["flops", "memory", "params"])
def test_explain_agrees_with_the_commands(topic, tmp_path, cli_json):
    """explain works the default InternVL's figures out, the tower's per tile times t_img, to the plain commands'."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "internvl"}))
    out = cli_json("explain", topic, "--hf-config", str(tmp_path), "--seq", "8192", "--images", "2", "--image-size",
                   "1080x1920")
    found = explain_checks(out)
    assert found and all(found)
