"""The reference model (llmcalc/reference) on hybrid stacks and the new mixers.

Gated DeltaNet: the reference module with the weights of transformers' Qwen3NextGatedDeltaNet gives its output
(the chunked prompt), and its recurrent steps after a cache continue it. Mamba-1: the reference module with
transformers' MambaForCausalLM weights gives its logits (prompt, then decode steps from the cache). Hybrids (Jamba:
Mamba-1 + attention + MoE; Nemotron-H: one block per layer, MLP-only layers; Falcon-H1: attention ∥ Mamba-2 in
every layer; Qwen3-Next: Gated DeltaNet + gated attention + MoE; LongCat-Flash: MLA, a shortcut MoE with zero
experts and dense MLPs): the reference decoder built from the spec,
measured under FakeTensorMode, has the parameters, prefill / decode / train FLOPs and cache bytes the estimators
give.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from conftest import assert_reference_counts  # noqa: E402
from llmcalc.reference.model import Decoder  # noqa: E402

MAMBA = {"model_type": "mamba", "vocab_size": 100, "hidden_size": 64, "state_size": 8, "num_hidden_layers": 2,
         "expand": 2, "conv_kernel": 4, "time_step_rank": 6, "use_bias": True, "tie_word_embeddings": False,
         "layer_norm_epsilon": 1e-6}
"""The reference model's norm epsilon (1e-6)."""
HYBRIDS = {
    "jamba": {"model_type": "jamba", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4,
              "num_experts_per_tok": 2, "attn_layer_period": 4, "attn_layer_offset": 2, "mamba_d_state": 8},
    "nemotron_h": {"model_type": "nemotron_h", "vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "mamba_num_heads": 8,
                   "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4, "chunk_size": 8,
                   "hybrid_override_pattern": "M-M*-M-", "max_position_embeddings": 256},
    "qwen3_next": {"model_type": "qwen3_next", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_conv_kernel_dim": 4,
                   "linear_key_head_dim": 8, "linear_value_head_dim": 12, "linear_num_key_heads": 2,
                   "linear_num_value_heads": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                   "shared_expert_intermediate_size": 32, "max_position_embeddings": 256},
    "falcon_h1": {"model_type": "falcon_h1", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "max_position_embeddings": 256, "mamba_d_ssm": 64, "mamba_n_heads": 8, "mamba_n_groups": 2,
                  "mamba_d_state": 16, "mamba_chunk_size": 8},
    "longcat_flash": {"model_type": "longcat_flash", "vocab_size": 100, "hidden_size": 64, "num_layers": 2,
                      "num_attention_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
                      "qk_rope_head_dim": 8, "v_head_dim": 16, "ffn_hidden_size": 96, "expert_ffn_hidden_size": 32,
                      "n_routed_experts": 6, "zero_expert_num": 3, "moe_topk": 3, "max_position_embeddings": 256},
}


def load(tmp_path, raw):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return load_hf_config(path)


def test_reference_mamba_computes_what_transformers_does(tmp_path):
    spec = load(tmp_path, MAMBA)
    torch.manual_seed(0)
    model = transformers.MambaForCausalLM(transformers.MambaConfig(
        **{k: v for k, v in MAMBA.items() if k != "model_type"})).eval()
    ours, theirs = Decoder(spec), dict(model.named_parameters())
    names = {"embed.weight": "backbone.embeddings.weight", "final_norm.weight": "backbone.norm_f.weight",
             "lm_head.weight": "lm_head.weight"}
    for i in range(spec.n_layers):
        names[f"layers.{i}.norms.0.weight"] = f"backbone.layers.{i}.norm.weight"
        for mine, hf in (("conv_weight", "conv1d.weight"), ("conv_bias", "conv1d.bias"), ("A_log", "A_log"),
                         ("D", "D"), *((f"{p}.{w}", f"{p}.{w}") for p in ("in_proj", "out_proj", "dt_proj")
                                       for w in ("weight", "bias")), ("x_proj.weight", "x_proj.weight")):
            names[f"layers.{i}.attn.{mine}"] = f"backbone.layers.{i}.mixer.{hf}"
    with torch.no_grad():
        for mine, p in ours.named_parameters():
            p.copy_(theirs[names[mine]].reshape(p.shape))
        ids = torch.randint(0, 100, (2, 11))
        want = model(ids).logits
        torch.testing.assert_close(ours(ids, logits="all"), want, rtol=1e-4, atol=1e-4)
        cache = ours.new_cache(2, 11)
        steps = [ours(ids[:, :9], cache, 0, "all")] + [ours(ids[:, t:t + 1], cache, t, "all") for t in (9, 10)]
        torch.testing.assert_close(torch.cat(steps, 1), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(HYBRIDS))
