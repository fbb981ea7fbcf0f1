"""Gemma 3n's language model (model_type `gemma3n_text`: per-layer embeddings, AltUp, LAuReL, the last
num_kv_shared_layers layers reading an earlier layer's K/V, sliding and full layers, activation sparsity) against
transformers 5.24's Gemma3nForCausalLM:

- parameters of a tiny config, of Gemma3nTextConfig's defaults (its E4B) and of the preset gemma-3n-e4b, built on the
  meta device; the per-layer embedding table read off the model;
- the bytes of transformers' own cache after a prompt shorter and longer than the sliding window (the shared layers
  store nothing; a sliding layer keeps window − 1 positions);
- prefill and decode FLOPs under FlopCounterMode on the tiny config: every projection (q, k, v, o, the MLP, AltUp's
  router and coefficients, LAuReL, the per-layer gate and projection, the per-layer model projection, AltUp's stream
  projections, the head) is an aten.mm; the attention core and AltUp's prediction (each stream mixed by its n × n
  coefficients) are aten.bmm;
- activation sparsity changes no matmul: the measured FLOPs are those of the dense model;
- the reference module (llmcalc/reference/gemma3n.py) with transformers' weights gives its logits, and measured
  under FakeTensorMode has the estimators' counts; validate passes on the full-size preset;
- explain writes the terms that give the estimators' figures;
- what is refused: the multimodal gemma3n (naming text_config), explain of MLP widths that differ per layer, LoRA.
"""

from __future__ import annotations

import pytest

from llmcalc.costs.kv import kv_bytes, kv_cache
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from conftest import assert_reference_counts, write_config  # noqa: E402
from hf_counts import transformers_counts  # noqa: E402
from hf_flops import cache_tensors, counted, rows  # noqa: E402

