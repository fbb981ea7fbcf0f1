"""Vision towers of vision-language models (llava, gemma3, qwen2_5_vl), each figure against an independent source:

- parameters: transformers' own model built from the real config.json on the meta device, split into the
  vision tower + projector and the language model by the modules' own names;
- tokens per image: published figures (LLaVA-1.5: 576 at 336 px; Gemma 3: 256) and Qwen2-VL's smart_resize in
  transformers (the processor's own arithmetic);
- FLOPs per image: torch's FlopCounterMode around transformers' own get_image_features on CPU, tiny configs
  of the same model types (eager attention, so the attention core's matmuls are counted too).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import run_cli
from hf_counts import fixture_config

from llmcalc.costs.flops import flops
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config, spec_dict_from_hf
from llmcalc.inputs.presets import load_preset, load_spec_file
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Workload

VLMS = ["llava-1.5-7b", "gemma3-4b", "qwen2.5-vl-7b", "llama-3.2-11b-vision"]


@pytest.fixture(scope="module")
def transformers_split():
    """{fixture: (language, vision)} from transformers' models on the meta device."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModelForImageTextToText

    out = {}
    for name in VLMS:
        raw = fixture_config(name)
        mt = raw.pop("model_type")
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            m = AutoModelForImageTextToText.from_config(AutoConfig.for_model(mt, **raw))
        language = sum(p.numel() for n, p in m.named_parameters() if "language_model" in n or n.startswith("lm_head"))
        out[name] = (language, sum(p.numel() for p in m.parameters()) - language)
    return out


@pytest.mark.parametrize("name", VLMS)
def test_params_split_equals_transformers(name, transformers_split, hf_fixture):
    r = params(load_hf_config(hf_fixture(name)))
    assert (r.language, r.vision) == transformers_split[name]
    assert r.total == r.language + r.vision
    assert params(load_preset(name)).model_dump(exclude={"model"}) == r.model_dump(exclude={"model"})


def test_published_totals():
    """Model cards: LLaVA-1.5-7B 7.06B, Gemma 3 4B 4.30B, Qwen2.5-VL-7B 8.29B, Llama 3.2 11B Vision 10.6B
    parameters; the language models
    are Vicuna-7B (Llama-2-7B with 64 more vocabulary rows) and Qwen2.5-7B (7,615,616,512, shared/REFERENCES.md)."""
    got = {n: params(load_preset(n)) for n in VLMS}
    assert [round(got[n].total / 1e9, 2) for n in VLMS] == [7.06, 4.30, 8.29, 10.67]
    assert got["qwen2.5-vl-7b"].language == 7_615_616_512
    assert got["llava-1.5-7b"].language == 6_738_415_616 + 64 * 4096 * 2


def test_published_tokens_per_image():
    """LLaVA-1.5 (Liu et al. 2023, arXiv:2310.03744): 336 px CLIP ViT-L/14, 24² = 576 tokens; Gemma 3 Technical
    Report (arXiv:2503.19786, section 2.1): 256 soft tokens at 896 px, any input resized to it."""
    llava, gemma = load_preset("llava-1.5-7b").vision, load_preset("gemma3-4b").vision
    assert llava.tokens(336, 336) == llava.tokens(1080, 1920) == 576
    assert llava.sequence(336, 336) == 577  # the class token runs through the encoder, then is dropped
    assert gemma.tokens(896, 896) == gemma.tokens(480, 640) == 256


@pytest.mark.parametrize("size", [(1080, 1920), (448, 448), (10, 2000), (28, 28), (5000, 7000), (333, 517),
                                  (14000, 14000), (70, 42)])
def test_qwen_tokens_follow_the_processor(size):
    pytest.importorskip("transformers")
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    tower = load_preset("qwen2.5-vl-7b").vision
    h, w = smart_resize(*size, factor=28, min_pixels=tower.min_pixels, max_pixels=tower.max_pixels)
    assert tower.grid(*size) == (h // 14, w // 14)
    assert tower.tokens(*size) == (h // 28) * (w // 28)


TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=300)
TINY = {
    "llava": dict(model_type="llava", image_token_index=299, text_config=dict(model_type="llama", **TEXT),
                  vision_config=dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=48,
                                     num_hidden_layers=3, num_attention_heads=4, image_size=56, patch_size=14)),
    "gemma3": dict(model_type="gemma3", image_token_index=299, boi_token_index=297, eoi_token_index=298,
                   mm_tokens_per_image=4, text_config=dict(model_type="gemma3_text", head_dim=16, **TEXT),
                   vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4, image_size=112, patch_size=14,
                                      vision_use_head=False)),
    "qwen2_5_vl": dict(model_type="qwen2_5_vl", image_token_id=299, video_token_id=298, vision_start_token_id=297,
                       vision_end_token_id=296, bos_token_id=1, eos_token_id=2,
                       text_config=dict(model_type="qwen2_5_vl_text", bos_token_id=1, eos_token_id=2,
                                        rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3]}, **TEXT),
                       vision_config=dict(depth=3, hidden_size=32, intermediate_size=48, num_heads=4,
                                          out_hidden_size=64, patch_size=14, spatial_merge_size=2,
                                          temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1])),
}
"""Tiny configs of each model type: 3 CLIP layers; 2 SigLIP layers with a 8×8 grid pooled to 2×2; 3 Qwen layers,
windows of 4 patches with layer 1 attending to the whole image (run on a 140×196 image: a 10×14 grid, partial
windows at the edges)."""


