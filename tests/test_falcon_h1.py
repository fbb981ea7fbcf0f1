"""Falcon-H1 (attention and a Mamba-2 mixer side by side in every layer: the `parallel` mixer) against
transformers' own FalconH1ForCausalLM: parameters of the model built on the meta device (tiny, and the config's
defaults), the bytes of its own cache after a prefill on CPU (each layer: K and V of every token plus one SSM and
conv state per sequence), and FlopCounterMode over a prefill (the torch paths, SDPA's math backend).
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

TINY = {"model_type": "falcon_h1", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "mamba_d_ssm": 64, "mamba_n_heads": 8, "mamba_n_groups": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
        "mamba_chunk_size": 8, "embedding_multiplier": 2.0, "attention_out_multiplier": 0.5}
"""Three layers; a Mamba of 8 heads × 8 (mamba_d_head auto), chunks of 8 so that a 19-token prompt pads one."""
LAYERS, CONV_CHANNELS, K = 3, 64 + 2 * 2 * 16, 4


def hf_config(raw=TINY):
    return transformers.FalconH1Config(**{k: v for k, v in raw.items() if k != "model_type"})


def load(tmp_path, raw):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return load_hf_config(path)


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return load(tmp_path_factory.mktemp("falcon_h1"), TINY)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return transformers.FalconH1ForCausalLM(hf_config()).eval()


def test_every_layer_is_one_parallel_group(spec):
    (group,) = spec.layer_groups()
    assert (group.count, group.mixer_name, group.mixer.kind, group.ffn.kind) == (3, "parallel", "parallel", "gated")


@pytest.mark.parametrize("raw", [TINY, TINY | {"mamba_rms_norm": True, "mamba_proj_bias": True, "projectors_bias": True,
                                               "attention_bias": True, "mlp_bias": True, "head_dim": 32},
                                 {"model_type": "falcon_h1"}])
def test_params_equal_transformers_on_meta(tmp_path, raw):
    with torch.device("meta"):
        m = transformers.FalconH1ForCausalLM(hf_config(raw))
    assert params(load(tmp_path, raw)).total == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("seq", [19, 40])
def test_cache_is_attention_kv_plus_a_state_per_sequence(spec, model, seq):
    batch = 2
    with torch.no_grad():
        cache = model(torch.randint(0, 100, (batch, seq)), use_cache=True).past_key_values
    held = sum(t.nbytes for t in cache_tensors(cache))
    assert kv_bytes(spec, batch, seq, "fp32") == held
    kv = kv_cache(spec, Workload(batch=batch, seq=seq, kv_dtype="fp32"))
    assert kv.bytes_per_token == LAYERS * 2 * 2 * 16 * 4  # K and V of 2 kv heads × 16, fp32, in each layer
    assert kv.state_bytes_per_sequence == LAYERS * (64 * 16 + CONV_CHANNELS * K) * 4
    assert batch * seq * kv.bytes_per_token + batch * kv.state_bytes_per_sequence == held


def test_prefill_flops_equal_flop_counter(spec, model):
    batch, seq = 2, 19
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        model(torch.randint(0, 100, (batch, seq)), use_cache=False)
    measured = fc.get_total_flops()
    ours = flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).prefill_flops
    # nn.Conv1d with padding K − 1 computes K − 1 outputs per sequence more than the mixer keeps (docs/mamba.md)
    assert ours + 2 * CONV_CHANNELS * K * (K - 1) * batch * LAYERS == measured


def test_decode_state_does_not_grow_but_kv_does(spec):
    short, long = (kv_cache(spec, Workload(batch=1, seq=s)) for s in (100, 10_000))
    assert short.state_bytes_per_sequence == long.state_bytes_per_sequence > 0
    assert long.total_bytes - short.total_bytes == 9_900 * short.bytes_per_token
