"""This year's vision-language families through `--hf-config`, each figure against transformers 5.x itself:

- parameters (total and active, and the split into language model and vision tower + projector) of the real
  config.json (../shared/model-configs-2026/, read through conftest's `shared`; skipped where absent), built by
  transformers on the meta device;
- FLOPs per image: FlopCounterMode around transformers' own get_image_features on a tiny config of the same
  model_type (eager attention, so the attention core's matmuls are counted), and the reference tower
  (llmcalc/reference/vision.py) measured the same way;
- the language model's prefill FLOPs (FlopCounterMode over the whole vision-language model on a text prompt, SDPA's
  math backend) and its cache (the bytes transformers' own cache holds after a prefill), on the same tiny configs.
"""

from __future__ import annotations

import json
import warnings

import pytest
from conftest import run_cli

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config, spec_dict_from_hf
from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")

from hf_counts import SHARED_CONFIGS, transformers_counts  # noqa: E402
from hf_flops import cache_tensors  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

TEXT = dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16)
QWEN3_VISION = dict(depth=3, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=64, patch_size=16,
                    spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                    deepstack_visual_indexes=[0, 2])
QWEN3_ROPE = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True}
QWEN3_IDS = dict(image_token_id=299, video_token_id=298, vision_start_token_id=297, vision_end_token_id=296)
TINY = {
    "qwen3_vl": dict(model_type="qwen3_vl", **QWEN3_IDS, vision_config=QWEN3_VISION,
                     text_config=dict(model_type="qwen3_vl_text", rope_scaling=QWEN3_ROPE, **TEXT)),
    "qwen3_vl_moe": dict(model_type="qwen3_vl_moe", **QWEN3_IDS, vision_config=QWEN3_VISION,
                         text_config=dict(model_type="qwen3_vl_moe_text", rope_scaling=QWEN3_ROPE, num_experts=8,
                                          num_experts_per_tok=2, moe_intermediate_size=32, **TEXT)),
    "glm4v": dict(model_type="glm4v", image_token_id=299, video_token_id=298, image_start_token_id=297,
                  image_end_token_id=296, video_start_token_id=295, video_end_token_id=294,
                  text_config=dict(model_type="glm4v_text", **{k: v for k, v in TEXT.items() if k != "head_dim"},
                                   rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2],
                                                    "partial_rotary_factor": 0.5}),
                  vision_config=dict(depth=3, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=64,
                                     patch_size=14, spatial_merge_size=2, temporal_patch_size=2, image_size=56)),
}
"""Tiny configs of each model_type: Qwen3-VL with 3 encoder layers, DeepStack mergers after layers 0 and 2, a 4 × 4
position table resampled to the image's grid; its MoE form with 8 experts, 2 routed per token; GLM-4V with 3
encoder layers, a 4 × 4 position table, the 2 × 2 downsample conv and the merger's gated MLP of 48."""
IMAGE = {"qwen3_vl": (160, 224), "qwen3_vl_moe": (300, 200), "glm4v": (140, 196)}
"""An image per tiny model: 160 × 224 px is under Qwen3-VL's min_pixels (65,536), so the processor's resize grows
it to a 14 × 20 grid; 300 × 200 px to 20 × 14; GLM-4V's 140 × 196 px to 10 × 14 patches."""


def _model(raw: dict, **kwargs):
    raw = dict(raw)
    mt = raw.pop("model_type")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoModelForImageTextToText.from_config(
            transformers.AutoConfig.for_model(mt, **raw), **kwargs).eval()


def _split(raw: dict) -> tuple[int, int]:
    """(language model, vision tower + projector) parameters of transformers' model on the meta device."""
    with torch.device("meta"):
        m = _model(raw)
    language = sum(p.numel() for n, p in m.named_parameters() if "language_model" in n or n.startswith("lm_head"))
    return language, sum(p.numel() for p in m.parameters()) - language