@pytest.mark.parametrize("name", sorted(TINY))
def test_flops_per_image_equal_flop_counter_on_transformers(name):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoConfig, AutoModelForImageTextToText

    raw = dict(TINY[name])
    tower = ModelSpec.model_validate(spec_dict_from_hf(raw, name=name)).vision
    mt = raw.pop("model_type")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(mt, **raw),
                                                        attn_implementation="eager").eval()
    assert sum(tower.params(64).values()) == sum(
        p.numel() for n, p in model.named_parameters() if "language_model" not in n and not n.startswith("lm_head"))
    if mt == "qwen2_5_vl":
        height, width = 140, 196
        gh, gw = tower.grid(height, width)
        inputs = dict(pixel_values=torch.randn(gh * gw, tower.patch_inputs), image_grid_thw=torch.tensor([[1, gh, gw]]))
    else:
        height = width = tower.image_size
        inputs = dict(pixel_values=torch.randn(1, 3, height, width))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model.model.get_image_features(**inputs)
    features = out.pooler_output if hasattr(out, "pooler_output") else out
    features = torch.cat(list(features)) if isinstance(features, (list, tuple)) else features
    assert features.reshape(-1, 64).shape[0] == tower.tokens(height, width)
    assert sum(tower.flops(height, width, 64).values()) == counter.get_total_flops()


def test_flops_report_images_share_and_prefill():
    spec = load_preset("llava-1.5-7b")
    r = flops(spec, Workload(batch=2, seq=2048, images=2))
    v = r.vision
    assert (v.tokens_per_image, v.image_tokens, v.encoder_tokens) == (576, 1152, 577)
    assert v.image_share == 1152 / 2048
    assert v.flops == 2 * 2 * v.flops_per_image
    assert v.prefill_flops_with_images == r.prefill_flops + v.flops
    assert r.prefill_flops == flops(spec, Workload(batch=2, seq=2048)).prefill_flops  # the prompt's length is seq


@pytest.mark.parametrize("args", [["flops", "-p", "llama2-7b", "--images", "1"],
                                  ["flops", "-p", "llava-1.5-7b", "--images", "4", "--seq", "1000"],
                                  ["flops", "-p", "llava-1.5-7b", "--images", "1", "--image-size", "336by336"],
                                  ["flops", "-p", "qwen2.5-vl-7b", "--images", "1", "--image-size", "1x300"]])
def test_bad_image_input_is_two(args):
    r = run_cli(*args)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)


@pytest.mark.parametrize("name,size", [("llava-1.5-7b", (336, 336)), ("gemma3-4b", (896, 896)),
                                       ("qwen2.5-vl-7b", (333, 517))])
def test_reference_tower_on_the_meta_device(name, size):
    """The reference tower (llmcalc/reference/vision.py) built at full size on the meta device: its parameters,
    FlopCounterMode's FLOPs and its output tokens. Qwen2.5-VL at 333 × 517 px: a 24 × 36 grid, 3 × 5 windows, the
    last column of windows 4 patches wide."""
    pytest.importorskip("torch")
    from llmcalc.reference.vision import measure_image

    spec = load_preset(name)
    tower = spec.vision
    n_params, n_flops, tokens = measure_image(tower, spec.d_model, *size)
    assert n_params == sum(tower.params(spec.d_model).values())
    assert n_flops == sum(tower.flops(*size, spec.d_model).values())
    assert tokens == tower.tokens(*size)


