"""Random small configs of each family: llmcalc's import equals transformers' count exactly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmcalc.costs.params import params
from llmcalc.inputs.hf import spec_dict_from_hf
from llmcalc.inputs.presets import spec_from_data

pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")

from hf_counts import build_config, count_model  # noqa: E402

small = st.integers(1, 6)


@st.composite
def gqa_config(draw, model_type: str):
    kv = draw(small)
    heads = kv * draw(st.integers(1, 4))
    head_dim = 2 * draw(st.integers(1, 8))
    cfg = dict(
        model_type=model_type, vocab_size=draw(st.integers(2, 300)), hidden_size=heads * draw(st.integers(1, 16)),
        intermediate_size=draw(st.integers(1, 64)), num_hidden_layers=draw(st.integers(1, 4)),
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
        tie_word_embeddings=draw(st.booleans()),
    )
    if model_type in ("llama", "qwen3", "olmo2", "gpt_oss"):
        cfg["attention_bias"] = draw(st.booleans())
    if model_type == "llama":
        cfg["mlp_bias"] = draw(st.booleans())
    if model_type in ("mixtral", "qwen3_moe", "gpt_oss"):
        experts = draw(st.integers(1, 8))
        cfg |= dict(num_experts_per_tok=draw(st.integers(1, experts)), moe_intermediate_size=draw(small))
        cfg["num_local_experts" if model_type != "qwen3_moe" else "num_experts"] = experts
        if model_type == "qwen3_moe":
            cfg["decoder_sparse_step"] = draw(st.integers(1, 3))
    if model_type in ("gemma2", "gpt_oss", "mistral"):
        cfg["sliding_window"] = draw(st.integers(1, 64))
    return cfg


@st.composite
def deepseek_config(draw):
    experts, heads = draw(st.integers(1, 8)), draw(small)
    return dict(
        model_type=draw(st.sampled_from(["deepseek_v2", "deepseek_v3"])), vocab_size=draw(st.integers(2, 300)),
        hidden_size=heads * draw(st.integers(1, 16)), intermediate_size=draw(st.integers(1, 64)),
        num_hidden_layers=draw(st.integers(1, 4)), num_attention_heads=heads,
        q_lora_rank=draw(st.none() | st.integers(1, 16)), kv_lora_rank=draw(st.integers(1, 16)),
        qk_nope_head_dim=draw(st.integers(1, 8)), qk_rope_head_dim=2 * draw(st.integers(1, 4)),
        v_head_dim=draw(st.integers(1, 8)), n_routed_experts=experts, n_group=1, topk_group=1,
        num_experts_per_tok=draw(st.integers(1, experts)), moe_intermediate_size=draw(st.integers(1, 16)),
        n_shared_experts=draw(st.integers(0, 2)), first_k_dense_replace=draw(st.integers(0, 2)),
        tie_word_embeddings=draw(st.booleans()),
    )


@st.composite
def gpt2_config(draw):
    heads = draw(small)
    return dict(model_type="gpt2", vocab_size=draw(st.integers(2, 300)), n_embd=heads * draw(st.integers(1, 8)),
                n_layer=draw(st.integers(1, 4)), n_head=heads, n_positions=draw(st.integers(1, 64)),
                n_inner=draw(st.none() | st.integers(1, 64)))


families = st.one_of(
    *(gqa_config(t) for t in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "olmo2",
                              "phi3", "gpt_oss")),
    deepseek_config(),
    gpt2_config(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(families)
def test_random_config_matches_transformers(raw):
    import torch
    from transformers import AutoModelForCausalLM

    if raw["model_type"] == "phi3":  # phi3 derives head_dim from hidden_size / heads
        raw = dict(raw, hidden_size=raw["num_attention_heads"] * raw.pop("head_dim"))
    cfg = build_config(dict(raw, pad_token_id=None, bos_token_id=None, eos_token_id=None))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    expected = count_model(model, cfg)
    r = params(spec_from_data(spec_dict_from_hf(raw, name="random"), "random"))
    assert (r.total, r.active) == (expected["total"], expected["active"]), raw
