"""Jamba (Mamba-1 layers, attention every attn_layer_period, the MoE FFN every expert_layer_period) against
transformers' own JambaForCausalLM: parameters of the model built on the meta device (tiny and Jamba-v0.1's full
config), the bytes of its own cache after a prefill on CPU (attention K/V of the attention layers, one SSM and
conv state per sequence per Mamba layer), and FlopCounterMode over a prefill (the torch paths, SDPA's math
backend).
"""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_bytes, kv_cache
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from hf_flops import cache_tensors  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

TINY = {"model_type": "jamba", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 8,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
        "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 4, "attn_layer_offset": 2,
        "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto", "use_mamba_kernels": False}
"""Eight layers: attention at 2 and 6, Mamba elsewhere; the MoE FFN at the odd layers, a gated MLP at the even
(the attention layers among them)."""
INNER, K, N, MAMBA_LAYERS = 128, 4, 8, 6


def hf_config(raw=TINY):
    return transformers.JambaConfig(**{k: v for k, v in raw.items() if k != "model_type"})


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("jamba") / "config.json"
    path.write_text(json.dumps(TINY))
    return load_hf_config(path)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return transformers.JambaForCausalLM(hf_config()).eval()


def test_pattern_is_the_periods(spec):
    groups = {(g.mixer_name, g.ffn.kind): g.count for g in spec.layer_groups()}
    assert groups == {("mamba", "gated"): 2, ("attention", "gated"): 2, ("mamba", "moe"): 4}


@pytest.mark.parametrize("raw", [TINY, TINY | {"num_experts": 1, "mamba_dt_rank": 5, "mamba_proj_bias": True}])
def test_params_equal_transformers_on_meta(tmp_path, raw):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with torch.device("meta"):
        m = transformers.JambaForCausalLM(hf_config(raw))
    assert params(load_hf_config(path)).total == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("seq", [11, 30])
def test_cache_is_attention_kv_plus_fixed_states(spec, model, seq):
    with torch.no_grad():
        cache = model(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
    held = sum(t.nbytes for t in cache_tensors(cache))
    assert kv_bytes(spec, 2, seq, "fp32") == held
    kv = kv_cache(spec, Workload(batch=2, seq=seq, kv_dtype="fp32"))
    assert kv.bytes_per_token == 2 * 2 * 2 * 16 * 4  # two attention layers: K and V of 2 kv heads × 16, fp32
    assert kv.state_bytes_per_sequence == MAMBA_LAYERS * INNER * (N + K) * 4


def test_prefill_flops_equal_flop_counter(spec, model):
    batch, seq = 2, 11
    model.set_experts_implementation("batched_mm")  # tokens · top_k expert MLPs as bmm (grouped_mm is not counted)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        model(torch.randint(0, 100, (batch, seq)), use_cache=False)
    measured = fc.get_total_flops()
    ours = flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).prefill_flops
    # nn.Conv1d with padding K − 1 computes K − 1 outputs per sequence more than the mixer keeps (docs/mamba.md)
    assert ours + 2 * INNER * K * (K - 1) * batch * MAMBA_LAYERS == measured