def test_kv_image_share():
    """LLaVA-1.5's language model is Llama-2-7B's shape: 2 · 32 layers · 4096 · 2 bytes = 524,288 bytes per token
    (shared/REFERENCES.md's KV formula); 576 image tokens hold 576 of them. Gemma 3 4B with the images first in a
    2048-token prompt: only its 5 full-attention layers (of 34; 5 sliding per full) still hold them, its sliding
    layers keep the last 1023 tokens; a full layer holds 2 · 4 kv heads · 256 · 2 bytes per token."""
    from llmcalc.costs.kv import kv_cache

    r = kv_cache(load_preset("llava-1.5-7b"), Workload(seq=2048, images=1, batch=3))
    assert (r.image_tokens, r.image_bytes) == (576, 3 * 576 * 524_288)
    g = kv_cache(load_preset("gemma3-4b"), Workload(seq=2048, images=2))
    assert (g.image_tokens, g.image_bytes) == (512, 5 * 512 * 2 * 4 * 256 * 2)


def test_latency_adds_each_image_to_the_first_token():
    """Roofline on an H100 SXM (989.4 TFLOP/s bf16 dense: the datasheet's 1,979 with sparsity / 2): an image is
    compute-bound, its tower FLOPs at the roofline's 0.8 matmul efficiency; the first token waits for batch × images
    of them."""
    from llmcalc.costs.latency import latency
    from llmcalc.inputs.gpus import load_gpu

    spec, gpu = load_preset("llava-1.5-7b"), load_gpu("h100-sxm")
    plain = latency(spec, gpu, Workload(batch=2, seq=1024, gen=8))
    with_images = latency(spec, gpu, Workload(batch=2, seq=1024, gen=8, images=1))
    assert with_images.image_s == pytest.approx(406_077_407_232 / (989.4e12 * 0.8))
    assert with_images.ttft_s - plain.ttft_s == pytest.approx(2 * with_images.image_s)
    assert with_images.tpot_s == plain.tpot_s


def test_validate_measures_the_tower():
    """`validate` on a vision-language model: the decoder against the language model's count, and the vision
    tower and projector against the reference tower (meta device), every row within its tolerance (exit 0)."""
    pytest.importorskip("torch")
    r = run_cli("validate", "-p", "gemma3-4b", "--layers", "2", "--seq", "16", "-f", "json")
    assert r.returncode == 0, r.stderr
    rows = {x["quantity"]: x for x in json.loads(r.stdout)["rows"]}
    assert rows["vision params"]["measured"] == 419_816_304
    assert rows["vision FLOPs per image"]["measured"] == rows["vision FLOPs per image"]["estimate"]


@pytest.mark.parametrize("field,value", [("hidden_size", "wide"), ("window_size", None), ("fullatt_block_indexes", 7),
                                         ("depth", 0)])
def test_bad_vision_config_is_two(tmp_path, field, value):
    raw = fixture_config("qwen2.5-vl-7b")
    raw["vision_config"][field] = value
    (tmp_path / "config.json").write_text(json.dumps(raw))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert field in r.stderr


# Memory, fit and explain with images ------------------------------------------------------------------------

@pytest.mark.parametrize("name,size,images", [("llava-1.5-7b", (336, 336), 3), ("gemma3-4b", (896, 896), 2),
                                              ("qwen2.5-vl-7b", (1080, 1920), 1), ("qwen2.5-vl-7b", (333, 517), 3)])
def test_tower_peak_equals_the_reference_tower_measured(name, size, images):
    """The tower's activation peak (VisionTower.activation_bytes) against the live bytes of the reference tower
    (llmcalc/reference/vision.py on SDPA) encoding `images` images at full size on fake tensors, counted by
    validate's LiveBytes: equal for LLaVA and Gemma 3 (13,676,032 B per 336-px LLaVA image, 103,645,184 B per 896-px
    Gemma 3 image); for Qwen2.5-VL the window index tensors (int64) are all that differs, under 0.05%."""
    pytest.importorskip("torch")
    from llmcalc.reference.vision import image_peak

    spec = load_preset(name)
    measured = image_peak(spec.vision, spec.d_model, *size, images=images)
    estimate = images * spec.vision.activation_bytes(*size, spec.d_model, 2)
    assert abs(measured - estimate) <= 0.0005 * measured, (measured, estimate)
    if name != "qwen2.5-vl-7b":
        assert measured == estimate


