"""Llama 4 (`llama4`, `llama4_text`) as --hf-config reads it, against transformers 5.24's own model:

- parameters, total and active, of Scout's config.json (../shared/model-configs-2026/, skipped when absent), of
  Maverick's config (as published: 48 layers, 128 experts on every second layer, Scout's tower) and of tiny
  configs, built on the meta device. transformers' Llama4TextExperts run every token through all experts (the
  unchosen ones with a zero router score), so "active" is counted off the built model as total − (E − top_k) · one
  expert's weights per MoE layer (tests/hf_counts.py), not by watching which experts compute;
- the chunked layers' (query, key) pairs against a brute-force count of transformers' own chunked causal mask
  function (masking_utils.chunked_causal_mask_function);
- the bytes of transformers' cache after a prompt longer than a (tiny) chunk;
- the vision tower: its tiles per image against Llama4ImageProcessor run on blank images, its image tokens against
  Llama4Processor's prompt layout, its FLOPs per image against FlopCounterMode around transformers' tower and
  projector (a tiny one on the CPU);
- prefill FLOPs under FlopCounterMode on tiny configs. FlopCounterMode sees the experts' work as transformers does
  it, all E experts for every token; what is compared is llmcalc's prefill (top_k experts per token, attention
  dense) plus the unchosen experts' matmuls, (E − top_k) · 2 · B · S · 3 · d · f per MoE layer, written out here
  from the config's fields.
"""

from __future__ import annotations

import json

import pytest
from conftest import explain_checks, write_config

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from hf_counts import transformers_counts  # noqa: E402
from hf_flops import build_meta_model, kv_cache_bytes, prefill_flops  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

SCOUT = "llama-4-scout-17b-16e-instruct"
MAVERICK_TEXT = dict(
    model_type="llama4_text", attention_bias=False, attention_chunk_size=8192, head_dim=128, hidden_act="silu",
    hidden_size=5120, interleave_moe_layer_step=2, intermediate_size=8192, intermediate_size_mlp=16384,
    max_position_embeddings=1048576, num_attention_heads=40, num_experts_per_tok=1, num_hidden_layers=48,
    num_key_value_heads=8, num_local_experts=128, rms_norm_eps=1e-05, rope_theta=500000.0, tie_word_embeddings=False,
    use_qk_norm=False, vocab_size=202048)
VISION = dict(hidden_act="gelu", hidden_size=1408, image_size=336, intermediate_size=5632, num_attention_heads=16,
              num_channels=3, num_hidden_layers=34, patch_size=14, pixel_shuffle_ratio=0.5, projector_input_dim=4096,
              projector_output_dim=4096, rope_theta=10000, vision_output_dim=4096)
MAVERICK = dict(model_type="llama4", text_config={k: v for k, v in MAVERICK_TEXT.items() if k != "model_type"},
                vision_config=VISION)
"""Llama-4-Maverick-17B-128E-Instruct's config: the fields of the copy in TensorRT-LLM's
tests/unittest/_torch/modeling/test_modeling_llama_min_latency.py (github.com/NVIDIA/TensorRT-LLM, commit b35ac1b),
which trims the text model to 2 layers "from 48 layers" (and sets no_rope_layer_interval 2) and the tower to 0 layers
"because we don't need the vision model"; the 48 and 34 layers and the default interval restored here."""

_SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=32, intermediate_size_mlp=96, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, attention_chunk_size=32,
              pad_token_id=0, bos_token_id=0, eos_token_id=0)
TINY = {
    "scout": dict(_SMALL, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=1),
    "maverick": dict(_SMALL, num_hidden_layers=4, num_local_experts=8, num_experts_per_tok=1,
                     interleave_moe_layer_step=2, use_qk_norm=False),
    "top2_nope2": dict(_SMALL, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=2,
                       no_rope_layer_interval=2, attention_bias=True),
    "moe_layers": dict(_SMALL, num_hidden_layers=3, num_local_experts=4, moe_layers=[1],
                       no_rope_layers=[1, 0, 1]),
}
"""Tiny Llama 4 text models: chunks of 32 tokens under an 80-token prompt; Scout's all-MoE layers, Maverick's
interleaved dense and MoE layers, two experts per token with a NoPE layer every second layer and biases, and layers
given as lists (moe_layers, no_rope_layers)."""
PROMPT = 80


def tiny(name: str) -> dict:
    return {"model_type": "llama4_text"} | TINY[name]


def text_of(raw: dict) -> dict:
    """The language model's config of a `llama4` config.json, as transformers builds Llama4ForCausalLM."""
    return {"model_type": "llama4_text"} | raw["text_config"]


def counts(raw: dict) -> tuple[int, int]:
    c = transformers_counts(raw)
    return c["total"], c["active"]