# Parameters of the real configs --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SHARED_CONFIGS))
def test_real_config_params_equal_transformers(name, shared):
    path = shared("model-configs-2026") / SHARED_CONFIGS[name]
    raw = json.loads(path.read_text(encoding="utf-8"))
    r = params(load_hf_config(path))
    want = transformers_counts(raw)
    assert (r.total, r.active) == (want["total"], want["active"])
    assert (r.language, r.vision) == (_split(raw) if "vision_config" in raw else (r.total, 0))
    preset = params(load_preset(name))
    assert preset.model_dump(exclude={"model"}) == r.model_dump(exclude={"model"})


def test_published_totals():
    """Model cards: Qwen3-VL-4B-Instruct 4.44B parameters, Qwen3-VL-30B-A3B 31.1B (3B active: 3.9B with the vision
    tower and the embeddings), LFM2-1.2B 1,170,340,608."""
    assert params(load_preset("lfm2-1.2b")).total == 1_170_340_608
    assert round(params(load_preset("qwen3-vl-4b")).total / 1e9, 2) == 4.44
    big = params(load_preset("qwen3-vl-30b-a3b"))
    assert (round(big.total / 1e9, 1), round(big.active / 1e9, 1)) == (31.1, 3.9)


# Tiny configs: the tower, the language model's prefill and its cache -------------------------------------------

@pytest.mark.parametrize("name", sorted(TINY))
def test_tower_flops_equal_flop_counter_on_transformers(name):
    raw = TINY[name]
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name=name))
    tower, (height, width) = spec.vision, IMAGE[name]
    model = _model(raw, attn_implementation="eager")
    language, vision = _split(raw)
    assert (params(spec).language, params(spec).vision) == (language, vision)
    assert sum(tower.params(64).values()) == vision
    gh, gw = tower.grid(height, width)
    inputs = dict(pixel_values=torch.randn(gh * gw, tower.patch_inputs), image_grid_thw=torch.tensor([[1, gh, gw]]))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model.model.get_image_features(**inputs)
    assert torch.cat(list(out.pooler_output)).shape[0] == tower.tokens(height, width)
    assert len(getattr(out, "deepstack_features", None) or []) == len(getattr(tower.projector, "deepstack_layers", []))
    assert sum(tower.flops(height, width, 64).values()) == counter.get_total_flops()


@pytest.mark.parametrize("name", sorted(TINY))
def test_reference_tower_equals_transformers(name):
    """The reference tower (llmcalc/reference/vision.py), built from the imported spec, against transformers' tower:
    the same parameters, FlopCounterMode FLOPs and image tokens."""
    from llmcalc.reference.vision import measure_image

    raw = TINY[name]
    tower = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name=name)).vision
    n_params, n_flops, tokens = measure_image(tower, 64, *IMAGE[name])
    assert n_params == _split(raw)[1]
    assert (n_flops, tokens) == (sum(tower.flops(*IMAGE[name], 64).values()), tower.tokens(*IMAGE[name]))


@pytest.mark.parametrize("name,size,images", [("qwen3-vl-4b", (512, 512), 1), ("qwen3-vl-4b", (1080, 1920), 1),
                                              ("qwen3-vl-30b-a3b", (333, 517), 3)])
def test_tower_peak_equals_the_reference_tower_measured(name, size, images):
    """The tower's activation peak (VisionTower.activation_bytes) against the live bytes of the reference tower on
    SDPA encoding `images` images at full size on fake tensors (validate's LiveBytes): equal, the three DeepStack
    outputs (3·T·D, kept from their layers to the end) included: 30,146,560 B for one 512-px image of the 4B."""
    from llmcalc.reference.vision import image_peak

    spec = load_preset(name)
    measured = image_peak(spec.vision, spec.d_model, *size, images=images)
    assert measured == images * spec.vision.activation_bytes(*size, spec.d_model, 2)


@pytest.mark.parametrize("name", sorted(TINY))
def test_prefill_flops_and_cache_equal_transformers(name):
    """A text prompt through the whole vision-language model (2 × 19 tokens): FlopCounterMode on SDPA's math backend
    (the full S × S scores: attention_core dense; every position's logits) and the bytes of its cache in fp32."""
    raw = TINY[name]
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name=name))
    moe = "num_experts" in raw["text_config"]
    model = _model(raw, attn_implementation="sdpa", **({"experts_implementation": "batched_mm"} if moe else {}))
    batch, seq = 2, 19
    ids = torch.randint(0, 290, (batch, seq), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, use_cache=False)
    ours = flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).prefill_flops
    assert ours == counter.get_total_flops()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = model(input_ids=ids, use_cache=True, logits_to_keep=1).past_key_values
    assert kv_bytes(spec, batch, seq, "fp32") == sum(t.nbytes for t in cache_tensors(cache))