@pytest.mark.parametrize("name", sorted(TINY))
def test_tower_peak_on_real_tensors(name):
    """The tiny towers run for real on the CPU in fp32, 2 images: the live-byte peak within 4% under the estimate.
    The real CPU flash kernel lays its output out as (k, n, H, h), so gathering the heads is a view, not the (n, d)
    copy the full-size fake run makes (and the estimate counts); the peak is then n·(6·d + H·4 B of log-sum-exp)
    bytes a layer (Gemma 3 tiny: 401,408 B measured, 415,744 B estimated).
    Qwen2.5-VL also holds its windows' int64 token indices (1,120 B here)."""
    pytest.importorskip("torch")
    import torch

    from llmcalc.reference.vision import image_peak

    tower = ModelSpec.model_validate(spec_dict_from_hf(dict(TINY[name]), name=name)).vision
    size = (140, 196) if name == "qwen2_5_vl" else (tower.image_size, tower.image_size)
    measured = image_peak(tower, 64, *size, images=2, dtype=torch.float32, device="cpu")
    estimate = 2 * tower.activation_bytes(*size, 64, 4)
    indices = 8 * tower.sequence(*size) if tower.window else 0  # Qwen2.5-VL: its windows' int64 token indices
    assert 0.96 * estimate <= measured <= estimate + indices, (measured, estimate)


def test_memory_counts_the_tower_and_the_image_tokens():
    """memory with images: activations are the larger of the language model's prefill peak and the tower's
    (8 Gemma 3 images a sequence: the tower's); the image tokens' share of the cache is kv's image_bytes; the
    weights hold the tower, as `params` counts it."""
    from llmcalc.costs.kv import kv_cache
    from llmcalc.costs.memory import memory

    spec = load_preset("gemma3-4b")
    w = Workload(batch=4, seq=4096, images=8)
    plain, r = memory(spec, Workload(batch=4, seq=4096)), memory(spec, w)
    tower = 4 * 8 * spec.vision.activation_bytes(896, 896, spec.d_model, 2)
    assert r.vision_activation_bytes == tower > plain.activation_bytes
    assert r.activation_bytes == tower and r.kv_cache_bytes == plain.kv_cache_bytes
    assert r.image_kv_bytes == kv_cache(spec, w).image_bytes == 4 * 5 * 2048 * 2 * 4 * 256 * 2
    assert r.weights_bytes == 2 * params(spec).total


def test_fit_holds_the_tower():
    """fit: the tower's weights on the GPU (the same bytes as memory's with tp 1), and the workspace at least one
    sequence's images through the tower."""
    from llmcalc.costs.fit import fit
    from llmcalc.costs.memory import memory
    from llmcalc.inputs.gpus import load_gpu

    spec, gpu = load_preset("qwen2.5-vl-7b"), load_gpu("h100-sxm")
    w = Workload(batch=2, seq=16384, images=4, image_size=(1080, 1920))
    r = fit(spec, gpu, w)
    assert r.weights_bytes == memory(spec, w).weights_bytes == 2 * params(spec).total
    assert r.activation_bytes >= 4 * spec.vision.activation_bytes(1080, 1920, spec.d_model, 2)
    two = fit(spec, gpu, w.model_copy(update={"layout": w.layout.model_copy(update={"tp": 2})}))
    assert two.weights_bytes < r.weights_bytes


@pytest.mark.parametrize("topic", ["flops", "memory", "params"])
def test_explain_works_out_the_images(cli_json, topic):
    """explain with images: the vision steps sum to the commands' own figures (exit 0: every total matches)."""
    r = cli_json("explain", topic, "-p", "qwen2.5-vl-7b", "--images", "2", "--image-size", "1080x1920",
                 "--seq", "8192")
    assert r["matches"]
    if topic == "flops":
        image = next(t for t in r["totals"] if t["component"] == "image")
        assert image["value"] == sum(load_preset("qwen2.5-vl-7b").vision.flops(1080, 1920, 3584).values())
    if topic == "memory":
        assert "I" in next(s for s in r["steps"] if s["component"] == "activations")["symbols"]


def test_memory_and_fit_cli_take_images(cli_json):
    m = cli_json("memory", "-p", "llava-1.5-7b", "--images", "2", "--seq", "2048", "-b", "64")
    assert m["images"] == 2 and m["vision_activation_bytes"] == 64 * 2 * 13_676_032
    f = cli_json("fit", "-p", "llava-1.5-7b", "--gpu", "h100-sxm", "--images", "2", "--seq", "2048")
    assert f["fits"]
    r = run_cli("memory", "-p", "llama2-7b", "--images", "1")
    assert r.returncode == 2 and "images" in r.stderr


# Llama 3.2 Vision's tiled tower (mllama) ------------------------------------------------------------------------