def test_scout_params_equal_transformers(shared):
    """The whole model (Llama4ForConditionalGeneration) and its language model alone (Llama4ForCausalLM)."""
    path = shared("model-configs-2026") / f"{SCOUT}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    r = params(load_hf_config(path))
    assert (r.total, r.active) == counts(raw) == (108_641_793_536, 18_044_827_136)
    language, language_active = counts(text_of(raw))
    assert (r.language, r.active - r.vision) == (language, language_active) == (107_769_861_120, 17_172_894_720)


def test_scout_preset_is_the_config(shared):
    path = shared("model-configs-2026") / f"{SCOUT}.json"
    skip = {"name", "source", "checkpoint"}
    assert load_preset("llama4-scout").model_dump(exclude=skip) == load_hf_config(path).model_dump(exclude=skip)


def test_maverick_preset_equals_transformers(tmp_path):
    """Maverick's preset counts what transformers builds from its config; its language model, the model card's
    400B total / 17B active."""
    preset = load_preset("llama4-maverick")
    r = params(preset)
    assert (r.total, r.active) == counts(MAVERICK)
    assert (r.language, r.active - r.vision) == counts(MAVERICK_TEXT)
    assert round(r.language / 1e9) == 401 and round((r.active - r.vision) / 1e9) == 17
    skip = {"name", "source", "checkpoint"}
    assert preset.model_dump(exclude=skip) == load_hf_config(write_config(tmp_path, MAVERICK)).model_dump(exclude=skip)


def test_layer_kinds_follow_the_config(tmp_path):
    """Maverick: three chunked RoPE layers and a full NoPE one, dense and MoE FFNs alternating."""
    spec = load_preset("llama4-maverick")
    pattern = [(s.mixer, s.ffn) for s in spec.hybrid_pattern]
    assert pattern == [("chunked", "dense"), ("chunked", "ffn"), ("chunked", "dense"), ("attention", "ffn")]
    assert spec.mixers["chunked"].chunk == 8192 and spec.ffn.dense_d_ff == 16384
    no_chunk = load_hf_config(write_config(tmp_path, tiny("scout") | {"attention_chunk_size": None}))
    assert no_chunk.hybrid_pattern is None and not no_chunk.mixers  # every layer full, every FFN the MoE


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_params_equal_transformers(name, tmp_path):
    r = params(load_hf_config(write_config(tmp_path, tiny(name))))
    assert (r.total, r.active) == counts(tiny(name))


def test_defaults_equal_the_config_class(tmp_path):
    """A config.json of the model_type alone: Llama4TextConfig's defaults (Scout's language model)."""
    raw = {"model_type": "llama4_text"}
    r = params(load_hf_config(write_config(tmp_path, raw)))
    assert (r.total, r.active) == counts(raw)


def mask_pairs(new: int, context: int, chunk: int) -> int:
    """(query, key) pairs transformers' chunked causal mask allows for queries context … context+new−1."""
    from transformers.masking_utils import chunked_causal_mask_function

    allow = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    q = torch.arange(context, context + new)[:, None]
    kv = torch.arange(context + new)[None, :]
    return int(allow(0, 0, q, kv).sum())


@pytest.mark.parametrize(("new", "context", "chunk"), [(80, 0, 32), (1, 79, 32), (1, 64, 32), (1, 63, 32),
                                                       (17, 40, 32), (100, 0, 7), (5, 3, 1), (30, 0, 64)])
def test_chunked_pairs_equal_the_mask(new, context, chunk):
    spec = load_preset("llama4-scout")
    attn = spec.mixers["chunked"].model_copy(update={"chunk": chunk})
    assert attn.pairs(new, context, None) == mask_pairs(new, context, chunk)
    assert attn.pairs(new, 0, None, "dense") == new * new  # SDPA over the prefill's whole mask


@pytest.fixture(scope="module")
def meta_models():
    return {}


def meta_model(cache: dict, name: str):
    if name not in cache:
        cache[name] = build_meta_model(tiny(name))
    return cache[name]


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_kv_bytes_equal_transformers_cache(name, tmp_path, meta_models):
    """transformers keeps the last min(S, C − 1) tokens of a chunked layer (a sliding-window cache layer): 31 of 80."""
    spec = load_hf_config(write_config(tmp_path, tiny(name)))
    ours = kv_cache(spec, Workload(batch=2, seq=PROMPT, kv_dtype="bf16")).total_bytes
    assert ours == kv_cache_bytes(meta_model(meta_models, name), 2, PROMPT)


