"""Gated DeltaNet and Qwen3-Next's hybrid (3 DeltaNet : 1 gated attention, every FFN an MoE with a gated shared
expert) against transformers' Qwen3NextForCausalLM: parameters on the meta device, the bytes of its own cache
after a prefill on CPU, and FlopCounterMode over a prefill (the torch paths: the chunked delta rule, SDPA's math
backend, experts as batched bmm)."""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from hf_flops import cache_tensors  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

QWEN3_NEXT = {"model_type": "qwen3_next", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
              "linear_conv_kernel_dim": 4, "linear_key_head_dim": 8, "linear_num_key_heads": 2,
              "linear_value_head_dim": 16, "linear_num_value_heads": 4, "num_experts": 6, "num_experts_per_tok": 2,
              "moe_intermediate_size": 32, "shared_expert_intermediate_size": 40, "max_position_embeddings": 256}
"""Four layers (three DeltaNet, the fourth attention: full_attention_interval 4); two value heads per key head."""
SCAN = ("core_scores", "core_ut_system", "core_values", "core_state_read", "core_first_read", "core_state_update",
        "core_final_update")
MATMULS = ("linear/in_proj_qkvz", "linear/in_proj_ba", "linear/out_proj", "ffn/router", "ffn/shared_experts",
           "ffn/shared_gate", "attention/q", "attention/k", "attention/v", "attention/o", "lm_head")


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen3_next") / "config.json"
    path.write_text(json.dumps(QWEN3_NEXT))
    return load_hf_config(path)


def hf_model(device: str = "cpu"):
    cfg = transformers.Qwen3NextConfig(**{k: v for k, v in QWEN3_NEXT.items() if k != "model_type"})
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.Qwen3NextForCausalLM(cfg).eval()


def test_pattern_and_params_equal_transformers_on_meta(spec):
    assert [(g.count, g.mixer_name) for g in spec.layer_groups()] == [(3, "linear"), (1, "attention")]
    assert params(spec).total == sum(p.numel() for p in hf_model("meta").parameters())


@pytest.mark.parametrize("seq", [19, 70])
def test_cache_is_attention_kv_plus_fixed_states(spec, seq):
    with torch.no_grad():
        cache = hf_model()(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
    assert kv_bytes(spec, 2, seq, "fp32") == sum(t.nbytes for t in cache_tensors(cache))


@pytest.mark.parametrize("seq", [19, 70])
def test_prefill_flops_equal_flop_counter(spec, seq):
    """Every product FlopCounterMode sees; the UT system's two triangular solves (torch.linalg.solve_triangular)
    are not among them, so core_ut_solve is left out of the comparison."""
    batch, m = 2, hf_model()
    m.set_experts_implementation("batched_mm")  # tokens · top_k expert MLPs, as bmm
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        m(torch.randint(0, 100, (batch, seq)), use_cache=False)
    measured = {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}
    rows = {r.component: r.prefill
            for r in flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).breakdown}
    assert sum(rows[k] for k in MATMULS) == measured["aten.mm"]
    scan = sum(rows[f"linear/{k}"] for k in SCAN)
    attention = rows["attention/core_scores"] + rows["attention/core_values"]
    assert scan + attention + rows["ffn/experts"] == measured["aten.bmm"]
    k, channels = 4, 2 * 2 * 8 + 4 * 16
    assert rows["linear/core_conv"] + 2 * channels * k * (k - 1) * batch * 3 == measured["aten.convolution"]
