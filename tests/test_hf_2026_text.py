"""The text decoders and MoEs of 2025–26 that --hf-config reads (starcoder2, cohere2, olmoe, glm4_moe, minimax_m2,
dbrx, exaone4, seed_oss, smollm3, olmo3, ernie4_5_moe, hunyuan_v1_moe, apertus (xIELU), and Kimi-K2 built as
deepseek_v3) against transformers' own models:

- parameters (total and active) of the real configs of ../shared/model-configs-2026/ (skipped when absent), built
  on the meta device;
- on a tiny config of each type: parameters, prefill FLOPs under FlopCounterMode (dense attention, all and last
  logits) and the bytes of transformers' own KV cache after a prompt longer than the sliding window.

DBRX's expert loop has no meta-device kernel: its tiny model runs on the CPU. Its experts are one fused tensor per
projection of shape (experts · ffn_hidden_size, d), so one expert's size is read off that tensor here.
"""

from __future__ import annotations

import json

import pytest
from conftest import write_config

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.params import params
from llmcalc.errors import UserError
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from hf_counts import SHARED_MODELS, build_config, transformers_counts  # noqa: E402
from hf_flops import build_meta_model, cache_tensors, kv_cache_bytes, prefill_flops  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

SHARED = SHARED_MODELS

_SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=1024, pad_token_id=0, bos_token_id=0, eos_token_id=0)
TINY = {
    "starcoder2": dict(_SMALL, num_hidden_layers=2, sliding_window=48, use_bias=True),
    "cohere2": dict(_SMALL, num_hidden_layers=4, sliding_window=48),
    "olmoe": dict(_SMALL, num_hidden_layers=2, intermediate_size=32, num_experts=8, num_experts_per_tok=2),
    "glm4_moe": dict(_SMALL, num_hidden_layers=3, head_dim=32, attention_bias=True, moe_intermediate_size=32,
                     n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1,
                     use_qk_norm=True, partial_rotary_factor=0.5, n_group=1, topk_group=1),
    "minimax_m2": dict(_SMALL, num_hidden_layers=2, head_dim=32, intermediate_size=32, num_local_experts=8,
                       num_experts_per_tok=2),
    "exaone4": dict(_SMALL, num_hidden_layers=4, sliding_window=48, sliding_window_pattern=4),
    "seed_oss": dict(_SMALL, num_hidden_layers=2, head_dim=32, attention_bias=True, attention_out_bias=True,
                     mlp_bias=True),
    "smollm3": dict(_SMALL, num_hidden_layers=4, use_sliding_window=True, sliding_window=48),
    "olmo3": dict(_SMALL, num_hidden_layers=4, sliding_window=48),
    "ernie4_5_moe": dict(_SMALL, num_hidden_layers=3, moe_intermediate_size=32, moe_num_experts=8, moe_k=2,
                         moe_num_shared_experts=2, moe_layer_start_index=1),
    "hunyuan_v1_moe": dict(_SMALL, num_hidden_layers=2, intermediate_size=32, num_experts=8, moe_topk=2,
                           head_dim=16),
    "apertus": dict(_SMALL, num_hidden_layers=2),
    "kimi_k2": dict(_SMALL, num_hidden_layers=2, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
                    moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1, q_lora_rank=32,
                    kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, n_group=1, topk_group=1,
                    num_nextn_predict_layers=0),
}
"""A tiny model of each type: a 64-wide model with its type's features switched on (biases, q/k norms, shared
experts and a dense first layer, sliding layers of 48 tokens under a longer prompt)."""
DBRX_TINY = dict(vocab_size=512, d_model=64, n_heads=4, n_layers=2, max_seq_len=1024,
                 attn_config=dict(kv_n_heads=2, clip_qkv=8, rope_theta=500000),
                 ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2))
PROMPT = 80
"""Longer than the tiny sliding windows (48)."""


