"""Hybrid layer patterns (`hybrid_pattern`: each layer's mixer and FFN) against transformers' own hybrids.

Nemotron-H (each layer ONE block: Mamba-2 'M', attention '*' or MLP '-'): parameters of the model built on the
meta device, the bytes of its own cache after a prefill on CPU (attention K/V of the '*' layers only, plus one
SSM and conv state per sequence per 'M' layer), and FlopCounterMode over a prefill.
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

NEMOTRON_H = {"model_type": "nemotron_h", "vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "mamba_num_heads": 8,
              "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4, "chunk_size": 8,
              "hybrid_override_pattern": "M-M*-M-", "max_position_embeddings": 256}
"""Seven layers, three Mamba-2, one attention, three MLP; chunks of 8 so that a 19-token prompt pads one."""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("nemotron_h") / "config.json"
    path.write_text(json.dumps(NEMOTRON_H))
    return path


@pytest.fixture(scope="module")
def spec(config):
    return load_hf_config(config)


def hf_config():
    return transformers.NemotronHConfig(**{k: v for k, v in NEMOTRON_H.items() if k != "model_type"})


def test_layers_are_grouped_by_their_one_block(spec):
    groups = {(g.mixer_name if g.mixer else None, g.ffn.kind): g.count for g in spec.layer_groups()}
    assert groups == {("mamba", "none"): 3, (None, "dense"): 3, ("attention", "none"): 1}


def test_params_equal_transformers_on_meta(spec):
    with torch.device("meta"):
        m = transformers.NemotronHForCausalLM(hf_config())
    assert params(spec).total == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("seq", [19, 40])
def test_cache_is_attention_kv_plus_fixed_states(spec, seq):
    """Only the '*' layer's K and V grow with the length; each 'M' layer adds one state per sequence."""
    torch.manual_seed(0)
    m = transformers.NemotronHForCausalLM(hf_config()).eval()
    with torch.no_grad():
        cache = m(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
    held = sum(t.nbytes for t in cache_tensors(cache))
    assert kv_bytes(spec, 2, seq, "fp32") == held
    kv = kv_cache(spec, Workload(batch=2, seq=seq, kv_dtype="fp32"))
    # what grows per token (the '*' layer's K and V) and what each sequence holds whatever its length
    assert 2 * seq * kv.bytes_per_token + 2 * kv.state_bytes_per_sequence == held
    assert kv.bytes_per_token == 2 * 2 * 16 * 4  # one layer: K and V of 2 kv heads × 16, fp32
    rows = {r.layer_type: r for r in kv.per_layer}
    assert rows["full"].layers == 1 and rows["full"].tokens_cached == seq and rows["mamba-2"].layers == 3


def test_prefill_flops_equal_flop_counter(spec):
    batch, seq = 2, 19
    torch.manual_seed(0)
    m = transformers.NemotronHForCausalLM(hf_config()).eval()
    # SDPA's math backend: two bmm over the full S×S scores (the fused CPU kernel is invisible to the counter)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        m(torch.randint(0, 100, (batch, seq)), use_cache=False)
    measured = fc.get_total_flops()
    ours = flops(spec, Workload(batch=batch, seq=seq, logits="all", attention_core="dense")).prefill_flops
    # nn.Conv1d with padding K − 1 computes K − 1 outputs per sequence more than the mixer keeps (docs/mamba.md)
    k, channels = NEMOTRON_H["conv_kernel"], 8 * 16 + 2 * 2 * 16
    assert ours + 2 * channels * k * (k - 1) * batch * 3 == measured


@pytest.mark.parametrize("args", [["memory", "-p", "nemotron-h-8b", "--train", "--lora", "8"],
                                  ["flops", "-p", "jamba-v0.1", "--lora", "8"]])
def test_lora_on_a_hybrid_is_refused_in_one_line(cli, args):
    """LoRA's adapters sit on spec.attention's matrices only: a hybrid is refused (exit 2, no traceback)."""
    r = cli(*args)
    assert r.returncode == 2 and "LoRA does not cover hybrid" in r.stderr and "Traceback" not in r.stderr


def test_validate_takes_a_hybrid_with_layers_that_have_no_mixer():
    """Nemotron-H's MLP layers have no mixer: validate's checks of the mixers skip them (scaled copy, fake)."""
    from llmcalc.inputs.presets import load_preset
    from llmcalc.views.validate import memory_note

    spec = load_preset("nemotron-h-8b")
    assert "peak memory left out" in memory_note(spec)