@pytest.mark.parametrize("name", sorted(TINY))
def test_tower_peak_on_real_tensors(name):
    """The tiny towers run for real on the CPU in fp32, 2 images: the reference's live-byte peak within 4% under the
    estimate (as tests/test_vision.py explains: the real CPU flash kernel's output needs no (n, d) copy to gather the
    heads, which the estimate counts); Qwen3-VL's tiny towers 3,915,520 B measured, 4,014,080 B estimated; GLM-4V's
    peak is its projector's, equal."""
    from llmcalc.reference.vision import image_peak

    tower = ModelSpec.model_validate(spec_dict_from_hf(dict(TINY[name]), name=name)).vision
    measured = image_peak(tower, 64, *IMAGE[name], images=2, dtype=torch.float32, device="cpu")
    estimate = 2 * tower.activation_bytes(*IMAGE[name], 64, 4)
    assert 0.96 * estimate <= measured <= estimate, (measured, estimate)


@pytest.mark.parametrize("size", [(28, 28), (100, 100), (333, 517), (1080, 1920), (4000, 6000), (50, 9000),
                                  (29, 3000)])
def test_glm4v_grid_follows_the_processor(size):
    """GLM-4V's resize (transformers' glm4v smart_resize with its image processor's defaults, t = 2 frames) against
    the tower's grid: the same resized height and width."""
    from transformers.models.glm4v.image_processing_pil_glm4v import smart_resize

    tower = ModelSpec.model_validate(spec_dict_from_hf({"model_type": "glm4v"}, name="glm4v")).vision
    want = smart_resize(2, *size, temporal_factor=2, factor=28, min_pixels=112 * 112, max_pixels=28 * 28 * 15000)
    assert tuple(14 * g for g in tower.grid(*size)) == want


def test_glm4v_defaults_equal_transformers():
    """Glm4vConfig's defaults (GLM-4.1V-9B's shape): the import of a config that names only its model_type."""
    spec = ModelSpec.model_validate(spec_dict_from_hf({"model_type": "glm4v"}, name="glm4v"))
    r = params(spec)
    assert (r.language, r.vision) == _split({"model_type": "glm4v"})