TINY = {"model_type": "gemma3n_text", "vocab_size": 128, "vocab_size_per_layer_input": 96, "hidden_size": 64,
        "hidden_size_per_layer_input": 8, "intermediate_size": [96] * 6, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2, "num_kv_shared_layers": 3,
        "laurel_rank": 4, "altup_num_inputs": 3, "max_position_embeddings": 256,
        "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0, 0.0, 0.0]}
"""Six layers (sliding, sliding, full twice), the last three reading the K/V of layers 1 (sliding) and 2 (full); a
window of 8 so that 5 and 13 tokens fall either side of it; three AltUp streams; the first two MLPs sparse."""
CORE = ("attention/core_scores", "attention/core_values", "shared_kv/core_scores", "shared_kv/core_values")
BMM = (*CORE, "altup/predict")
"""The batched products: the attention core (SDPA's math kernel) and AltUp's prediction."""


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return load_hf_config(write_config(tmp_path_factory.mktemp("gemma3n"), TINY))


def hf_model(raw: dict = TINY, dtype=torch.float32):
    torch.manual_seed(0)
    config = transformers.Gemma3nTextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    return transformers.Gemma3nForCausalLM(config).to(dtype).eval()


def split(ours: dict[str, int]) -> dict[str, int]:
    """Our rows as FlopCounterMode names them: aten.bmm the batched products, aten.mm every weight matmul."""
    return {"aten.mm": sum(v for k, v in ours.items() if k not in BMM),
            "aten.bmm": sum(ours.get(k, 0) for k in BMM)}


# ---- parameters ------------------------------------------------------------------------------------------------


def test_tiny_groups_and_params_equal_transformers_on_meta(spec):
    groups = [(g.count, g.window, g.mixer_name) for g in spec.layer_groups()]
    assert groups == [(1, None, "attention"), (2, 8, "attention"), (1, None, "shared_kv"), (2, 8, "shared_kv")]
    theirs = transformers_counts(TINY)
    r = params(spec)
    assert (r.total, r.active) == (theirs["total"], theirs["active"])
    by = {row.component: row.params for row in r.breakdown}
    assert "shared_kv/k" not in by and by["shared_kv/q"] == by["attention/q"] // 3 * 3  # q only, no k/v weights


def test_defaults_and_preset_equal_transformers(tmp_path):
    """Gemma3nTextConfig's defaults (its E4B: 35 layers of d 2048, 15 reading shared K/V, a 262,144 × 35·256 per-layer
    table): 6,835,235,568 parameters; the per-layer table is 2,348,810,240 of them, read off the model."""
    raw = {"model_type": "gemma3n_text"}
    theirs = transformers_counts(raw)
    imported, preset = load_hf_config(write_config(tmp_path, raw)), load_preset("gemma-3n-e4b")
    for spec in (imported, preset):
        r = params(spec)
        assert (r.total, r.active) == (theirs["total"], theirs["active"]) == (6_835_235_568, 6_835_235_568)
    keep = {"name", "source", "checkpoint"}
    assert imported.model_dump(exclude=keep) == preset.model_dump(exclude=keep)
    with torch.device("meta"):
        model = transformers.Gemma3nForCausalLM(transformers.Gemma3nTextConfig())
    table = model.model.embed_tokens_per_layer.weight.numel()
    r = params(preset)
    assert {row.component: row.params for row in r.breakdown}["embedding/per_layer"] == table
    assert r.total - table == 4_486_425_328  # without the per-layer table: Google's "effective" count, ≈ 4.5 B
    assert any("total without embedding/per_layer" in n and "4,486,425,328" in n for n in r.notes)
    assert r.active_excluding_embedding == r.total - table - model.model.embed_tokens.weight.numel()


# ---- cache ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("seq", [5, 13])
def test_cache_equals_transformers(spec, seq, dtype):
    """Three layers cache (the shared three store nothing); a sliding one keeps min(S, W − 1) positions."""
    m = hf_model(dtype={"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    with torch.no_grad():
        cache = m(torch.randint(0, 128, (2, seq)), use_cache=True).past_key_values
    tensors = list(cache_tensors(cache))
    assert len(tensors) == 6
    assert kv_bytes(spec, 2, seq, dtype) == sum(t.nbytes for t in tensors)
    shared = [r for r in kv_cache(spec, Workload(batch=2, seq=seq)).per_layer if "earlier" in r.layer_type]
    assert [r.bytes for r in shared] == [0, 0]


# ---- FLOPs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [5, 13])
def test_prefill_flops_equal_flop_counter(spec, seq):
    m = hf_model()
    measured = counted(lambda: m(torch.randint(0, 128, (2, seq)), use_cache=False))
    ours = rows(spec, 2, seq, "prefill")
    assert split(ours) == measured
    d, n = 64, 3
    assert ours["altup/projections"] == ours["altup/unembed"] == 2 * 2 * seq * (n - 1) * d * d
    assert ours["per_layer/model_projection"] == 2 * 2 * seq * d * 6 * 8


@pytest.mark.parametrize("seq", [5, 13])
def test_decode_flops_equal_flop_counter(spec, seq):
    """One token after a prompt of `seq`: the shared layers attend over the cache of the layer they read."""
    m = hf_model()
    with torch.no_grad():
        cache = m(torch.randint(0, 128, (2, seq)), use_cache=True).past_key_values
    measured = counted(lambda: m(torch.randint(0, 128, (2, 1)), cache=cache, use_cache=True))
    assert split(rows(spec, 2, seq, "decode")) == measured


def test_activation_sparsity_changes_no_matmul(tmp_path):
    """The Gaussian top-k is element-wise after the gate's matmul: a sparse and a dense model count the same."""
    dense = TINY | {"activation_sparsity_pattern": [0.0] * 6}
    keep = {"name", "source"}
    assert load_hf_config(write_config(tmp_path, dense, "dense")).model_dump(exclude=keep) == load_hf_config(
        write_config(tmp_path, TINY)).model_dump(exclude=keep)
    tokens = torch.randint(0, 128, (2, 9))
    sparse_m, dense_m = hf_model(), hf_model(dense)
    assert counted(lambda: sparse_m(tokens, use_cache=False)) == counted(lambda: dense_m(tokens, use_cache=False))
    with torch.no_grad():  # and the pattern is in force: the outputs differ
        assert not torch.allclose(sparse_m(tokens).logits, dense_m(tokens).logits)


def test_matformer_widths_per_layer_equal_transformers(tmp_path, cli):
    """intermediate_size as a list of widths that differ (a MatFormer slice mixes them per layer): each layer's MLP
    at its own width, in the parameters, the FLOPs and the reference; explain (one width) refuses it."""
    raw = TINY | {"intermediate_size": [96, 128, 64, 128, 96, 64]}
    spec = load_hf_config(write_config(tmp_path, raw))
    assert [(g.count, g.window, g.mixer_name, g.ffn.d_ff) for g in spec.layer_groups()] == [
        (1, 8, "attention", 96), (1, 8, "attention", 128), (1, None, "attention", 64),
        (1, 8, "shared_kv", 128), (1, 8, "shared_kv", 96), (1, None, "shared_kv", 64)]
    assert params(spec).total == transformers_counts(raw)["total"]
    m = hf_model(raw)
    measured = counted(lambda: m(torch.randint(0, 128, (2, 13)), use_cache=False))
    assert split(rows(spec, 2, 13, "prefill")) == measured
    r = cli("explain", "params", "--hf-config", str(tmp_path / "tiny"))
    assert r.returncode == 2 and "ffn_widths" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert_reference_counts(spec, 2, 13)


def test_default_layer_types_are_four_sliding_then_full(tmp_path):
    raw = {k: v for k, v in TINY.items() if k not in ("layer_types", "activation_sparsity_pattern")}
    raw |= {"num_hidden_layers": 10, "intermediate_size": 96, "num_kv_shared_layers": 5}
    spec = load_hf_config(write_config(tmp_path, raw))
    assert spec.layer_pattern == ["sliding"] * 4 + ["full"]
    theirs = transformers_counts(raw)
    assert params(spec).total == theirs["total"]
    m = hf_model(raw)
    measured = counted(lambda: m(torch.randint(0, 128, (1, 11)), use_cache=False))
    assert split(rows(spec, 1, 11, "prefill")) == measured


def test_explain_matches_the_plain_commands_on_the_preset():
    """`llmcalc explain` writes Gemma 3n's terms (docs/gemma3n.md) that give the estimators' figures, row by row."""
    from test_explain import check_topics

    from llmcalc.workload import Layout

    check_topics(load_preset("gemma-3n-e4b"), kv=Workload(batch=3, seq=5000), flops=Workload(batch=2, seq=700, gen=9),
                 train=Workload(seq=1024, train=True), latency=Workload(batch=4, seq=2048, gen=16, layout=Layout(tp=2)))


# ---- the reference --------------------------------------------------------------------------------------------

RENAMED = [(r"^model\.embed_tokens\.", "embed."), (r"^model\.embed_tokens_per_layer\.", "per_layer_embed."),
           (r"^model\.per_layer_model_projection\.", "per_layer_projection."),
           (r"^model\.per_layer_projection_norm\.", "per_layer_norm."), (r"^model\.altup_projections\.", "altup_in."),
           (r"^model\.altup_unembed_projections\.", "altup_out."), (r"^model\.norm\.", "final_norm."),
           (r"^model\.layers\.", "layers."), (r"self_attn\.(q|k|v|o)_proj", r"attn.\1"), (r"self_attn\.", "attn."),
           (r"mlp\.(gate|up|down)_proj", r"ffn.\1"), ("input_layernorm", "norms.0"),
           ("post_attention_layernorm", "norms.1"), ("pre_feedforward_layernorm", "norms.2"),
           ("post_feedforward_layernorm", "norms.3"), (r"altup\.correct_output_scale", "output_scale"),
           (r"altup\.correction_coefs", "correct_coefs"), (r"altup\.prediction_coefs", "predict_coefs"),
           (r"altup\.modality_router", "router"), (r"altup\.router_norm", "router_norm"),
           (r"laurel\.linear_left", "laurel_left"), (r"laurel\.linear_right", "laurel_right"),
           (r"laurel\.post_laurel_norm", "laurel_norm"), ("per_layer_input_gate", "gate"),
           (r"^(layers\.\d+\.)per_layer_projection", r"\1projection"), ("post_per_layer_input_norm", "per_layer_norm")]
"""transformers' parameter names → the reference's (llmcalc/reference/gemma3n.py)."""


def test_reference_computes_what_transformers_does(spec):
    """The reference with transformers' weights gives its logits, over a prompt and then token by token past the
    sliding window (the reference rotates every layer with one RoPE base and builds no activation sparsity, so
    transformers' model is configured alike here)."""
    import re

    from llmcalc.reference.gemma3n import Gemma3nDecoder

    base = {"rope_type": "default", "rope_theta": 10000.0}
    theirs = hf_model(TINY | {"activation_sparsity_pattern": [0.0] * 6,
                              "rope_parameters": {"full_attention": base, "sliding_attention": dict(base)}})
    ours = Gemma3nDecoder(spec).eval()
    hf = {}
    for n, p in theirs.named_parameters():
        for a, b in RENAMED:
            n = re.sub(a, b, n)
        hf[n] = p
    mine = dict(ours.named_parameters())
    assert set(hf) == set(mine)
    torch.manual_seed(1)
    with torch.no_grad():
        for n, p in mine.items():
            p.copy_(torch.randn(p.shape) * 0.3 + (1 if "norm" in n else 0))
            hf[n].copy_(p)
        tokens = torch.randint(0, 128, (2, 13))
        want = theirs(tokens).logits
        torch.testing.assert_close(ours(tokens, None, 0, "all"), want, rtol=1e-4, atol=1e-4)
        cache = ours.new_cache(2, 13)
        steps = [ours(tokens[:, :9], cache, 0, "all")]
        steps += [ours(tokens[:, t:t + 1], cache, t, "all") for t in range(9, 13)]
        torch.testing.assert_close(torch.cat(steps, 1), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seq", [5, 13])
def test_reference_matches_estimators(spec, seq):
    """The reference under FakeTensorMode: parameters, prefill, decode and training FLOPs, cache bytes."""
    assert_reference_counts(spec, 2, seq)


def test_validate_passes_on_the_preset(cli_json):
    """The full-size E4B reference on fake tensors: every count exact; peak memory left out with the reason."""
    r = cli_json("validate", "-p", "gemma-3n-e4b", "--seq", "600", "--batch", "1")
    assert r["ok"] and [row["ok"] for row in r["rows"]] == [True] * 5
    assert any("AltUp" in n for n in r["notes"])


# ---- refusals -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, field", [
    ({"model_type": "gemma3n", "text_config": TINY, "vision_config": {}, "audio_config": {}}, "text_config"),
    (TINY | {"intermediate_size": [96] * 5}, "intermediate_size"),
    (TINY | {"num_kv_shared_layers": 6}, "kv_shared_layers"),
    (TINY | {"layer_types": ["sliding_attention"] * 5 + ["full_attention"]}, "kv_shared_layers"),
    (TINY | {"activation_sparsity_pattern": [0.95] * 5}, "activation_sparsity_pattern"),
    (TINY | {"altup_active_idx": 3}, "altup_active_idx"),
])
def test_refusals_are_one_line_exit_2(tmp_path, cli, raw, field):
    r = cli("params", "--hf-config", str(write_config(tmp_path, raw)))
    assert r.returncode == 2, r.stderr
    assert field in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_lora_refuses_in_one_line(cli):
    r = cli("memory", "--train", "--lora", "16", "-p", "gemma-3n-e4b")
    assert r.returncode == 2, r.stderr
    assert "Gemma 3n" in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_other_commands_run_on_the_preset(cli_json):
    """kv, memory and latency read the stack's parts: the shared layers cache nothing, the weights are the total."""
    kv = cli_json("kv", "-p", "gemma-3n-e4b", "--batch", "1", "--seq", "4096")
    per = {r["layer_type"]: r["bytes"] for r in kv["per_layer"]}
    assert sum(per.values()) == kv["total_bytes"] == 2 * 2 * 256 * (4 * 4096 + 16 * 511) * 2
    mem = cli_json("memory", "-p", "gemma-3n-e4b", "--seq", "4096")
    assert mem["weights_bytes"] == 2 * 6_835_235_568
    lat = cli_json("latency", "-p", "gemma-3n-e4b", "--gpu", "h100-sxm", "--seq", "2048", "--gen", "16")
    assert lat["ttft_s"] > 0 and lat["tpot_s"] > 0


def test_figures_of_docs_page_are_the_presets():
    """docs/gemma3n.md's E4B figures, recomputed from the preset (and the per-token FLOPs from the flops report)."""
    from pathlib import Path

    text = " ".join((Path(__file__).parents[1] / "docs" / "gemma3n.md").read_text(encoding="utf-8").split())
    spec = load_preset("gemma-3n-e4b")
    r = params(spec)
    by = {row.component: row.params for row in r.breakdown}
    one = rows(spec, 1, 1, "prefill")
    per_layer = sum(v for k, v in one.items() if k.split("/")[0] in ("altup", "laurel", "per_layer")
                    and k not in spec.stack.token_matmuls(spec)) // spec.n_layers
    outside = sum(one[k] for k in spec.stack.token_matmuls(spec))
    figures = [sum(spec.stack.layer_params(spec).values()), by["embedding/per_layer"], r.total,
               r.total - by["embedding/per_layer"], r.active_excluding_embedding, per_layer, outside,
               kv_bytes(spec, 1, 4096, "bf16")]
    assert [f"{x:,}" in text for x in figures] == [True] * len(figures), figures


@pytest.mark.parametrize("change, field", [
    ({"stack": {"kv_shared_layers": 35}}, "stack.kv_shared_layers"),
    ({"stack": {"ffn_widths": [16384] * 3}}, "stack.ffn_widths"),
    ({"attention": {"shared_kv": True}}, "attention.shared_kv"),
    ({"ffn": {"kind": "moe", "experts": 4, "top_k": 1, "d_ff": 64}}, "ffn.kind"),
    ({"layer_pattern": ["sliding"] * 34 + ["full"], "stack": {"kv_shared_layers": 1}}, "stack.kv_shared_layers"),
])
def test_spec_refusals_are_one_line_exit_2(tmp_path, cli, change, field):
    """A hand-written spec of the stack: each inconsistency named by its field, exit 2."""
    import yaml

    spec = yaml.safe_load(load_preset("gemma-3n-e4b").model_dump_json())
    for key, value in change.items():
        spec[key] = spec[key] | value if isinstance(spec.get(key), dict) and key != "ffn" else value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in spec.items() if v is not None}))
    r = cli("params", "--config", str(path))
    assert r.returncode == 2, r.stderr
    assert field in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
