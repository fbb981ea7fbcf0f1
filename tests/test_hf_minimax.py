"""MiniMax-Text-01 / MiniMax-M1 (model_type `minimax`: lightning attention on most layers, softmax GQA on the
`full_attention` layers of layer_types, an MoE in every layer) against transformers 5.24's MiniMaxForCausalLM:

- parameters (total and active) of the real architecture recorded in tests/fixtures/hf_architectures.yaml and of
  its preset, and of a tiny config, built on the meta device;
- the bytes of transformers' own MiniMaxCache after a prompt (each lightning layer's state [B, H, h, h] in the
  values' dtype beside the softmax layers' keys and values);
- prefill and decode FLOPs under FlopCounterMode on the tiny config. For lightning attention transformers runs,
  per head, a prompt in blocks of block_size tokens (the last block short, not padded): q·kᵀ and the decayed
  scores times v (n × n per block, the causal decay applied element-wise), the decayed queries times the state
  and kᵀ·v into the state (one [h, h] product per token each, the first block reading the zero state); a token
  after a cache is one recurrent step, kᵀ·v into the state and q times it. Every one is an aten.bmm; the
  projections, router and head are aten.mm;
- the reference module (llmcalc/reference/lightning.py) with transformers' weights gives its output, and the
  reference decoder measured under FakeTensorMode has the estimators' counts;
- what the import refuses: a sliding window, an attn_type_list that transformers would not read.
"""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Layout, Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from conftest import assert_reference_counts  # noqa: E402
from hf_counts import fixture_config, transformers_counts  # noqa: E402
from hf_flops import cache_tensors, counted, rows  # noqa: E402