@pytest.mark.parametrize("mt", ["qwen3_vl", "qwen3_vl_moe"])
def test_qwen3_vl_defaults_are_refused(tmp_path, mt):
    """Qwen3VLConfig's defaults pair a 3,584-wide merger output with a 4,096-wide language model (Qwen3VLMoeConfig's
    with a 2,048-wide one): a model that cannot run. The import refuses it in one line rather than size one side."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": mt}))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and "out_hidden_size 3584" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# Refusals ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,vision,field", [
    ("glm4v", {"attention_bias": True}, "attention_bias"),
    ("glm4v", {"temporal_patch_size": 3}, "temporal_patch_size"),
    ("qwen3_vl", {"deepstack_visual_indexes": [0, 3]}, "deepstack_visual_indexes"),
    ("qwen3_vl", {"out_hidden_size": 32}, "out_hidden_size"),
    ("qwen3_vl_moe", {"num_position_embeddings": 0}, "num_position_embeddings"),
])
def test_bad_vision_config_is_two(tmp_path, name, vision, field):
    raw = dict(TINY[name], vision_config=dict(TINY[name]["vision_config"], **vision))
    (tmp_path / "config.json").write_text(json.dumps(raw))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and field in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# Granite 4.0-H (granitemoehybrid): Mamba-2 and attention layers, each with an MoE beside a shared MLP ------------

GRANITE = dict(model_type="granitemoehybrid", vocab_size=100, hidden_size=64, intermediate_size=32, num_hidden_layers=5,
               num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
               shared_intermediate_size=48, layer_types=["mamba", "mamba", "attention", "mamba", "attention"],
               mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=16, mamba_d_head="auto", mamba_d_conv=4,
               mamba_expand=2, mamba_chunk_size=8, max_position_embeddings=256, position_embedding_type="nope")
"""Five layers (three Mamba-2 of 8 heads × 16, two attention), 4 experts with 2 routed per token and the shared MLP;
chunks of 8 so that a 19-token prompt pads one."""


@pytest.mark.parametrize("change", [{}, {"position_embedding_type": "rope", "tie_word_embeddings": True},
                                    {"num_local_experts": 0}])
def test_granite_params_equal_transformers(change):
    raw = dict(GRANITE, **change)
    r = params(ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name="granite")))
    want = transformers_counts(raw)
    assert (r.total, r.active) == (want["total"], want["active"])


@pytest.mark.parametrize("pos", ["nope", "rope"])
def test_granite_prefill_flops_and_cache_equal_transformers(pos):
    """FlopCounterMode over a 2 × 19-token prefill (experts on batched_mm, so that their matmuls are counted; SDPA's
    math backend) and the bytes of the cache: the attention layers' K and V, each Mamba layer's conv and SSM state."""
    raw = dict(GRANITE, position_embedding_type=pos)
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name="granite"))
    config = transformers.AutoConfig.for_model(**raw)
    model = transformers.AutoModelForCausalLM.from_config(config, experts_implementation="batched_mm").eval()
    batch, seq = 2, 19
    ids = torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), warnings.catch_warnings(), sdpa_kernel(SDPBackend.MATH), \
            FlopCounterMode(display=False) as counter:
        warnings.simplefilter("ignore")
        model(ids, use_cache=False)
    ours = flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).prefill_flops
    # nn.Conv1d with padding K − 1 computes K − 1 outputs per sequence more than the mixer keeps (docs/mamba.md)
    k, channels = 4, 8 * 16 + 2 * 2 * 16
    assert ours + 2 * channels * k * (k - 1) * batch * 3 == counter.get_total_flops()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = model(ids, use_cache=True, logits_to_keep=1).past_key_values
    assert kv_bytes(spec, batch, seq, "fp32") == sum(t.nbytes for t in cache_tensors(cache))


def test_granite_layers_and_bad_layer_types(tmp_path):
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(GRANITE), name="granite"))
    groups = {(g.mixer_name if g.mixer else None, g.ffn.kind): g.count for g in spec.layer_groups()}
    assert groups == {("mamba", "moe"): 3, ("attention", "moe"): 2}
    (tmp_path / "config.json").write_text(json.dumps(dict(GRANITE, layer_types=["mamba"] * 4)))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and "layer_types" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# LFM2 (lfm2): gated short-conv layers and attention ------------------------------------------------------------

LFM2 = dict(model_type="lfm2", vocab_size=100, hidden_size=64, intermediate_size=192, num_hidden_layers=5,
            num_attention_heads=4, num_key_value_heads=2, full_attn_idxs=[1, 4], conv_L_cache=3,
            max_position_embeddings=256)
"""Five layers: attention at 1 and 4, the gated short conv (3 taps) elsewhere; the MLP's width int(2 · 192 / 3) = 128,
rounded up to 256 (block_multiple_of)."""


def _lfm2_model(raw: dict):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**raw)).eval()


@pytest.mark.parametrize("change", [{}, {"conv_bias": True, "tie_word_embeddings": False},
                                    {"block_ff_dim": 300, "block_ffn_dim_multiplier": 1.5, "block_multiple_of": 64},
                                    {"block_auto_adjust_ff_dim": False, "layer_types": ["conv"] * 4 + ["full_attention"]}])
def test_lfm2_params_equal_transformers(change):
    raw = dict(LFM2, **change)
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name="lfm2"))
    assert params(spec).total == transformers_counts(raw)["total"]


@pytest.mark.parametrize("bias", [False, True])
def test_lfm2_prefill_flops_and_cache_equal_transformers(bias):
    """FlopCounterMode over a 2 × 19-token prefill (SDPA's math backend) less the conv's K − 1 padded outputs per
    sequence (its nn.Conv1d pads both ends), and the bytes of transformers' cache: each attention layer's K and V,
    each conv layer's last K inputs (B, d, K)."""
    raw = dict(LFM2, conv_bias=bias)
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name="lfm2"))
    model = _lfm2_model(raw)
    batch, seq = 2, 19
    ids = torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), warnings.catch_warnings(), sdpa_kernel(SDPBackend.MATH), \
            FlopCounterMode(display=False) as counter:
        warnings.simplefilter("ignore")
        model(ids, use_cache=False)
    ours = flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).prefill_flops
    k, d, conv_layers = 3, 64, 3
    assert ours + 2 * d * k * (k - 1) * batch * conv_layers == counter.get_total_flops()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = model(ids, use_cache=True, logits_to_keep=1).past_key_values
    assert kv_bytes(spec, batch, seq, "fp32") == sum(t.nbytes for t in cache_tensors(cache))
    assert kv_bytes(spec, batch, seq, "fp32") == 2 * (2 * seq * 2 * 2 * 16 + conv_layers * d * k) * 4