def idle_expert_flops(raw: dict, batch: int, seq: int) -> int:
    """FLOPs transformers spends on the experts a token is not routed to: all E run (Llama4TextExperts' two bmm), so
    (E − top_k) of them per token per MoE layer, each a gated MLP of 3 · d · f weights (2 FLOPs a weight)."""
    n, step = raw["num_hidden_layers"], raw.get("interleave_moe_layer_step", 1)
    moe = raw.get("moe_layers") or range(step - 1, n, step)
    per_token = (raw["num_local_experts"] - raw.get("num_experts_per_tok", 1)) * 2 * 3 * raw["hidden_size"] * \
        raw["intermediate_size"]
    return len(list(moe)) * batch * seq * per_token


@pytest.mark.parametrize("logits", ["all", "last"])
@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_prefill_flops_equal_flop_counter(name, logits, tmp_path, meta_models):
    spec = load_hf_config(write_config(tmp_path, tiny(name)))
    w = Workload(batch=2, seq=PROMPT, attention_core="dense", logits=logits)
    measured = prefill_flops(meta_model(meta_models, name), 2, PROMPT, logits=logits)["total"]
    assert flops(spec, w).prefill_flops + idle_expert_flops(tiny(name), 2, PROMPT) == measured


def test_reference_model_validates(tmp_path, cli):
    """The torch reference (llmcalc/reference/chunked.py) on a prompt past two chunk boundaries: every row exact."""
    folder = write_config(tmp_path, tiny("maverick"))
    r = cli("validate", "--hf-config", str(folder), "--device", "cpu", "--seq", "80")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all rows pass" in r.stdout


@pytest.mark.parametrize(("field", "value"), [("no_rope_layers", [1, 0]), ("layer_types", ["sliding_attention"] * 4),
                                              ("moe_layers", ["1"])])
def test_bad_layer_lists_are_refused(field, value, tmp_path, cli):
    folder = write_config(tmp_path, tiny("scout") | {field: value})
    r = cli("params", "--hf-config", str(folder))
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# The vision tower ---------------------------------------------------------------------------------------------

SIZES = [(336, 336), (200, 300), (500, 800), (1000, 200), (2000, 3000), (700, 1400), (50, 4000), (1080, 1920)]
"""Images (height, width) in pixels: one tile, an upscaled one, and canvases of 2 to 16 tiles."""


def processor_functions() -> dict:
    """find_supported_resolutions and get_best_fit of transformers' image_processing_llama4.py, run from the
    installed file: the module imports torchvision at its top, which the test environment may lack, so only these
    functions (and get_factors, which they call) are compiled out of its source."""
    import ast
    import math
    from collections import defaultdict
    from functools import lru_cache
    from pathlib import Path

    source = Path(transformers.__file__).parent / "models" / "llama4" / "image_processing_llama4.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    wanted = {"get_factors", "find_supported_resolutions", "get_best_fit"}
    module = ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted], [])
    space = {"torch": torch, "math": math, "defaultdict": defaultdict, "lru_cache": lru_cache, "SizeDict": object,
             "__builtins__": __builtins__}
    exec(compile(module, str(source), "exec"), space)  # noqa: S102 - transformers' own installed source
    return space


@pytest.mark.parametrize(("height", "width"), SIZES)
def test_tiles_and_tokens_equal_the_processor(height, width):
    """The canvas: get_best_fit over find_supported_resolutions (max_patches 16, 336-px tiles), as
    Llama4ImageProcessor._preprocess picks it (resize_to_max_canvas false); tiles r·c plus the global tile when r·c
    > 1 (its torch.cat there); image tokens: the <|patch|> tokens of Llama4Processor's prompt layout (144 a tile)."""
    from collections import namedtuple

    from transformers.models.llama4.processing_llama4 import Llama4Processor

    f = processor_functions()
    sizes = torch.tensor(f["find_supported_resolutions"](16, namedtuple("Size", "height width")(336, 336)))
    canvas = f["get_best_fit"]((height, width), sizes, resize_to_max_canvas=False)
    ratio = [int(canvas[0]) // 336, int(canvas[1]) // 336]
    tower = load_preset("llama4-scout").vision
    assert list(tower.tiles(height, width)) == ratio
    assert tower.tile_count(height, width) == ratio[0] * ratio[1] + (ratio[0] * ratio[1] > 1)
    prompt = Llama4Processor._prompt_split_image(None, ratio, 144)
    assert tower.tokens(height, width) == prompt.count("<|patch|>")


TINY_VLM = dict(model_type="llama4", text_config=dict(TINY["maverick"]),
                vision_config=dict(hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   image_size=56, patch_size=14, pixel_shuffle_ratio=0.5, projector_input_dim=48,
                                   projector_output_dim=48, vision_output_dim=48),
                image_processor_config=dict(max_patches=6))
"""A tiny Llama 4: 56-px tiles of a 4 × 4 patch grid (17 encoder tokens with the class token, 4 image tokens), up
to 6 tiles."""


@pytest.mark.parametrize(("height", "width"), [(56, 56), (112, 168), (100, 40), (300, 60)])
def test_tiny_tower_flops_equal_flop_counter(height, width):
    """FlopCounterMode around transformers' tower (get_image_features) and projector over the image's tiles (1; 2 × 3
    and the global tile; 2 × 1 and the global tile; 6 × 1 and the global tile), and the tower's parameters."""
    import warnings

    raw = dict(TINY_VLM)
    spec = load_hf_config_dict(raw)
    tower = spec.vision
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.AutoConfig.for_model("llama4", **{k: v for k, v in raw.items() if k not in (
            "model_type", "image_processor_config")})
        model = transformers.AutoModelForImageTextToText.from_config(cfg, attn_implementation="eager").eval()
    language = sum(p.numel() for n, p in model.named_parameters() if "language_model" in n or n.startswith("lm_head"))
    assert params(spec).vision == sum(p.numel() for p in model.parameters()) - language
    n_tiles = tower.tile_count(height, width)
    pixels = torch.randn(n_tiles, 3, tower.image_size, tower.image_size)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        features = model.get_image_features(pixel_values=pixels).last_hidden_state
        projected = model.multi_modal_projector(features.view(-1, features.size(-1)))
    assert projected.shape == (tower.tokens(height, width), 64)
    assert sum(tower.flops(height, width, 64).values()) == counter.get_total_flops()


def load_hf_config_dict(raw: dict):
    from llmcalc.inputs.hf import spec_dict_from_hf
    from llmcalc.model.spec import ModelSpec

    return ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name="tiny"))


