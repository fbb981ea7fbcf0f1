"""Mamba-2 against transformers' own Mamba2ForCausalLM (the pure-torch paths, CPU, fp32).

Parameters: the model built on the meta device. State bytes: the conv and recurrent states of the model's own
cache after a prefill. FLOPs: torch's FlopCounterMode over a prefill (every matmul, the chunked scan's einsums,
the conv) and over a decode step's projections.
"""

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
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

TINY = {"model_type": "mamba2", "num_heads": 8, "head_dim": 16, "hidden_size": 64, "state_size": 16,
        "num_hidden_layers": 3, "expand": 2, "n_groups": 2, "conv_kernel": 4, "chunk_size": 8, "vocab_size": 100,
        "use_conv_bias": True, "use_bias": True, "layer_norm_epsilon": 1e-6}
"""Small enough to run on CPU; chunks of 8 so that a 19-token prompt pads its last chunk; biases on; the reference
model's norm epsilon."""
SCAN = ("core_scores", "core_values", "core_chunk_states", "core_state_pass", "core_state_output")


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("mamba2") / "config.json"
    path.write_text(json.dumps(TINY))
    return load_hf_config(path)


@pytest.fixture(scope="module")
def model():
    cfg = transformers.Mamba2Config(**{k: v for k, v in TINY.items() if k != "model_type"})
    torch.manual_seed(0)
    return transformers.Mamba2ForCausalLM(cfg).eval()


def _counted(fn) -> dict[str, int]:
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        fn()
    return {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}


def test_params_equal_transformers_on_meta(spec):
    cfg = transformers.Mamba2Config(**{k: v for k, v in TINY.items() if k != "model_type"})
    with torch.device("meta"):
        m = transformers.Mamba2ForCausalLM(cfg)
    assert params(spec).total == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("seq", [19, 40])
def test_state_bytes_equal_the_models_cache_whatever_the_length(spec, model, seq):
    batch = 2
    with torch.no_grad():
        cache = model(torch.randint(0, 100, (batch, seq)), use_cache=True).past_key_values
    held = sum(t.nbytes for layer in cache.layers for states in (layer.conv_states, layer.recurrent_states)
               for t in states.values())
    assert kv_bytes(spec, batch, seq, "fp32") == held


def test_prefill_flops_equal_flop_counter(spec, model):
    batch, seq = 2, 19
    ids = torch.randint(0, 100, (batch, seq))
    measured = _counted(lambda: model(ids, use_cache=False))
    rows = {r.component: r.prefill for r in flops(spec, Workload(batch=batch, seq=seq, logits="all")).breakdown}
    matmuls = measured["aten.mm"] + measured["aten.addmm"]  # addmm: the projections with a bias
    assert rows["attention/in_proj"] + rows["attention/out_proj"] + rows["lm_head"] == matmuls
    assert sum(rows[f"attention/{k}"] for k in SCAN) == measured["aten.bmm"]
    # nn.Conv1d with padding K − 1 computes S + K − 1 outputs per sequence and the mixer keeps the first S:
    # torch counts the K − 1 dropped ones too
    k, channels = TINY["conv_kernel"], TINY["num_heads"] * TINY["head_dim"] + 2 * TINY["n_groups"] * TINY["state_size"]
    dropped = 2 * channels * k * (k - 1) * batch * TINY["num_hidden_layers"]
    assert rows["attention/core_conv"] + dropped == measured["aten.convolution"]


def test_decode_step_projections_equal_flop_counter(spec, model):
    """A decode step's projections and head; transformers' torch path then runs the chunked scan over one padded
    chunk, which is what llmcalc's scan formula gives for a one-token prompt."""
    batch, seq = 2, 19
    ids = torch.randint(0, 100, (batch, seq))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    measured = _counted(lambda: model(ids[:, :1], past_key_values=cache, use_cache=True))
    decode = {r.component: r.decode for r in flops(spec, Workload(batch=batch, seq=seq)).breakdown}
    matmuls = measured["aten.mm"] + measured["aten.addmm"]
    assert decode["attention/in_proj"] + decode["attention/out_proj"] + decode["lm_head"] == matmuls
    one = {r.component: r.prefill for r in flops(spec, Workload(batch=batch, seq=1)).breakdown}
    assert sum(one[f"attention/{k}"] for k in SCAN) == measured["aten.bmm"]


