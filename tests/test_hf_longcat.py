"""LongCat-Flash (model_type `longcat_flash`: two MLA blocks and two gated MLPs per layer beside one shortcut MoE
whose router may pick zero-computation experts) against transformers 5.24's LongcatFlashForCausalLM:

- parameters of a tiny config and of LongCat-Flash-Chat (the preset, and the import of transformers' defaults, which
  its config class documents as that checkpoint's) built on the meta device. transformers allocates gate_up_proj for
  the E + Z experts, Z of them identity experts its forward never runs: the total is transformers' count less exactly
  those rows (read off the module), and without zero experts transformers' count itself. Active: the total less the
  (E − k) experts a token skips, one expert's size read off the module;
- the published figures: 560B total, ~27B active on average, 18.6B–31.3B (without the embedding);
- the bytes of transformers' own DynamicCache after a prompt: 2·num_layers entries, one MLA latent each;
- prefill and decode FLOPs under FlopCounterMode on the tiny config: exact with no zero experts; with zero experts
  exact once e_score_correction_bias forces k real and K − k zero slots per token, and between the k = 0 and k = K
  bounds for the routing random weights take;
- the reference decoder measured under FakeTensorMode (tests/test_hybrid_reference.py too) and `validate`;
- explain's terms on the preset; what the import refuses.
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
from conftest import assert_reference_counts, run_cli, write_config  # noqa: E402
from hf_flops import cache_tensors, counted, rows  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

TINY = {"model_type": "longcat_flash", "vocab_size": 100, "hidden_size": 64, "num_layers": 2,
        "num_attention_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 8, "head_dim": 8, "v_head_dim": 16, "ffn_hidden_size": 96,
        "expert_ffn_hidden_size": 32, "n_routed_experts": 6, "zero_expert_num": 3, "moe_topk": 3,
        "max_position_embeddings": 256}
"""6 real and 3 zero experts, 3 slots a token: the balanced share is 3 · 6 / 9 = 2 real slots."""
NO_ZERO = TINY | {"zero_expert_num": 0}
MATMULS = ("attention/q_down", "attention/q_up", "attention/kv_down", "attention/kv_up", "attention/o", "ffn/router",
           "ffn/experts", "ffn/shared_experts", "ffn/dense_gate", "ffn/dense_up", "ffn/dense_down", "lm_head")
"""transformers' aten.mm: every projection, the router (in fp32), each expert's F.linear and the head; the MLA
core's two products are aten.bmm (eager attention) and nothing else is a matmul."""
CHAT_PUBLISHED = 560e9
"""LongCat-Flash Technical Report (arXiv:2509.01322), abstract: 560B parameters, 18.6B–31.3B activated per token
depending on context, ~27B on average."""


def spec_of(tmp_path, raw: dict):
    return load_hf_config(write_config(tmp_path, raw))


def hf_config(raw: dict):
    return transformers.LongcatFlashConfig(**{k: v for k, v in raw.items() if k != "model_type"})


def hf_model(raw: dict, device: str = "cpu"):
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.LongcatFlashForCausalLM(hf_config(raw)).eval()


def hf_params(model) -> dict[str, int]:
    """transformers' count, the zero experts' gate/up rows it allocates, and one real expert's size, from the
    module itself."""
    experts = [layer.mlp.experts for layer in model.model.layers]
    e = experts[0].num_routed_experts
    return dict(total=sum(p.numel() for p in model.parameters()),
                unread=sum(x.gate_up_proj[e:].numel() for x in experts),
                expert=experts[0].gate_up_proj[0].numel() + experts[0].down_proj[0].numel(),
                layers=len(experts), experts=e)


def force_routing(model, real: int, slots: int) -> None:
    """Every token's slots: real experts 0 … real − 1 and zero experts E … E + slots − real − 1 (their
    correction bias far above any softmax score, which lies in [0, 1])."""
    for layer in model.model.layers:
        bias, e = layer.mlp.router.e_score_correction_bias, layer.mlp.experts.num_routed_experts
        bias.zero_()
        bias[:real] = 10.0
        bias[e:e + slots - real] = 10.0


# ---- parameters ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [TINY, NO_ZERO], ids=["zero-experts", "no-zero-experts"])
def test_tiny_params_equal_transformers_on_meta(tmp_path, raw):
    spec = spec_of(tmp_path, raw)
    theirs = hf_params(hf_model(raw, "meta"))
    assert spec.n_layers == 2 * raw["num_layers"] == 2 * theirs["layers"]
    z = raw["zero_expert_num"]
    assert theirs["unread"] == theirs["layers"] * z * 2 * raw["expert_ffn_hidden_size"] * raw["hidden_size"]
    assert (theirs["unread"] > 0) == (z > 0)
    k = spec.ffn.top_k
    assert k == (2 if z else 3)
    r = params(spec)
    assert r.total == theirs["total"] - theirs["unread"]
    assert r.active == r.total - theirs["layers"] * (theirs["experts"] - k) * theirs["expert"]