def as_transformers(raw: dict) -> dict:
    """The config transformers builds: Kimi-K2's as DeepSeek-V3 (its model_type is not registered)."""
    return raw | {"model_type": "deepseek_v3"} if raw["model_type"] == "kimi_k2" else raw


def dbrx_counts(raw: dict) -> tuple[int, int]:
    """DBRX's total and active parameters off the built model: its fused expert tensors hold experts · ffn rows."""
    cfg = build_config(raw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    total = sum(p.numel() for p in model.parameters())
    experts, top_k = cfg.ffn_config.moe_num_experts, cfg.ffn_config.moe_top_k
    idle = sum((experts - top_k) * sum(p.numel() for p in block.ffn.experts.parameters()) // experts
               for block in model.transformer.blocks)
    return total, total - idle


def reference_counts(raw: dict) -> tuple[int, int]:
    if raw["model_type"] == "dbrx":
        return dbrx_counts(raw)
    c = transformers_counts(as_transformers(raw))
    return c["total"], c["active"]


@pytest.mark.parametrize("file", sorted(SHARED))
def test_real_config_params_equal_transformers(file, shared):
    path = shared("model-configs-2026") / f"{file}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    r = params(load_hf_config(path))
    assert (r.total, r.active) == reference_counts(raw)


@pytest.mark.parametrize("file", sorted(SHARED))
def test_preset_equals_transformers(file, shared):
    """Each family's flagship preset counts what transformers counts for the shared config.json, and is that file's
    architecture field for field (the checkpoint's storage aside: a preset is bf16)."""
    path = shared("model-configs-2026") / f"{file}.json"
    preset = load_preset(SHARED[file])
    r = params(preset)
    assert (r.total, r.active) == reference_counts(json.loads(path.read_text(encoding="utf-8")))
    skip = {"name", "source", "checkpoint"}
    assert preset.model_dump(exclude=skip) == load_hf_config(path).model_dump(exclude=skip)


@pytest.mark.parametrize("file", sorted(set(SHARED) - {"dbrx-instruct"}))
def test_real_config_prefill_flops_and_kv_equal_transformers(file, shared):
    """The full-size models on the meta device: a prefill of 2 × 512 (last logits) under FlopCounterMode, and the
    cache after a prompt of 8,192 (past Command R7B's and Starcoder2's 4,096-token windows). DBRX: on the CPU,
    tiny (below)."""
    path = shared("model-configs-2026") / f"{file}.json"
    spec = load_hf_config(path)
    model = build_meta_model(as_transformers(json.loads(path.read_text(encoding="utf-8"))))
    w = Workload(batch=2, seq=512, attention_core="dense", logits="last", mla_decode="decompress")
    assert flops(spec, w).prefill_flops == prefill_flops(model, 2, 512, logits="last")["total"]
    seq = min(8192, spec.max_seq_len)
    assert kv_cache(spec, Workload(batch=1, seq=seq, kv_dtype="bf16")).total_bytes == kv_cache_bytes(model, 1, seq)


def tiny(model_type: str) -> dict:
    return {"model_type": model_type} | TINY[model_type]


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_tiny_params_equal_transformers(model_type, tmp_path):
    raw = tiny(model_type)
    r = params(load_hf_config(write_config(tmp_path, raw)))
    assert (r.total, r.active) == reference_counts(raw)


GIVEN = {"hunyuan_v1_moe": {"head_dim": 128}, "dbrx": {"attn_config": {"rope_theta": 10000}},
         "glm4_moe": {"head_dim": 128}}
"""HunYuan's head_dim None fails (head_dim ** -0.5), as does DBRX's attn_config without rope_theta; GLM-4.5's
4096 / 96 heads do not divide, which transformers floors to 42 and llmcalc refuses (its configs give 128)."""


@pytest.mark.parametrize("model_type", sorted(set(TINY) | {"dbrx"}))
def test_defaults_equal_the_config_class(model_type, tmp_path):
    """A config.json of its model_type alone: the import's defaults are the config class's (GIVEN: what
    transformers 5.24 cannot build its class defaults without)."""
    raw = {"model_type": model_type} | GIVEN.get(model_type, {})
    r = params(load_hf_config(write_config(tmp_path, raw)))
    assert (r.total, r.active) == reference_counts(raw)


@pytest.fixture(scope="module")
def meta_models():
    return {}


def meta_model(cache: dict, model_type: str):
    if model_type not in cache:
        cache[model_type] = build_meta_model(as_transformers(tiny(model_type)))
    return cache[model_type]


@pytest.mark.parametrize("logits", ["all", "last"])
@pytest.mark.parametrize("model_type", sorted(TINY))
def test_tiny_prefill_flops_equal_flop_counter(model_type, logits, tmp_path, meta_models):
    spec = load_hf_config(write_config(tmp_path, tiny(model_type)))
    w = Workload(batch=2, seq=PROMPT, attention_core="dense", logits=logits)
    measured = prefill_flops(meta_model(meta_models, model_type), 2, PROMPT, logits=logits)["total"]
    assert flops(spec, w).prefill_flops == measured


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_tiny_kv_bytes_equal_transformers_cache(model_type, tmp_path, meta_models):
    spec = load_hf_config(write_config(tmp_path, tiny(model_type)))
    ours = kv_cache(spec, Workload(batch=2, seq=PROMPT, kv_dtype="bf16")).total_bytes
    assert ours == kv_cache_bytes(meta_model(meta_models, model_type), 2, PROMPT)


def test_sliding_layers_keep_less_than_the_prompt(tmp_path):
    """The tiny cohere2's three sliding layers in four hold 47 positions of the 80 (the cache test's point)."""
    spec = load_hf_config(write_config(tmp_path, tiny("cohere2")))
    assert (spec.sliding_window, spec.layer_pattern) == (48, ["sliding", "sliding", "sliding", "full"])


@pytest.fixture(scope="module")
def dbrx_cpu():
    """The tiny DBRX on the CPU in fp32 (its expert loop cannot run on meta), and one prefill of it."""
    torch.manual_seed(0)
    cfg = build_config({"model_type": "dbrx"} | DBRX_TINY)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    return model.eval().requires_grad_(False)


@pytest.mark.parametrize("logits", ["all", "last"])
def test_dbrx_prefill_flops_equal_flop_counter(logits, tmp_path, dbrx_cpu):
    spec = load_hf_config(write_config(tmp_path, {"model_type": "dbrx"} | DBRX_TINY))
    ids = torch.randint(0, 512, (2, PROMPT))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), counter:  # the math path: two bmm FlopCounterMode counts
        dbrx_cpu(input_ids=ids, use_cache=False, logits_to_keep=1 if logits == "last" else 0)
    w = Workload(batch=2, seq=PROMPT, attention_core="dense", logits=logits)
    assert flops(spec, w).prefill_flops == counter.get_total_flops()