def test_decode_cost_and_state_do_not_grow_with_context(spec):
    short, long = (flops(spec, Workload(batch=1, seq=s)) for s in (100, 100_000))
    assert short.decode_flops == long.decode_flops
    assert kv_bytes(spec, 1, 100, "bf16") == kv_bytes(spec, 1, 100_000, "bf16") > 0


def test_codestral_mamba_published_total():
    """Mamba-Codestral-7B-v0.1: 7,285,403,648 parameters (the checkpoint's safetensors index, model card "7.29B")."""
    from llmcalc.inputs.presets import load_preset

    assert params(load_preset("mamba-codestral-7b")).total == 7_285_403_648


def test_reference_mixer_computes_what_transformers_does(spec, model):
    """The reference Mamba-2 (llmcalc/reference/state_space.py) with transformers' weights gives its logits: the
    chunked prompt and the recurrent decode steps after it."""
    from llmcalc.reference.model import Decoder

    ours = Decoder(spec)
    theirs = dict(model.named_parameters())
    names = {"embed.weight": "backbone.embeddings.weight", "final_norm.weight": "backbone.norm_f.weight",
             "lm_head.weight": "lm_head.weight"}
    for i in range(spec.n_layers):
        mixer = f"backbone.layers.{i}.mixer."
        names[f"layers.{i}.norms.0.weight"] = f"backbone.layers.{i}.norm.weight"
        for mine, hf in (("in_proj.weight", "in_proj.weight"), ("in_proj.bias", "in_proj.bias"),
                         ("conv_weight", "conv1d.weight"), ("conv_bias", "conv1d.bias"), ("A_log", "A_log"),
                         ("D", "D"), ("dt_bias", "dt_bias"), ("norm.weight", "norm.weight"),
                         ("out_proj.weight", "out_proj.weight"), ("out_proj.bias", "out_proj.bias")):
            names[f"layers.{i}.attn.{mine}"] = mixer + hf
    with torch.no_grad():
        for mine, p in ours.named_parameters():
            p.copy_(theirs[names[mine]].reshape(p.shape) + (0.1 * torch.randn(p.shape) if "norm" in mine else 0))
            theirs[names[mine]].copy_(p.reshape(theirs[names[mine]].shape))  # norms off 1, in both
        ids = torch.randint(0, 100, (2, 19))
        want = model(ids).logits
        torch.testing.assert_close(ours(ids, logits="all"), want, rtol=1e-3, atol=1e-3)
        cache = ours.new_cache(2, 19)
        steps = [ours(ids[:, :17], cache, 0, "all")] + [ours(ids[:, t:t + 1], cache, t, "all") for t in (17, 18)]
        torch.testing.assert_close(torch.cat(steps, 1), want, rtol=1e-3, atol=1e-3)


def test_compare_swaps_attention_for_a_mamba2_layer():
    """`compare mamba2` on Llama-3-8B: each layer's mixer is what transformers builds for H = 32 heads of
    d_h = 128 (expand 1), the 8 kv heads as groups, state 128; its cache does not grow with the context."""
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

    from llmcalc.inputs.presets import load_preset
    from llmcalc.views.compare import compare_attention

    spec = load_preset("llama3-8b")
    short, long = (compare_attention(spec, ["mamba2"], Workload(seq=s)).rows[1] for s in (1024, 65536))
    cfg = transformers.Mamba2Config(hidden_size=4096, num_heads=32, head_dim=128, expand=1, n_groups=8,
                                    state_size=128, conv_kernel=4)
    with torch.device("meta"):
        mixer = Mamba2Mixer(cfg, layer_idx=0)
    assert short.attention_params == 32 * sum(p.numel() for p in mixer.parameters())
    assert short.kv_cache_bytes == long.kv_cache_bytes
    assert short.decode_flops == long.decode_flops
