"""Llama 4 (`llama4`, `llama4_text`) as --hf-config reads it, against transformers 5.24's own model:

- parameters, total and active, of Scout's config.json (../shared/model-configs-2026/, skipped when absent), of
  Maverick's text config (as published: 48 layers, 128 experts on every second layer) and of tiny configs, built on
  the meta device. transformers' Llama4TextExperts run every token through all experts (the unchosen ones with a
  zero router score), so "active" is counted off the built model as total − (E − top_k) · one expert's weights per
  MoE layer (tests/hf_counts.py), not by watching which experts compute;
- the chunked layers' (query, key) pairs against a brute-force count of transformers' own chunked causal mask
  function (masking_utils.chunked_causal_mask_function);
- the bytes of transformers' cache after a prompt longer than a (tiny) chunk;
- prefill FLOPs under FlopCounterMode on tiny configs. FlopCounterMode sees the experts' work as transformers does
  it, all E experts for every token; what is compared is llmcalc's prefill (top_k experts per token, attention
  dense) plus the unchosen experts' matmuls, (E − top_k) · 2 · B · S · 3 · d · f per MoE layer, written out here
  from the config's fields.
"""

from __future__ import annotations

import json

import pytest

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

SCOUT = "llama-4-scout-17b-16e-instruct"
MAVERICK_TEXT = dict(
    model_type="llama4_text", attention_bias=False, attention_chunk_size=8192, head_dim=128, hidden_act="silu",
    hidden_size=5120, interleave_moe_layer_step=2, intermediate_size=8192, intermediate_size_mlp=16384,
    max_position_embeddings=1048576, num_attention_heads=40, num_experts_per_tok=1, num_hidden_layers=48,
    num_key_value_heads=8, num_local_experts=128, rms_norm_eps=1e-05, rope_theta=500000.0, tie_word_embeddings=False,
    use_qk_norm=False, vocab_size=202048)
"""Llama-4-Maverick-17B-128E-Instruct's text_config: the fields of the copy in TensorRT-LLM's
tests/unittest/_torch/modeling/test_modeling_llama_min_latency.py (github.com/NVIDIA/TensorRT-LLM, commit b35ac1b),
which trims it to 2 layers "from 48 layers" and sets no_rope_layer_interval 2; both restored here."""

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


def write(tmp_path, raw: dict, name: str = "tiny"):
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(raw))
    return folder


def tiny(name: str) -> dict:
    return {"model_type": "llama4_text"} | TINY[name]


def text_of(raw: dict) -> dict:
    """The language model's config of a `llama4` config.json, as transformers builds Llama4ForCausalLM."""
    return {"model_type": "llama4_text"} | raw["text_config"]


def counts(raw: dict) -> tuple[int, int]:
    c = transformers_counts(raw)
    return c["total"], c["active"]


def test_scout_params_equal_transformers(shared):
    path = shared("model-configs-2026") / f"{SCOUT}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    r = params(load_hf_config(path))
    assert (r.total, r.active) == counts(text_of(raw)) == (107_769_861_120, 17_172_894_720)


def test_scout_preset_is_the_config(shared):
    path = shared("model-configs-2026") / f"{SCOUT}.json"
    skip = {"name", "source", "checkpoint"}
    assert load_preset("llama4-scout").model_dump(exclude=skip) == load_hf_config(path).model_dump(exclude=skip)


def test_maverick_preset_equals_transformers(tmp_path):
    """Maverick's preset counts what transformers builds from its text config: the model card's 400B / 17B."""
    preset = load_preset("llama4-maverick")
    r = params(preset)
    assert (r.total, r.active) == counts(MAVERICK_TEXT)
    assert round(r.total / 1e9) == 401 and round(r.active / 1e9) == 17
    skip = {"name", "source", "checkpoint"}
    assert preset.model_dump(exclude=skip) == load_hf_config(write(tmp_path, MAVERICK_TEXT)).model_dump(exclude=skip)


def test_layer_kinds_follow_the_config(tmp_path):
    """Maverick: three chunked RoPE layers and a full NoPE one, dense and MoE FFNs alternating."""
    spec = load_preset("llama4-maverick")
    pattern = [(s.mixer, s.ffn) for s in spec.hybrid_pattern]
    assert pattern == [("chunked", "dense"), ("chunked", "ffn"), ("chunked", "dense"), ("attention", "ffn")]
    assert spec.mixers["chunked"].chunk == 8192 and spec.ffn.dense_d_ff == 16384
    no_chunk = load_hf_config(write(tmp_path, tiny("scout") | {"attention_chunk_size": None}))
    assert no_chunk.hybrid_pattern is None and not no_chunk.mixers  # every layer full, every FFN the MoE


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_params_equal_transformers(name, tmp_path):
    r = params(load_hf_config(write(tmp_path, tiny(name))))
    assert (r.total, r.active) == counts(tiny(name))


def test_defaults_equal_the_config_class(tmp_path):
    """A config.json of the model_type alone: Llama4TextConfig's defaults (Scout's language model)."""
    raw = {"model_type": "llama4_text"}
    r = params(load_hf_config(write(tmp_path, raw)))
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
    spec = load_hf_config(write(tmp_path, tiny(name)))
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
    spec = load_hf_config(write(tmp_path, tiny(name)))
    w = Workload(batch=2, seq=PROMPT, attention_core="dense", logits=logits)
    measured = prefill_flops(meta_model(meta_models, name), 2, PROMPT, logits=logits)["total"]
    assert flops(spec, w).prefill_flops + idle_expert_flops(tiny(name), 2, PROMPT) == measured


def test_reference_model_validates(tmp_path, cli):
    """The torch reference (llmcalc/reference/chunked.py) on a prompt past two chunk boundaries: every row exact."""
    folder = write(tmp_path, tiny("maverick"))
    r = cli("validate", "--hf-config", str(folder), "--device", "cpu", "--seq", "80")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all rows pass" in r.stdout


@pytest.mark.parametrize(("field", "value"), [("no_rope_layers", [1, 0]), ("layer_types", ["sliding_attention"] * 4),
                                              ("moe_layers", ["1"])])
def test_bad_layer_lists_are_refused(field, value, tmp_path, cli):
    folder = write(tmp_path, tiny("scout") | {field: value})
    r = cli("params", "--hf-config", str(folder))
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_scout_images_are_refused(shared, cli):
    """The tower of a llama4 config is not imported (the spec is the language model): images exit 2 in one line."""
    path = shared("model-configs-2026") / f"{SCOUT}.json"
    r = cli("flops", "--hf-config", str(path), "--images", "1")
    assert r.returncode == 2 and "no vision tower" in r.stderr and len(r.stderr.strip().splitlines()) == 1