MLLAMA_SPEC = Path(__file__).resolve().parent.parent / "presets" / "llama-3.2-11b-vision.yaml"
"""The llama-3.2-11b-vision preset's file (each number sourced in its comments)."""
MLLAMA_11B_VISION = dict(image_size=560, patch_size=14, hidden_size=1280, num_hidden_layers=32, num_global_layers=8,
                         attention_heads=16, intermediate_size=5120, vision_output_dim=7680, max_num_tiles=4,
                         intermediate_layers_indices=[3, 7, 15, 23, 30],
                         supported_aspect_ratios=[[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]])
"""meta-llama/Llama-3.2-11B-Vision's vision_config (its config.json on the Hub); transformers' MllamaVisionConfig
defaults differ (image_size 448), so every field is given."""
MLLAMA_11B_TEXT = dict(cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38])
"""Its text_config's cross-attention layers; the other fields are MllamaTextConfig's defaults, which are the 11B's
(hidden 4096, 40 layers, 32 heads, 8 kv heads, FFN 14,336, vocabulary 128,256)."""


def tiled_tower(v: dict):
    from llmcalc.model.vision import TiledVisionTower

    return TiledVisionTower(
        kind="tiled", image_size=v["image_size"], patch_size=v["patch_size"], patch_bias=False, class_token=True,
        pre_norm=True, post_norm=True, d_model=v["hidden_size"], n_layers=v["num_hidden_layers"],
        heads=v["attention_heads"], d_ff=v["intermediate_size"], activation="gelu", max_tiles=v["max_num_tiles"],
        aspect_ratios=len(v["supported_aspect_ratios"]), global_layers=v["num_global_layers"],
        intermediate_layers=v["intermediate_layers_indices"],
        projector=dict(kind="linear", concat=1 + len(v["intermediate_layers_indices"])))


@pytest.fixture(scope="module")
def mllama_11b():
    """transformers' MllamaForConditionalGeneration of the 11B checkpoint's config, on the meta device."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import MllamaConfig, MllamaForConditionalGeneration

    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        m = MllamaForConditionalGeneration(MllamaConfig(vision_config=MLLAMA_11B_VISION, text_config=MLLAMA_11B_TEXT))
    return m


def test_mllama_tower_params_equal_transformers(mllama_11b):
    """The 11B's vision tower and projector against transformers' MllamaForConditionalGeneration on the meta device:
    895,028,755 parameters (vision_model + multi_modal_projector); the whole model is 10,670,220,835 (the model
    card's 10.6B)."""
    m = mllama_11b
    vision = sum(p.numel() for n, p in m.named_parameters() if "vision_model" in n or "multi_modal_projector" in n)
    assert sum(tiled_tower(MLLAMA_11B_VISION).params(4096).values()) == vision == 895_028_755
    assert sum(p.numel() for p in m.parameters()) == 10_670_220_835


@pytest.mark.parametrize("size", [(1, 1), (100, 4000), (299, 561), (560, 560), (561, 560), (700, 1000),
                                  (1080, 1920), (1120, 1120), (1500, 700), (2240, 560), (3000, 4000), (4000, 299)])
def test_mllama_tiles_follow_the_processor(size):
    """The tile arrangement against transformers' own canvas choice (get_optimal_tiled_canvas), max 4 tiles of
    560 px; every image gives max_tiles · (40² + 1) = 6,404 image tokens (padding tiles masked, not dropped)."""
    pytest.importorskip("transformers")
    from transformers.models.mllama.image_processing_pil_mllama import get_optimal_tiled_canvas

    tower = tiled_tower(MLLAMA_11B_VISION)
    canvas = get_optimal_tiled_canvas(*size, 4, 560)
    assert tower.tiles(*size) == (canvas[0] // 560, canvas[1] // 560)
    assert tower.tokens(*size) == 6404 and tower.sequence(*size) == 4 * 1608


MLLAMA_TINY_VISION = dict(image_size=28, patch_size=14, hidden_size=32, num_hidden_layers=3, num_global_layers=2,
                          attention_heads=4, intermediate_size=48, vision_output_dim=96, max_num_tiles=2,
                          intermediate_layers_indices=[0, 2], supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]])
MLLAMA_TINY_TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=300, cross_attention_layers=[1, 3], bos_token_id=1,
                        eos_token_id=2, pad_token_id=0)


def tiny_mllama():
    """A tiny MllamaForConditionalGeneration on the CPU, eager attention everywhere, and its vision_config."""
    from transformers import MllamaConfig, MllamaForConditionalGeneration

    config = MllamaConfig(vision_config=MLLAMA_TINY_VISION, text_config=MLLAMA_TINY_TEXT, image_token_index=299)
    config._attn_implementation = "eager"
    config.vision_config._attn_implementation = config.text_config._attn_implementation = "eager"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MllamaForConditionalGeneration(config).eval(), MLLAMA_TINY_VISION