def test_reference_hybrid_matches_estimators(tmp_path, name):
    """The reference's own count under FakeTensorMode, training step included: for Gated DeltaNet, autograd runs
    no gradient into the zero initial state and none back through the last state update, which the estimators'
    training passes say (docs/deltanet.md)."""
    assert_reference_counts(load(tmp_path, HYBRIDS[name]), 2, 19)


def test_reference_gated_deltanet_computes_what_transformers_does(tmp_path):
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    from llmcalc.reference.layers import Step

    raw = HYBRIDS["qwen3_next"] | {"rms_norm_eps": 1e-6}
    spec = load(tmp_path, raw)
    cfg = transformers.Qwen3NextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    torch.manual_seed(0)
    theirs = Qwen3NextGatedDeltaNet(cfg, layer_idx=0).eval()
    ours = Decoder(spec).layers[0].attn  # layer 0 is a Gated DeltaNet layer (full_attention_interval 4)
    hf = dict(theirs.named_parameters())
    names = {"in_proj_qkvz.weight": "in_proj_qkvz.weight", "in_proj_ba.weight": "in_proj_ba.weight",
             "conv_weight": "conv1d.weight", "dt_bias": "dt_bias", "A_log": "A_log", "norm_weight": "norm.weight",
             "out_proj.weight": "out_proj.weight"}
    with torch.no_grad():
        for mine, p in ours.named_parameters():
            p.copy_(hf[names[mine]].reshape(p.shape) + (0.1 * torch.randn(p.shape) if mine == "norm_weight" else 0))
            hf[names[mine]].copy_(p.reshape(hf[names[mine]].shape))
        x = torch.randn(2, 19, 64)  # 19 tokens: chunks of 64, one padded
        want = theirs(x)
        torch.testing.assert_close(ours(x, None, Step(0, None, None, False)), want,
                                   rtol=1e-4, atol=1e-4)
        cache = [torch.zeros(s) for s in ours.cache_shapes(2, 19)]
        steps = [ours(x[:, :15], cache, Step(0, None, None, False))]
        steps += [ours(x[:, t:t + 1], cache, Step(t, None, None, False)) for t in range(15, 19)]
        torch.testing.assert_close(torch.cat(steps, 1), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["fake", "cpu"])
@pytest.mark.parametrize("name", ["jamba", "falcon_h1"])
def test_validate_accepts_hybrids(tmp_path, name, device):
    """`llmcalc validate` on a tiny hybrid: every row exact (peak memory is left out with a note: the reference's
    scan holds intermediates a fused kernel does not, Attention.reference_activations)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(HYBRIDS[name]))
    r = subprocess.run([sys.executable, "-m", "llmcalc", "validate", "--hf-config", str(path), "--device", device,
                        "--batch", "2", "--seq", "19", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and {row["quantity"] for row in report["rows"]} >= {
        "params", "prefill FLOPs", "decode FLOPs", "KV cache bytes"}


@pytest.mark.parametrize("name", ["jamba-v0.1", "falcon-h1-7b", "nemotron-h-8b", "qwen3-next-80b-a3b"])
def test_scaled_copy_of_a_hybrid_keeps_its_pattern(name):
    """validate's --layers/--scale on a hybrid preset: the first layers of the pattern, every mixer narrowed."""
    from llmcalc.inputs.presets import load_preset
    from llmcalc.views.validate import scaled_copy

    spec = load_preset(name)
    small = scaled_copy(spec, 8, 16)
    assert small.n_layers == 8 and small.hybrid_pattern == spec.hybrid_pattern[:8]
    assert small.mixers.keys() == spec.mixers.keys()
    assert params(small).total < params(spec).total // 100


def test_validate_cpu_on_a_scaled_hybrid_preset(tmp_path):
    r = subprocess.run([sys.executable, "-m", "llmcalc", "validate", "-p", "jamba-v0.1", "--device", "cpu",
                        "--layers", "8", "--scale", "32", "--batch", "1", "--seq", "16", "--format", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ok"]