def test_chat_preset_and_import_equal_transformers_and_the_report(tmp_path):
    """LongCat-Flash-Chat: 560,664,958,976 parameters (transformers' module: 741,053,585,408, of which
    180,388,626,432 are the zero experts' unread gate/up rows); 8 of 12 slots on real experts."""
    theirs = hf_params(hf_model({}, "meta"))
    imported = spec_of(tmp_path, {"model_type": "longcat_flash"})
    preset = load_preset("longcat-flash-chat")
    keep = {"name", "source", "checkpoint"}
    assert imported.model_dump(exclude=keep) == preset.model_dump(exclude=keep)
    r = params(preset)
    assert r.total == theirs["total"] - theirs["unread"] == 560_664_958_976
    assert theirs["unread"] == 180_388_626_432
    assert preset.ffn.top_k == 8 and preset.ffn.routed_slots == 12
    per_expert = theirs["layers"] * theirs["expert"]  # one more real slot per token, over the 28 layers
    assert r.active == r.total - (512 - 8) * per_expert
    # the report: 560B; without the embedding ~27B on average, 18.6B with no real expert and 31.3B with all 12
    # (one decimal, truncated)
    assert abs(r.total - CHAT_PUBLISHED) / CHAT_PUBLISHED < 0.002
    assert round(r.active_excluding_embedding / 1e9) == 27
    floor = r.active_excluding_embedding - 8 * per_expert
    assert (int(floor / 1e8), int((floor + 12 * per_expert) / 1e8)) == (186, 313)