def tiny_mllama_spec() -> ModelSpec:
    """The tiny model as a llmcalc spec: 4 layers, cross-attention at 1 and 3, one image of 2 tiles' 5 tokens."""
    tower = tiled_tower(MLLAMA_TINY_VISION)
    t = MLLAMA_TINY_TEXT
    slots = [{"mixer": "cross_attention" if i in t["cross_attention_layers"] else "attention"} for i in range(4)]
    return ModelSpec.model_validate(dict(
        name="tiny-mllama", vocab_size=300, d_model=64, n_layers=4, max_seq_len=4096, tie_embeddings=False,
        embedding_extra_rows=8,
        norm=dict(kind="rmsnorm"), positions=dict(kind="rope"), attention=dict(kind="gqa", heads=4, kv_heads=2,
                                                                              head_dim=16),
        ffn=dict(kind="gated", d_ff=96, activation="silu"),
        mixers={"cross_attention": dict(kind="cross", heads=4, kv_heads=2, head_dim=16,
                                        image_tokens=tower.tokens(28, 56), image_width=64)},
        hybrid_pattern=slots, vision=tower.model_dump()))


def test_mllama_flops_per_image_equal_flop_counter_on_transformers():
    """A tiny mllama tower (28 px tiles of 2 × 2 patches, up to 2 tiles, 3 local + 2 global layers, eager attention)
    under FlopCounterMode: its vision_model and multi_modal_projector on one image as the processor gives it
    (pixel_values padded to max tiles, aspect_ratio_ids, aspect_ratio_mask); parameters too."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    model, v = tiny_mllama()
    tower = tiled_tower(v)
    vision = [p for n, p in model.named_parameters() if "vision_model" in n or "multi_modal_projector" in n]
    assert sum(tower.params(64).values()) == sum(p.numel() for p in vision)
    inputs = dict(pixel_values=torch.randn(1, 1, 2, 3, 28, 28), aspect_ratio_ids=torch.tensor([[2]]),
                  aspect_ratio_mask=torch.tensor([[[1, 1]]]))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model.model.vision_model(**inputs).last_hidden_state  # (1, 1, T, N + 1, c·d)
        states = model.model.multi_modal_projector(out)
    assert states.reshape(-1, 64).shape[0] == tower.tokens(28, 56)
    assert sum(tower.flops(28, 56, 64).values()) == counter.get_total_flops()


def test_mllama_preset_params_equal_transformers(mllama_11b):
    """The llama-3.2-11b-vision spec (tests/fixtures) against transformers' MllamaForConditionalGeneration of the
    checkpoint's config on the meta device: the vision tower and projector exactly (895,028,755); the language
    model exactly (9,775,192,080, embed_tokens' 8 extra rows included: embedding_extra_rows, 8 × 4096), the token
    embedding (128,264 × 4096) and the LM head (128,256 × 4096) each exactly; the 8 cross-attention layers' own
    parameters exactly."""
    m = mllama_11b
    vision = sum(p.numel() for n, p in m.named_parameters() if "vision_model" in n or "multi_modal_projector" in n)
    language = sum(p.numel() for p in m.parameters()) - vision
    r = params(load_spec_file(MLLAMA_SPEC))
    assert r.vision == vision == 895_028_755
    assert r.language == language == 9_775_192_080
    rows = {row.component: row.params for row in r.breakdown}
    assert rows["embedding/token"] == m.get_input_embeddings().weight.numel() == 128_264 * 4096
    assert rows["lm_head"] == m.lm_head.weight.numel() == 128_256 * 4096
    cross = sum(p.numel() for n, p in m.named_parameters() if ".cross_attn" in n or "cross_attn_" in n)
    assert cross == sum(row.params for row in r.breakdown if row.component.startswith("cross_attention/"))


def test_mllama_prefill_flops_and_cache_equal_transformers():
    """The tiny mllama's whole forward (vision tower, projector, 4 text layers of which 2 cross-attention, logits
    of every position) on a 12-token prompt with one 2-tile image, as the processor gives it (pixel_values padded to
    max tiles, aspect_ratio_ids, aspect_ratio_mask, cross_attention_mask): FlopCounterMode's total is llmcalc's
    prefill (dense attention, all logits) plus the tower's FLOPs per image (5,247,488). The cache transformers
    builds: the self-attention layers 12 tokens, the cross-attention layers the image's 2 × 5 tokens, each K and V
    of 2 kv heads × 16 in fp32: kv's bytes_per_token × 12 + state_bytes_per_sequence. The spec's parameters are
    the model's, embed_tokens' 8 extra rows included."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from llmcalc.costs.kv import kv_cache

    model, _ = tiny_mllama()
    spec, seq = tiny_mllama_spec(), 12
    ids = torch.randint(3, 290, (1, seq))
    ids[0, 2] = 299  # the image token
    inputs = dict(input_ids=ids, pixel_values=torch.randn(1, 1, 2, 3, 28, 28), aspect_ratio_ids=torch.tensor([[2]]),
                  aspect_ratio_mask=torch.tensor([[[1, 1]]]),
                  cross_attention_mask=torch.ones(1, seq, 1, 2, dtype=torch.long))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model(**inputs, use_cache=True)
    assert params(spec).total == sum(p.numel() for p in model.parameters())
    f = flops(spec, Workload(seq=seq, attention_core="dense", logits="all"))
    assert f.prefill_flops + f.vision.flops_per_image == counter.get_total_flops() == 5_247_488
    measured = sum(t.nbytes for layer in out.past_key_values.layers for t in (layer.keys, layer.values))
    kv = kv_cache(spec, Workload(seq=seq, kv_dtype="fp32"))
    assert kv.state_bytes_per_sequence == 2 * 2 * 10 * 2 * 16 * 4
    assert kv.total_bytes == kv.bytes_per_token * seq + kv.state_bytes_per_sequence == measured