def test_dbrx_kv_bytes_equal_transformers_cache(tmp_path, dbrx_cpu):
    spec = load_hf_config(write_config(tmp_path, {"model_type": "dbrx"} | DBRX_TINY))
    with torch.no_grad():
        out = dbrx_cpu(input_ids=torch.zeros(2, PROMPT, dtype=torch.long), use_cache=True, logits_to_keep=1)
    measured = sum(t.numel() * t.element_size() for t in cache_tensors(out.past_key_values))
    assert kv_cache(spec, Workload(batch=2, seq=PROMPT, kv_dtype="fp32")).total_bytes == measured


def test_dbrx_tiny_params_equal_transformers(tmp_path):
    r = params(load_hf_config(write_config(tmp_path, {"model_type": "dbrx"} | DBRX_TINY)))
    assert (r.total, r.active) == dbrx_counts({"model_type": "dbrx"} | DBRX_TINY)


def test_kimi_k2_is_read_as_deepseek_v3(tmp_path):
    kimi = load_hf_config(write_config(tmp_path, tiny("kimi_k2"), "kimi"))
    deepseek = load_hf_config(write_config(tmp_path, tiny("kimi_k2") | {"model_type": "deepseek_v3"}, "deepseek"))
    assert kimi.model_dump(exclude={"name", "source"}) == deepseek.model_dump(exclude={"name", "source"})
    assert kimi.attention.kind == "mla"