TINY = {"model_type": "minimax", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 48,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_local_experts": 6, "num_experts_per_tok": 2, "block_size": 16, "max_position_embeddings": 256,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}
"""Three lightning layers then one softmax layer; blocks of 16 tokens, so 7, 16 and 37 tokens are one short block,
one full block, and two full blocks with a short one."""
LINEAR_CORE = ("core_scores", "core_values", "core_state_read", "core_first_read", "core_state_update",
               "core_final_update", "core_state_output")
MATMULS = ("linear/qkv_proj", "linear/output_gate", "linear/out_proj", "ffn/router", "attention/q", "attention/k",
           "attention/v", "attention/o", "lm_head")


def write(tmp_path, raw: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return load_hf_config(write(tmp_path_factory.mktemp("minimax"), TINY))


def hf_config(raw: dict = TINY):
    return transformers.MiniMaxConfig(**{k: v for k, v in raw.items() if k != "model_type"})


def hf_model(device: str = "cpu"):
    torch.manual_seed(0)
    with torch.device(device):
        m = transformers.MiniMaxForCausalLM(hf_config()).eval()
    m.set_experts_implementation("batched_mm")  # tokens · top_k expert MLPs, as bmm
    return m


# ---- parameters ------------------------------------------------------------------------------------------------


def test_tiny_pattern_and_params_equal_transformers_on_meta(spec):
    assert [(g.count, g.mixer_name) for g in spec.layer_groups()] == [(3, "linear"), (1, "attention")]
    theirs = transformers_counts(TINY)
    assert (params(spec).total, params(spec).active) == (theirs["total"], theirs["active"])


def test_default_layer_types_alternate_from_full(tmp_path):
    """Without layer_types MiniMaxConfig makes even layers full attention and odd ones lightning."""
    raw = {k: v for k, v in TINY.items() if k != "layer_types"}
    ours = load_hf_config(write(tmp_path, raw))
    assert [ours.layer_groups(i, i + 1)[0].mixer_name for i in range(4)] == ["attention", "linear"] * 2
    theirs = transformers_counts(raw)
    assert (params(ours).total, params(ours).active) == (theirs["total"], theirs["active"])


def test_real_architecture_and_preset_equal_transformers(hf_fixture):
    """MiniMax-Text-01 (80 layers, 70 lightning + 10 softmax, 32 experts top 2): 456,089,655,296 parameters,
    the technical report's 456B; 45,944,920,064 active without the embedding and the head, its 45.9B."""
    theirs = transformers_counts(fixture_config("minimax-text-01"))
    for spec in (load_hf_config(hf_fixture("minimax-text-01")), load_preset("minimax-text-01")):
        r = params(spec)
        assert (r.total, r.active) == (theirs["total"], theirs["active"])
    assert theirs["total"] == 456_089_655_296
    assert theirs["active"] - 2 * 200064 * 6144 == 45_944_920_064


def test_preset_is_the_import_of_its_config(hf_fixture):
    imported = load_hf_config(hf_fixture("minimax-text-01"))
    preset = load_preset("minimax-text-01")
    keep = ("name", "source", "checkpoint")
    assert imported.model_dump(exclude=set(keep)) == preset.model_dump(exclude=set(keep))


# ---- cache ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("seq", [7, 37])
def test_cache_is_softmax_kv_plus_lightning_states(spec, seq, dtype):
    m = hf_model().to({"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    with torch.no_grad():
        cache = m(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
    states = [t for t in cache.linear_cache if isinstance(t, torch.Tensor)]
    assert [tuple(t.shape) for t in states] == [(2, 4, 16, 16)] * 3
    assert kv_bytes(spec, 2, seq, dtype) == sum(t.nbytes for t in cache_tensors(cache))


# ---- FLOPs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [7, 16, 37])
def test_prefill_flops_equal_flop_counter(spec, seq):
    batch, m = 2, hf_model()
    measured = counted(lambda: m(torch.randint(0, 100, (batch, seq)), use_cache=False))
    ours = rows(spec, batch, seq, "prefill")
    assert sum(ours[k] for k in MATMULS) == measured["aten.mm"]
    lightning = sum(ours.get(f"linear/{k}", 0) for k in LINEAR_CORE)
    softmax = ours["attention/core_scores"] + ours["attention/core_values"]
    assert lightning + softmax + ours["ffn/experts"] == measured["aten.bmm"]
    assert set(measured) == {"aten.mm", "aten.bmm"}


def test_blocked_terms_follow_the_short_last_block(spec):
    """37 tokens in blocks of 16: blocks of 16, 16 and 5, so Σ n² = 537 (padding would give 768)."""
    r = rows(spec, 1, 37, "prefill")
    h, dh = 4, 16
    assert r["linear/core_scores"] == 3 * 2 * h * dh * (16 * 16 + 16 * 16 + 5 * 5)
    assert r["linear/core_first_read"] == 3 * 2 * h * dh * dh * 16
    assert r["linear/core_final_update"] == 3 * 2 * h * dh * dh * 5


@pytest.mark.parametrize("seq", [7, 37])
def test_decode_flops_equal_flop_counter(spec, seq):
    """One token after a prompt of `seq`: the lightning layers' recurrent step, the softmax layer over seq + 1 keys."""
    batch, m = 2, hf_model()
    with torch.no_grad():
        cache = m(torch.randint(0, 100, (batch, seq)), use_cache=True).past_key_values
    measured = counted(lambda: m(torch.randint(0, 100, (batch, 1)), cache=cache, use_cache=True))
    ours = rows(spec, batch, seq, "decode")
    assert sum(ours[k] for k in MATMULS) == measured["aten.mm"]
    lightning = sum(ours.get(f"linear/{k}", 0) for k in LINEAR_CORE)
    softmax = ours["attention/core_scores"] + ours["attention/core_values"]
    assert lightning + softmax + ours["ffn/experts"] == measured["aten.bmm"]


# ---- the reference --------------------------------------------------------------------------------------------


def test_reference_lightning_computes_what_transformers_does(spec):
    from transformers.models.minimax.modeling_minimax import MiniMaxLightningAttention

    from llmcalc.reference.layers import Step
    from llmcalc.reference.model import Decoder

    torch.manual_seed(0)
    theirs = MiniMaxLightningAttention(hf_config(), layer_idx=0).eval()
    ours = Decoder(spec).layers[0].attn  # layer 0 is a lightning layer
    hf = dict(theirs.named_parameters())
    names = {"qkv_proj.weight": "qkv_proj.weight", "output_gate.weight": "output_gate.weight",
             "norm_weight": "norm.weight", "out_proj.weight": "out_proj.weight"}
    assert set(names) == {n for n, _ in ours.named_parameters()}
    with torch.no_grad():
        for mine, p in ours.named_parameters():
            p.copy_(hf[names[mine]] + (0.1 * torch.randn(p.shape) if mine == "norm_weight" else 0))
            hf[names[mine]].copy_(p)
        ours.layer, ours.layers = 0, 4  # the decay of layer 0 of 4
        x = torch.randn(2, 37, 64)  # blocks of 16, 16 and 5
        want, _ = theirs(x, None, None)
        torch.testing.assert_close(ours(x, None, Step(0, None, None, False)), want, rtol=1e-4, atol=1e-4)
        cache = [torch.zeros(s) for s in ours.cache_shapes(2, 37)]
        steps = [ours(x[:, :33], cache, Step(0, None, None, False))]
        steps += [ours(x[:, t:t + 1], cache, Step(t, None, None, False)) for t in range(33, 37)]
        torch.testing.assert_close(torch.cat(steps, 1), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seq", [7, 37])
def test_reference_decoder_matches_estimators(spec, seq):
    """The reference decoder under FakeTensorMode: parameters, prefill, decode and training FLOPs, cache bytes."""
    assert_reference_counts(spec, 2, seq)


def test_explain_matches_the_plain_commands_on_the_preset():
    """`llmcalc explain` writes the lightning terms (docs/lightning.md) that give the estimators' figures."""
    from test_explain import check_topics

    check_topics(load_preset("minimax-text-01"), kv=Workload(batch=64, seq=32768),
                 flops=Workload(batch=2, seq=5000, gen=7), train=Workload(seq=1024, train=True, optimizer="adamw-8bit"),
                 latency=Workload(batch=4, seq=8192, gen=64, layout=Layout(tp=8)))


# ---- refusals -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, field", [
    (TINY | {"sliding_window": 8}, "sliding_window"),
    ({k: v for k, v in TINY.items() if k != "layer_types"} | {"attn_type_list": [0, 0, 0, 1]}, "attn_type_list"),
    (TINY | {"block_size": 0}, "block_size"),
    (TINY | {"layer_types": ["linear_attention"] * 3}, "layer_types"),
])
def test_refusals_are_one_line_exit_2(tmp_path, cli, raw, field):
    r = cli("params", "--hf-config", str(write(tmp_path, raw)))
    assert r.returncode == 2, r.stderr
    assert field in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