def test_mllama_kv_and_images(cli_json):
    """The 11B's cross cache: 8 layers × 2 × 6,404 image tokens × 8 kv heads × 128 × 2 bytes = 209,846,272 bytes a
    sequence, whatever the prompt's length: one image without --images (the spec's image_tokens), N times that
    with --images N; the prompt holds no image tokens (image_tokens 0: cross-attention reads them)."""
    one = cli_json("kv", "--config", str(MLLAMA_SPEC), "--seq", "8192")
    assert one["state_bytes_per_sequence"] == 8 * 2 * 6404 * 8 * 128 * 2 == 209_846_272
    assert one["bytes_per_token"] == 32 * 2 * 8 * 128 * 2
    for n in (1, 3):
        r = cli_json("kv", "-p", "llama-3.2-11b-vision", "--seq", "100", "--images", str(n))
        assert r["state_bytes_per_sequence"] == n * 209_846_272 and r["image_tokens"] == 0
        assert r["total_bytes"] == 100 * r["bytes_per_token"] + n * 209_846_272


def test_mllama_images_follow_the_workload(cli_json):
    """--images N on the 11B: each image adds 6,404 image tokens to every cross layer (k, v projected once, every
    text token attends to them), the tower's FLOPs once per image, its cache to memory, and a decode step reads
    the larger cache; a 100-token prompt with 3 images is fine (the images are not in the prompt)."""
    spec = load_preset("llama-3.2-11b-vision")
    f = [flops(spec, Workload(seq=1000, images=n)) for n in (1, 2)]
    d, kv, heads, tokens = 4096, 8 * 128, 32 * 128, 6404
    assert f[1].prefill_flops - f[0].prefill_flops == 8 * (2 * tokens * 2 * d * kv + 2 * 1000 * tokens * heads * 2)
    assert f[1].decode_flops - f[0].decode_flops == 8 * 4 * tokens * heads
    assert f[1].vision.flops == 2 * f[0].vision.flops == 2 * 19_001_986_418_688
    assert flops(spec, Workload(seq=1000)).prefill_flops == f[0].prefill_flops
    m = [cli_json("memory", "-p", "llama-3.2-11b-vision", "--seq", "100", "--images", str(n)) for n in (1, 3)]
    assert m[1]["kv_cache_bytes"] - m[0]["kv_cache_bytes"] == 2 * 209_846_272
    t = [cli_json("latency", "-p", "llama-3.2-11b-vision", "--gpu", "h100-sxm", "--seq", "100", "--gen", "10",
                  "--images", str(n)) for n in (1, 3)]
    assert t[1]["ttft_s"] > t[0]["ttft_s"] and t[1]["tpot_s"] > t[0]["tpot_s"]
    assert t[1]["kv_bytes_per_gpu"] - t[0]["kv_bytes_per_gpu"] == 2 * 209_846_272