@pytest.mark.parametrize(("raw", "field"), [
    ({"model_type": "exaone4", "sliding_window": 64, "sliding_window_pattern": "LLLG"}, "sliding_window_pattern"),
    ({"model_type": "dbrx", "attn_config": [1]}, "attn_config"),
    ({"model_type": "dbrx", "ffn_config": {"moe_top_k": 0}}, "ffn_config.moe_top_k"),
    ({"model_type": "smollm3", "num_hidden_layers": 4, "no_rope_layers": [1, 1, 0]}, "no_rope_layers"),
    ({"model_type": "olmo3", "num_hidden_layers": 2, "layer_types": ["full_attention"]}, "layer_types"),
    ({"model_type": "ernie4_5_moe", "use_bias": True}, "use_bias"),
    ({"model_type": "ernie4_5_moe", "num_hidden_layers": 4, "moe_layer_interval": 2}, "moe_layer_interval"),
    ({"model_type": "ernie4_5_moe", "moe_layer_end_index": -2}, "moe_layer_end_index"),
    ({"model_type": "hunyuan_v1_moe", "moe_topk": [2, 4]}, "moe_topk"),
])
def test_bad_fields_are_refused_by_name(raw, field, tmp_path):
    with pytest.raises(UserError, match=field):
        load_hf_config(write_config(tmp_path, raw))


def test_hunyuan_top_k_per_layer_of_one_value_is_that_value(tmp_path):
    listed = load_hf_config(write_config(tmp_path, tiny("hunyuan_v1_moe") | {"moe_topk": [2, 2]}, "listed"))
    assert listed.ffn.top_k == 2
    assert listed.model_dump(exclude={"name", "source"}) == load_hf_config(
        write_config(tmp_path, tiny("hunyuan_v1_moe"))).model_dump(exclude={"name", "source"})


def test_exaone4_without_a_window_is_all_full(tmp_path):
    spec = load_hf_config(write_config(tmp_path, tiny("exaone4") | {"sliding_window": None, "sliding_window_pattern": None}))
    assert (spec.sliding_window, spec.layer_pattern) == (None, ["full"])


@pytest.mark.parametrize("grad", [True, False])
def test_reference_xielu_is_transformers(grad):
    """llmcalc's torch xIELU (llmcalc/reference/layers.py: in place when serving) computes transformers' own."""
    from llmcalc.reference.layers import XIELU
    from transformers.activations import XIELUActivation

    theirs, ours = XIELUActivation(dtype=torch.float32), XIELU()
    with torch.no_grad():
        ours.a_p.copy_(theirs.alpha_p)
        ours.a_n.copy_(theirs.alpha_n)
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(0)) * 3
    x[0, 0, :3] = torch.tensor([0.0, -5e-7, 1e-7])  # the ε clamp's neighbourhood
    with torch.set_grad_enabled(grad):
        got = ours(x.clone())
    assert torch.allclose(got, theirs._xielu_python(x), rtol=1e-6, atol=1e-5)


def test_apertus_reference_model_validates(tmp_path, cli_json):
    """The reference torch model built from the imported spec (xIELU's two scalars a layer included) agrees with
    the estimates: parameters, FLOPs, KV cache and peak memory."""
    r = cli_json("validate", "--hf-config", str(write_config(tmp_path, tiny("apertus"))))
    assert r["ok"], [row for row in r["rows"] if not row["ok"]]
    assert next(row for row in r["rows"] if row["quantity"] == "params")["measured"] == reference_counts(
        tiny("apertus"))[0]