# ---- cache ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("seq", [7, 37])
def test_cache_is_one_latent_per_attention_block(tmp_path, seq, dtype):
    spec = spec_of(tmp_path, TINY)
    m = hf_model(TINY).to({"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    with torch.no_grad():
        cache = m(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
    assert len(cache.layers) == 2 * TINY["num_layers"]
    assert {tuple(t.shape[-1:]) for t in cache_tensors(cache)} == {(16,), (8,)}  # kv_lora_rank, qk_rope_head_dim
    assert kv_bytes(spec, 2, seq, dtype) == sum(t.nbytes for t in cache_tensors(cache))


# ---- FLOPs ----------------------------------------------------------------------------------------------------


def check_counts(ours: dict[str, int], measured: dict[str, int]) -> None:
    assert sum(ours[k] for k in MATMULS) == measured["aten.mm"]
    assert ours["attention/core_scores"] + ours["attention/core_values"] == measured["aten.bmm"]
    assert set(measured) == {"aten.mm", "aten.bmm"}


@pytest.mark.parametrize("seq", [7, 37])
def test_prefill_flops_without_zero_experts_equal_flop_counter(tmp_path, seq):
    spec, m = spec_of(tmp_path, NO_ZERO), hf_model(NO_ZERO)
    check_counts(rows(spec, 2, seq, "prefill"), counted(lambda: m(torch.randint(0, 100, (2, seq)), use_cache=False)))


@pytest.mark.parametrize("seq", [7, 37])
def test_prefill_flops_with_forced_routing_equal_flop_counter(tmp_path, seq):
    """Zero experts: with the routing forced to the spec's k = 2 real and 1 zero slot a token, the counts agree."""
    spec, m = spec_of(tmp_path, TINY), hf_model(TINY)
    force_routing(m, spec.ffn.top_k, spec.ffn.routed_slots)
    check_counts(rows(spec, 2, seq, "prefill"), counted(lambda: m(torch.randint(0, 100, (2, seq)), use_cache=False)))


def test_random_routing_falls_between_no_and_all_real_experts(tmp_path):
    """With the weights' own routing each token's real slots are 0 … K, so transformers' matmuls lie between the
    spec's counts at k = 0 and k = K, and the expert part is a whole number of expert MLPs."""
    spec, m = spec_of(tmp_path, TINY), hf_model(TINY)
    batch, seq = 2, 37
    ours = rows(spec, batch, seq, "prefill")
    per_slot = ours["ffn/experts"] // spec.ffn.top_k  # one real expert for every token
    rest = sum(ours[k] for k in MATMULS if k != "ffn/experts")
    measured = counted(lambda: m(torch.randint(0, 100, (batch, seq)), use_cache=False))["aten.mm"]
    assert rest <= measured <= rest + spec.ffn.routed_slots * per_slot
    one_expert = per_slot // (batch * seq)  # per token
    assert (measured - rest) % one_expert == 0


@pytest.mark.parametrize("seq", [7, 37])
def test_decode_flops_with_forced_routing_equal_flop_counter(tmp_path, seq):
    """One token after a prompt of `seq`: transformers decompresses the cached latents every step (kv_up over
    seq + 1 tokens), llmcalc's `decompress` MLA decode."""
    spec, m = spec_of(tmp_path, TINY), hf_model(TINY)
    force_routing(m, spec.ffn.top_k, spec.ffn.routed_slots)
    with torch.no_grad():
        cache = m(torch.randint(0, 100, (2, seq)), use_cache=True).past_key_values
    measured = counted(lambda: m(torch.randint(0, 100, (2, 1)), cache=cache, use_cache=True))
    check_counts(rows(spec, 2, seq, "decode", mla_decode="decompress"), measured)


# ---- the reference --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [TINY, NO_ZERO], ids=["zero-experts", "no-zero-experts"])
def test_reference_decoder_matches_estimators(tmp_path, raw):
    assert_reference_counts(spec_of(tmp_path, raw))


def test_reference_decoder_at_full_width_matches_estimators():
    """The preset cut to one LongCat layer (its two sublayers), full width."""
    spec = load_preset("longcat-flash-chat")
    assert_reference_counts(type(spec).model_validate(spec.model_dump() | {"n_layers": 2}))


def test_reference_routes_the_stated_share(tmp_path):
    """On real weights: each token runs exactly top_k expert MLPs, its zero slots pass it through scaled."""
    from llmcalc.reference.model import Decoder

    spec = spec_of(tmp_path, TINY)
    moe = Decoder(spec).layers[0].ffn
    assert moe.router.out_features == 6 + 3
    x = torch.randn(1, 5, 64)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        moe(x)
    d, f = 64, 32
    shared = 3 * d * 96  # the first MLP, on every token
    assert fc.get_total_flops() == 2 * 5 * (d * 9 + spec.ffn.top_k * 3 * d * f + shared)


def test_reference_zero_slots_pass_the_token_through(tmp_path):
    """The output is Σ over the k real slots of weight · expert(x), plus Σ over the zero slots of weight · x, plus the
    shared MLP; the input is left as it is; the serving kernels (grouped GEMMs) give the same."""
    from llmcalc.reference.model import Decoder

    spec = spec_of(tmp_path, TINY)
    torch.manual_seed(0)
    moe = Decoder(spec).layers[0].ffn
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_(0, 0.1)
        x = torch.randn(2, 5, 64)
        before = x.clone()
        got = moe(x)
        assert torch.equal(x, before)
        flat, k = x.reshape(10, 64), spec.ffn.top_k
        logits = moe.router(flat)
        real, idx = logits[:, :6].topk(k, -1)
        zero = logits[:, 6:].topk(spec.ffn.routed_slots - k, -1).values
        w = torch.cat([real, zero], -1).softmax(-1)
        want = sum(w[:, j:j + 1] * moe.experts(flat[:, None], idx[:, j])[:, 0] for j in range(k))
        want = want + w[:, k:].sum(-1, keepdim=True) * flat + moe.shared(flat[None]).sum(0)
        torch.testing.assert_close(got.reshape(10, 64), want, rtol=1e-5, atol=1e-5)
        moe.impl = "grouped_mm"
        torch.testing.assert_close(moe(x), got, rtol=1e-5, atol=1e-5)


def test_validate_fake_is_exact(tmp_path, cli_json):
    report = cli_json("validate", "--hf-config", str(write_config(tmp_path, TINY)), "--device", "fake",
                      "--batch", "2", "--seq", "19")
    assert report["ok"] and {row["quantity"] for row in report["rows"]} >= {
        "params", "prefill FLOPs", "decode FLOPs", "KV cache bytes"}


def test_explain_matches_the_plain_commands_on_the_preset():
    """`llmcalc explain` writes the router over E + Z and the expected k real experts (docs/longcat.md)."""
    from test_explain import check_topics

    check_topics(load_preset("longcat-flash-chat"), kv=Workload(batch=8, seq=32768),
                 flops=Workload(batch=2, seq=5000, gen=7), train=Workload(seq=1024, train=True),
                 latency=Workload(batch=4, seq=8192, gen=64, layout=Layout(tp=16)))


# ---- refusals -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, field", [
    (TINY | {"qk_head_dim": 12}, "qk_head_dim"),
    (TINY | {"num_hidden_layers": 3}, "num_hidden_layers"),
    (TINY | {"moe_topk": 10}, "moe_topk"),
    (TINY | {"zero_expert_num": -1}, "zero_expert_num"),
    (TINY | {"n_routed_experts": 0}, "n_routed_experts"),
    (TINY | {"router_bias": "yes"}, "router_bias"),
    (TINY | {"q_lora_rank": None}, "q_lora_rank"),
    (TINY | {"num_layers": 10**9}, "num_layers"),
])
def test_refusals_are_one_line_exit_2(tmp_path, cli, raw, field):
    r = cli("params", "--hf-config", str(write_config(tmp_path, raw)))
    assert r.returncode == 2, r.stderr
    assert field in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_spec_states_its_own_share(tmp_path):
    """router_top_k − top_k at most the zero experts, top_k at most router_top_k: refused otherwise, naming it."""
    spec = load_preset("longcat-flash-chat")
    data = spec.model_dump(mode="json")
    for bad in ({"top_k": 13}, {"router_top_k": 300}):
        path = tmp_path / "bad.yaml"
        path.write_text(json.dumps(data | {"ffn": data["ffn"] | bad}))
        r = run_cli("params", "--config", str(path))
        assert r.returncode == 2 and "router_top_k" in r.stderr and "Traceback" not in r.stderr, r.stderr