def test_mllama_two_images_equal_transformers():
    """The tiny mllama on a 12-token prompt with two 2-tile images (pixel_values (1, 2, 2, 3, 28, 28), as the
    processor pads them): the cache transformers leaves holds 2 × 2 × 5 = 20 image tokens in each cross layer,
    equal to kv's total with --images 2 (fp32), and FlopCounterMode's total over the whole forward is llmcalc's
    prefill (dense attention, all logits) plus the tower's FLOPs for the 2 images."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from llmcalc.costs.kv import kv_cache

    model, _ = tiny_mllama()
    spec, seq = tiny_mllama_spec(), 12
    ids = torch.randint(3, 290, (1, seq))
    ids[0, 2] = ids[0, 6] = 299  # the image tokens
    inputs = dict(input_ids=ids, pixel_values=torch.randn(1, 2, 2, 3, 28, 28),
                  aspect_ratio_ids=torch.tensor([[2, 3]]), aspect_ratio_mask=torch.tensor([[[1, 1], [1, 1]]]),
                  cross_attention_mask=torch.ones(1, seq, 2, 2, dtype=torch.long))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model(**inputs, use_cache=True)
    measured = sum(t.nbytes for layer in out.past_key_values.layers for t in (layer.keys, layer.values))
    w = Workload(seq=seq, kv_dtype="fp32", images=2, image_size=(28, 56))
    kv = kv_cache(spec, w)
    assert kv.state_bytes_per_sequence == 2 * 2 * 20 * 2 * 16 * 4
    assert kv.total_bytes == kv.bytes_per_token * seq + kv.state_bytes_per_sequence == measured
    f = flops(spec, Workload(seq=seq, attention_core="dense", logits="all", images=2, image_size=(28, 56)))
    assert f.prefill_flops + f.vision.flops == counter.get_total_flops()


def test_tiled_tower_survives_a_dump():
    """A spec's model_dump keeps the tiled tower's own fields (validate's scaled copies and YAML round-trips rebuild
    the spec from it); the reference tower refuses a tiled one with the field named."""
    spec = load_spec_file(MLLAMA_SPEC)
    assert ModelSpec.model_validate(spec.model_dump()) == spec
    assert spec.model_dump()["vision"]["max_tiles"] == 4
    pytest.importorskip("torch")
    from llmcalc.errors import UserError
    from llmcalc.reference.vision import measure_image

    with pytest.raises(UserError, match="vision.kind"):
        measure_image(spec.vision, spec.d_model, 560, 560)


def test_mllama_hf_import_equals_the_spec_file(tmp_path):
    """--hf-config on the 11B's config.json fields (model_type mllama, its text and vision configs) builds the spec
    file's model: the same tower, cross-attention mixer, 5-layer cycle and 8 extra embedding rows, 10,670,220,835
    parameters."""
    raw = dict(model_type="mllama", vision_config=MLLAMA_11B_VISION,
               text_config=dict(model_type="mllama_text_model", **MLLAMA_11B_TEXT))
    (tmp_path / "config.json").write_text(json.dumps(raw))
    spec, want = load_hf_config(tmp_path), load_spec_file(MLLAMA_SPEC)
    assert (spec.vision, spec.mixers, spec.hybrid_pattern) == (want.vision, want.mixers, want.hybrid_pattern)
    assert spec.embedding_extra_rows == want.embedding_extra_rows == 8
    assert params(spec).total == params(want).total == 10_670_220_835
    bad = dict(raw, text_config=dict(raw["text_config"], cross_attention_layers=[3, 99]))
    (tmp_path / "config.json").write_text(json.dumps(bad))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and "cross_attention_layers" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_mllama_tiny_hf_import_equals_transformers(tmp_path):
    """The tiny mllama's config imported: its vision tower and projector as transformers counts them, exactly;
    its language model too, embed_tokens' 8 extra rows (8 × 64) included."""
    pytest.importorskip("torch")
    model, _ = tiny_mllama()
    raw = dict(model_type="mllama", vision_config=MLLAMA_TINY_VISION,
               text_config=dict(model_type="mllama_text_model", **MLLAMA_TINY_TEXT))
    (tmp_path / "config.json").write_text(json.dumps(raw))
    r = params(load_hf_config(tmp_path))
    vision = sum(p.numel() for n, p in model.named_parameters() if "vision_model" in n or "multi_modal_projector" in n)
    assert r.vision == vision
    assert r.language == sum(p.numel() for p in model.parameters()) - vision


def test_embedding_extra_rows_refuses_a_tied_head(tmp_path):
    """A tied head shares the embedding's rows, so extra rows there are refused with the field named (exit 2)."""
    spec = load_spec_file(MLLAMA_SPEC).model_dump(mode="json") | {"tie_embeddings": True}
    path = tmp_path / "tied.json"
    path.write_text(json.dumps(spec))
    r = run_cli("params", "--config", str(path))
    assert r.returncode == 2 and "embedding_extra_rows" in r.stderr and len(r.stderr.strip().splitlines()) == 1