def test_scout_images_cost_tower_flops(shared, cli_json):
    """One 1080 × 1920 image: a 3 × 5 canvas (scale 0.875, the least downscaling) and the global tile, 16 · 144
    image tokens in the prompt; `flops` reports the tower's FLOPs of all 16 tiles."""
    path = shared("model-configs-2026") / f"{SCOUT}.json"
    out = cli_json("flops", "--hf-config", str(path), "--images", "1", "--image-size", "1080x1920", "--seq", "4096")
    tower = load_hf_config(path).vision
    assert tower.tiles(1080, 1920) == (3, 5)
    assert out["vision"]["image_tokens"] == 16 * 144
    assert out["vision"]["flops_per_image"] == sum(tower.flops(1080, 1920, 5120).values())
    assert out["vision"]["flops_per_image"] == 16 * sum(tower.flops(336, 336, 5120).values())


@pytest.mark.parametrize(("field", "value"), [("pixel_shuffle_ratio", 0.3), ("intermediate_size", 100),
                                              ("vision_output_dim", 40)])
def test_tower_widths_that_do_not_chain_are_refused(field, value, tmp_path, cli):
    raw = dict(TINY_VLM, vision_config=dict(TINY_VLM["vision_config"], **{field: value}))
    r = cli("params", "--hf-config", str(write_config(tmp_path, raw)))
    assert r.returncode == 2 and field in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_sweep_point_equals_latency_past_the_first_chunk(cli_json):
    """At 20,000 tokens a decode step reads 8,192 keys of a chunked layer but attends to 20,000 mod 8,192 + 1 of
    them: sweep's point (its decode counts per point) equals latency's step there and `flops`' decode step, whose
    attention core is 20,000 mod 8,192 + 1 = 3,617 pairs per chunked layer, 20,001 per full one."""
    common = ("-p", "llama4-scout", "--batch", "64", "--seq", "20000")
    sweep = cli_json("sweep", *common, "--gpu", "h100-sxm", "--tp", "8")["rows"][0]
    latency = cli_json("latency", *common, "--gpu", "h100-sxm", "--tp", "8")
    assert sweep["tpot_s"] == pytest.approx(latency["tpot_s"], rel=1e-12)
    decode = cli_json("flops", *common)["decode_flops"]
    assert sweep["decode_flops"] == decode
    spec = load_preset("llama4-scout")
    core = 64 * 4 * 40 * 128 * (36 * 3617 + 12 * 20001)  # QKᵀ and AV, 2 · H · h FLOPs a pair each
    assert decode - core == cli_json("flops", "-p", "llama4-scout", "--batch", "64", "--seq", "1")["decode_flops"] - \
        64 * 4 * 40 * 128 * 48 * 2  # the same step at context 1: every layer 2 pairs
    assert spec.mixers["chunked"].pairs(1, 20000, None) == 3617


@pytest.mark.parametrize("topic", ["flops", "memory", "params", "kv"])
def test_explain_agrees_with_the_commands(topic, cli_json):
    """explain works Scout's figures out (chunked layers, the tower's t_img tiles per image) to the plain commands'."""
    out = cli_json("explain", topic, "-p", "llama4-scout", "--seq", "20000", "--images", "2", "--image-size",
                   "1080x1920")
    found = explain_checks(out)
    assert found and all(found)