def test_lfm2_reference_conv_computes_what_transformers_does():
    """The reference's short-conv module (llmcalc/reference/short_conv.py) with the weights of transformers'
    Lfm2ShortConv gives its output, for the prompt and for one-token steps after a cache."""
    from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

    from llmcalc.reference.layers import Step
    from llmcalc.reference.model import Decoder

    raw = dict(LFM2, conv_bias=True)
    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(raw), name="lfm2"))
    torch.manual_seed(0)
    theirs = Lfm2ShortConv(transformers.AutoConfig.for_model(**raw), layer_idx=0).eval()
    ours = Decoder(spec).layers[0].attn  # layer 0 is a conv layer
    hf = dict(theirs.named_parameters())
    names = {"conv_weight": "conv.weight", "conv_bias": "conv.bias"}
    with torch.no_grad():
        for mine, p in ours.named_parameters():
            p.copy_(hf[names.get(mine, mine)].reshape(p.shape))
        x = torch.randn(2, 19, 64)
        want = theirs(x)
        torch.testing.assert_close(ours(x, None, Step(0, None, None, False)), want, rtol=1e-5, atol=1e-5)
        cache = [torch.zeros(s) for s in ours.cache_shapes(2, 19)]
        steps = [ours(x[:, :15], cache, Step(0, None, None, False))]
        steps += [ours(x[:, t:t + 1], cache, Step(t, None, None, False)) for t in range(15, 19)]
        torch.testing.assert_close(torch.cat(steps, 1), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_lfm2_reference_matches_estimators(bias):
    """The reference decoder built from the spec, measured under FakeTensorMode: parameters, prefill, decode and
    training FLOPs and cache bytes equal the estimators'."""
    from llmcalc.costs.kv import kv_cache
    from llmcalc.reference.measure import measure

    spec = ModelSpec.model_validate(spec_dict_from_hf(dict(LFM2, conv_bias=bias), name="lfm2"))
    batch, seq = 2, 19
    m = measure(spec, batch, seq, "fake")
    f = flops(spec, Workload(batch=batch, seq=seq, gen=1, attention_core="dense", logits="last"))
    want = dict(params_total=params(spec).language, prefill_flops=f.prefill_flops, decode_flops=f.decode_flops,
                train_flops=f.train_flops, kv_bytes=kv_cache(spec, Workload(batch=batch, seq=seq)).total_bytes)
    assert {k: getattr(m, k) for k in want} == want


@pytest.mark.parametrize("field,value", [("full_attn_idxs", "2"), ("layer_types", ["conv"] * 4),
                                         ("block_ff_dim", -3)])
def test_lfm2_bad_config_is_two(tmp_path, field, value):
    (tmp_path / "config.json").write_text(json.dumps(dict(LFM2, **{field: value})))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and field in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# Refused model_types -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [{"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text"}}])
def test_refused_types_name_what_is_missing(tmp_path, raw):
    """The multimodal Gemma 3n (its language model alone, gemma3n_text, imports: tests/test_hf_gemma3n.py)."""
    (tmp_path / "config.json").write_text(json.dumps(raw))
    r = run_cli("params", "--hf-config", str(tmp_path))
    assert r.returncode == 2 and "not modelled" in r.stderr and raw["model_type"] in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
