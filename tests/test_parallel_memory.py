"""Training memory per GPU under tensor, sequence, context, pipeline and expert parallelism
(llmcalc/costs/train_memory.py), against independent sources:

- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (arXiv 2205.05198),
  Table 2 (activation bytes per transformer layer, GPT layer with dropout, 16-bit, no flash attention) and
  §4.2.3 (what the first pipeline stage holds, 1F1B and interleaved);
- Megatron-LM's theoretical memory estimate, megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM at
  d98e8a64ddf34856e74b24714e3bedb2f5a39553): re-derived below as an oracle in exact fractions, with the stated
  differences of convention;
- the figures of `memory --train` before this layout existed (commit 8e9a180), which every layout of one GPU per
  replica keeps exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

import pytest

from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.costs.train_memory import passes_in_flight, rank_memory, rank_params
from llmcalc.errors import UserError
from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Layout, Workload
from tests.conftest import run_cli


def variant(preset: str, **changes) -> ModelSpec:
    """A preset with some fields changed (nested ones as dicts, replaced whole when they name another kind),
    validated like any spec."""
    data = load_preset(preset).model_dump()
    for k, v in changes.items():
        same_kind = isinstance(data[k], dict) and v.get("kind", data[k].get("kind")) == data[k].get("kind") \
            if isinstance(v, dict) else False
        data[k] = data[k] | v if same_kind else v
    return ModelSpec.model_validate(data)


def gpt(h: int, a: int, layers: int, vocab: int = 51200, name: str = "gpt") -> ModelSpec:
    """Korthikanti's GPT layer: MHA of a heads, GELU MLP of 4h, LayerNorm, biased projections (Table 3 models)."""
    return variant("gpt3-175b", name=name, d_model=h, n_layers=layers, vocab_size=vocab,
                   attention={"heads": a, "kv_heads": a, "head_dim": h // a}, ffn={"d_ff": 4 * h})


def train(spec: ModelSpec, batch: int, seq: int, micro: int | None = None, **kw) -> tuple:
    layout = Layout(**{k: kw.pop(k) for k in ("tp", "pp", "dp", "ep", "cp", "sp", "vpp") if k in kw})
    w = Workload(batch=batch, seq=seq, train=True, micro_batch=micro, layout=layout, **kw)
    return memory(spec, w), w


# ---- (a) Korthikanti et al. 2022, Table 2: activation bytes per layer -----------------------------------------

KORTHIKANTI = {  # Table 3 of the paper: heads, hidden, layers, tensor-parallel, pipeline-parallel, micro-batch
    "22B": (64, 6144, 48, 8, 1, 4), "175B": (96, 12288, 96, 8, 8, 1),
    "530B": (128, 20480, 105, 8, 35, 1), "1T": (160, 25600, 128, 8, 64, 1),
}
S = 2048


@pytest.mark.parametrize("size", KORTHIKANTI)
def test_table2_every_row(size):
    """Each row of Table 2, exact, with s = 2048 and the paper's t = 8 (bytes; 16-bit, dropout, no flash)."""
    a, h, layers, t, _, b = KORTHIKANTI[size]
    spec = gpt(h, a, layers)
    s, sbh = S, S * b * h

    def per_layer(**kw) -> int:
        r, _ = train(spec, b, s, flash=False, dropout=True, **kw)
        return r.activation_bytes_per_layer

    assert per_layer() == sbh * 34 + 5 * a * s * s * b                                # no parallelism
    assert per_layer(tp=t) == sbh * 10 + sbh * 24 // t + 5 * a * s * s * b // t       # tensor parallel
    assert per_layer(tp=t, sp=True) == (sbh * 34 + 5 * a * s * s * b) // t           # + sequence parallel
    assert per_layer(tp=t, recompute="selective") == sbh * 10 + sbh * 24 // t         # + selective recompute
    assert per_layer(tp=t, sp=True, recompute="selective") == sbh * 34 // t           # + both
    assert per_layer(tp=t, recompute="full") == 2 * sbh                                # full recompute: sbh(2)
    # beyond the table: with sequence parallelism the kept layer input is split over t too
    assert per_layer(tp=t, sp=True, recompute="full") == 2 * sbh // t


@pytest.mark.parametrize("size", KORTHIKANTI)
def test_first_stage_holds_L_layers_worth(size):
    """§4.2.3: with 1F1B the first stage holds pp micro-batches of its L/pp layers, the activations of L layers:
    s·b·h·L/t·(34 + 5·a·s/h) with tp + sp and no recompute (no logits there when pp > 1)."""
    a, h, layers, t, p, b = KORTHIKANTI[size]
    r, _ = train(gpt(h, a, layers), b * p * 2, S, b, tp=t, pp=p, sp=True, flash=False, dropout=True)
    assert (r.stage, r.in_flight, r.stage_layers) == (0, p if p > 1 else 1, layers // p)
    expected = layers * (S * b * h * 34 + 5 * a * S * S * b) // t
    if p == 1:  # one stage: the fp32 logits of the micro-batch too, vocab-split
        expected += 4 * b * S * 51200 // t
    assert r.activation_bytes == expected


def test_interleaved_factor():
    """Interleaved 1F1B: the first stage holds L·(1 + (p − 1)/(p·v)) layers' worth (Korthikanti §4.2.3)."""
    a, h, layers, t, p, b = KORTHIKANTI["175B"]
    for v in (2, 3, 4, 6):
        r, _ = train(gpt(h, a, layers), 2 * p, S, 1, tp=t, pp=p, vpp=v, sp=True, recompute="selective",
                     dropout=True)
        core = 4 * (a // t) * S  # the one rebuilt layer's log-sum-exp (flash)
        assert r.activation_bytes - core == Fraction(layers * (p * v + p - 1), p * v) * S * h * 34 // t
        assert r.in_flight == p * v + p - 1


def test_schedule_passes():
    """Megatron's warm-up: 1F1B stage r holds min(p − r, m); interleaved min(2(p − r − 1) + (v − 1)p + 1, m·v)."""
    assert [passes_in_flight(Layout(pp=4), r, 8) for r in range(4)] == [[4], [3], [2], [1]]
    assert passes_in_flight(Layout(pp=4), 0, 2) == [2]
    # p 4, v 2, m 8: rank 0 warms up 2·3 + 4 = 10 passes and holds 11: chunk 0 for passes 0-3 and 8-10, chunk 1 4-7
    assert passes_in_flight(Layout(pp=4, vpp=2), 0, 8) == [7, 4]
    assert passes_in_flight(Layout(pp=4, vpp=2), 3, 8) == [4, 1]
    assert passes_in_flight(Layout(pp=4, vpp=2), 0, 4) == [4, 4]  # m = p: all 8 passes are warm-up


# ---- (b) Megatron-LM's theoretical memory estimate, re-derived ------------------------------------------------

@dataclass(frozen=True)
class Megatron:
    """The arguments theoretical_memory_usage.py reads, in our words."""

    h: int
    ffn: int
    layers: int
    vocab: int
    heads: int
    groups: int
    head_dim: int
    swiglu: bool
    rmsnorm: bool
    untied: bool
    tp: int
    pp: int
    dp: int
    seq: int = S
    micro: int = 1
    vpp: int | None = None
    experts: int | None = None
    moe_ffn: int = 0
    ep: int = 1
    etp: int = 1
    """Expert tensor parallelism: Megatron's default is tp; this code's layouts split experts over tp at ep 1 and
    keep them whole over ep > 1, so the oracle is given etp = tp at ep 1 and 1 otherwise."""
    distributed_optimizer: bool = False

    def weight_and_optimizer(self) -> Fraction:
        """Bytes of the first stage's parameters at 18 bytes each (bf16 weight, fp32 main gradient, fp32 main
        weight, Adam m and v), or 6 + 12/dp with the distributed optimizer; expert ones over the expert-dp group."""
        gate = Fraction(3, 2) if self.swiglu else 1
        attention = 2 * self.h * self.heads * self.head_dim * (1 + Fraction(self.groups, self.heads))
        norm = (1 if self.rmsnorm else 2) * self.h
        moe = self.experts is not None
        mlp = 0 if moe else 2 * self.h * self.ffn * gate
        experts = 2 * self.h * self.moe_ffn * (self.experts or 0) * gate
        router = self.h * self.experts if moe else 0
        embedding = self.h * self.vocab
        split_by_tp = (attention + mlp) * self.layers
        whole = (2 * norm + router) * self.layers + norm  # layer norms (and routers), then the final norm
        on_stage = (split_by_tp / self.pp + embedding) / self.tp + whole / self.pp
        if self.untied and self.pp == 1:
            on_stage += Fraction(embedding, self.tp)
        expert_share = experts * self.layers / self.pp / (self.etp * self.ep)

        def per_param(group: int) -> Fraction:
            return 6 + Fraction(12, group) if self.distributed_optimizer else Fraction(18)

        expert_dp = self.tp * self.pp * self.dp // (self.etp * self.ep * self.pp)
        return on_stage * per_param(self.dp) + expert_share * per_param(expert_dp)

    def edge_activations(self, microbatches: int, sp_selective: bool) -> Fraction:
        """What the estimate adds beyond the layers: the embedding's input ids (8·s·b) and dropout mask (s·b·h) for
        each in-flight micro-batch, and at pp 1 the output layer's inputs (4·s·b·h with sp, 2·s·b·h without)."""
        sb = self.seq * self.micro
        edges = (8 * sb + sb * self.h) * self.pp * self.factor(microbatches)
        if self.pp == 1:
            edges += 4 * sb * self.h if sp_selective else 2 * sb * self.h
        return edges / self.tp if sp_selective else edges

    def factor(self, microbatches: int) -> Fraction:
        if self.vpp is not None:
            return 1 + Fraction(self.pp - 1, self.pp * self.vpp)
        return min(Fraction(1), Fraction(microbatches, self.pp)) if self.pp > 1 else Fraction(1)

    def activations(self, microbatches: int, sp_selective: bool) -> Fraction:
        """compute_activation_memory (sp + selective recompute: s·b·h·(18 + 4·ffn/h) per layer, ÷ t) or
        compute_activation_memory_without_sp (s·b·h·(10 + 24/t) per layer, × 1.05)."""
        sb, h, t = self.seq * self.micro, self.h, self.tp
        if sp_selective:
            layers = sb * h * (18 + Fraction(4 * self.ffn, h)) * self.layers * self.factor(microbatches) / t
            out = 4 * sb * self.vocab / t if self.pp == 1 else 0  # fp32 logits (with the 4·s·b·h in the edges)
            return layers + out + self.edge_activations(microbatches, True)
        layers = sb * h * (10 + Fraction(24, t)) * self.layers * self.factor(microbatches)
        out = 2 * sb * self.vocab / t if self.pp == 1 else 0  # 16-bit logits (with 2·s·b·h in the edges)
        return (layers + out + self.edge_activations(microbatches, False)) * Fraction(105, 100)


def megatron_of(spec: ModelSpec, **kw) -> Megatron:
    a = spec.attention
    moe = spec.ffn.routed_experts
    return Megatron(h=spec.d_model, ffn=0 if moe else spec.ffn.d_ff, layers=spec.n_layers, vocab=spec.vocab_size,
                    heads=a.heads, groups=a.kv_heads, head_dim=a.head_dim, swiglu=spec.ffn.kind != "dense" and
                    spec.ffn.model_dump().get("gated", True), rmsnorm=spec.norm.kind == "rmsnorm",
                    untied=not spec.tie_embeddings, experts=moe or None, moe_ffn=spec.ffn.d_ff if moe else 0, **kw)


GPT_NO_BIAS = dict(  # Megatron's estimate counts no linear biases and no learned positions
    attention={"qkv_bias": False, "o_bias": False}, ffn={"bias": False}, positions={"kind": "rope"})


def first_stage(spec: ModelSpec, w: Workload, m: int):
    micro = w.micro_batch or w.batch // w.layout.dp
    return rank_memory(spec, w, 0, micro, m)


@pytest.mark.parametrize("preset, spec_changes, tp, pp, dp, ep", [
    ("gpt3-175b", GPT_NO_BIAS, 8, 8, 4, 1),
    ("gpt3-175b", GPT_NO_BIAS, 8, 16, 2, 1),
    ("gpt3-175b", GPT_NO_BIAS, 8, 1, 1, 1),
    ("llama2-70b", {}, 8, 4, 4, 1),
    ("llama2-70b", {}, 8, 1, 2, 1),
    ("llama2-70b", {}, 4, 8, 8, 1),
    ("mixtral-8x7b", {}, 1, 4, 8, 8),
    ("mixtral-8x7b", {}, 2, 4, 4, 1),
])
@pytest.mark.parametrize("distributed", [False, True])
def test_weights_and_optimizer_match_megatron(preset, spec_changes, tp, pp, dp, ep, distributed):
    """fp32 gradients (--grad-dtype fp32) give Megatron's 18 bytes per parameter; its distributed optimizer is
    ZeRO-1 over dp (6 + 12/dp). Stated difference: Megatron puts the final norm's parameters at 1/pp on every
    stage, this code on the last stage only, so the first stage differs by final_norm/pp parameters when pp > 1."""
    spec = variant(preset, **spec_changes)
    w = Workload(batch=dp * pp, seq=S, micro_batch=1, train=True, grad_dtype="fp32", zero=1 if distributed else 0,
                 layout=Layout(tp=tp, pp=pp, dp=dp, ep=ep))
    ours = first_stage(spec, w, pp)
    oracle = megatron_of(spec, tp=tp, pp=pp, dp=dp, ep=ep, etp=tp if ep == 1 else 1, distributed_optimizer=distributed)
    expected = oracle.weight_and_optimizer()
    if pp > 1:
        per_param = 6 + Fraction(12, dp) if distributed else 18
        expected -= Fraction(spec.norm.params(spec.d_model), pp) * per_param
    assert abs(ours.weights + ours.gradients + ours.optimizer - expected) < 2  # ZeRO's shards round up


@pytest.mark.parametrize("size, vpp", [("175B", None), ("175B", 2), ("175B", 6), ("530B", None), ("1T", 2),
                                       ("22B", None)])
def test_activations_match_megatron_sp_selective(size, vpp):
    """compute_activation_memory models sp + selective recompute on a GPT layer, s·b·h·(18 + 4·ffn/h)/t per layer
    (= 34/t at ffn = 4h): matched exactly on the layers. Stated differences: Megatron also counts the embedding's
    input ids and dropout mask (and at pp 1 the output layer's input), this code does not; this code adds the one
    layer whose attention core selective recompute rebuilds (its log-sum-exp under flash attention)."""
    a, h, layers, t, p, b = KORTHIKANTI[size]
    spec, m = gpt(h, a, layers), 2 * p
    w = Workload(batch=m * b, seq=S, micro_batch=b, train=True, recompute="selective", dropout=True,
                 layout=Layout(tp=t, pp=p, sp=True, vpp=vpp or 1))
    ours = first_stage(spec, w, m)
    oracle = megatron_of(spec, tp=t, pp=p, dp=1, micro=b, vpp=vpp)
    rebuilt = 4 * b * (a // t) * S
    assert ours.activations - rebuilt == oracle.activations(m, True) - oracle.edge_activations(m, True)


@pytest.mark.parametrize("pp, m", [(8, 16), (8, 4), (1, 1)])
def test_activations_match_megatron_without_sp(pp, m):
    """compute_activation_memory_without_sp: s·b·h·(10 + 24/t) per layer, Table 2's tensor parallel + selective
    row, × 1.05 for temporaries; fewer micro-batches than stages scale the pipeline by m/pp (1F1B). Stated
    differences: the embedding terms (whole on every tensor-parallel rank here), the 5% and at pp 1 the output
    layer: Megatron counts 16-bit logits and the final norm's output, this code fp32 logits for the loss."""
    a, h, layers, t, _, b = KORTHIKANTI["175B"]
    spec = gpt(h, a, layers)
    w = Workload(batch=m, seq=S, micro_batch=1, train=True, recompute="selective", dropout=True, flash=False,
                 layout=Layout(tp=t, pp=pp))
    ours = first_stage(spec, w, m)
    oracle = megatron_of(spec, tp=t, pp=pp, dp=1)
    layers_only = oracle.activations(m, False) / Fraction(105, 100) - oracle.edge_activations(m, False)
    if pp == 1:
        layers_only -= 2 * S * 51200 // t
    rebuilt = 5 * a * S * S // t  # the one layer whose S×S core is rebuilt
    logits = 4 * S * 51200 // t if pp == 1 else 0
    assert ours.activations - rebuilt - logits == layers_only


def test_megatron_activation_formula_is_gpt_shaped():
    """Megatron's 18 + 4·ffn/h assumes MHA with q = h and a plain MLP (its TODO says so). Llama-2-70B by hand: the
    attention keeps its input, Q, the o input (h each) and K, V (h/8 each), 3.25·h; SwiGLU its input and gate, up
    and product, h + 3·f; two norms' inputs 2h; no dropout: 2·(3.25·h + h + 3·3.5·h + 2h) = 33.5·h bytes per token,
    where Megatron's formula gives 18 + 4·3.5 = 32."""
    spec = load_preset("llama2-70b")
    r, _ = train(spec, 8, 4096, 1, tp=8, pp=4, sp=True, recompute="selective")
    assert r.activation_bytes_per_layer == 4096 * 8192 * 67 // 2 // 8
    assert megatron_of(spec, tp=8, pp=4, dp=1).ffn / 8192 * 4 + 18 == 32


def test_context_parallel_divides_the_sequence_and_shards_the_optimizer_over_dp_cp():
    spec = load_preset("llama3-8b")
    base, _ = train(spec, 8, 8192, 1, tp=2, pp=2, dp=4, zero=1, recompute="selective", sp=True)
    cp, _ = train(spec, 8, 8192, 1, tp=2, pp=2, dp=4, cp=2, zero=1, recompute="selective", sp=True)
    half, _ = train(spec, 8, 4096, 1, tp=2, pp=2, dp=4, zero=1, recompute="selective", sp=True)
    assert cp.activation_bytes == half.activation_bytes  # each GPU holds seq / cp tokens of every sequence
    assert cp.activation_bytes_per_layer * 2 == base.activation_bytes_per_layer
    assert (cp.weights_bytes, cp.gradient_bytes) == (base.weights_bytes, base.gradient_bytes)
    n = cp.stage_params
    assert cp.optimizer_bytes == -(-12 * n // 8) and base.optimizer_bytes == -(-12 * n // 4)  # ZeRO-1 over dp · cp
    assert cp.cp == 2 and any("4,096 tokens" in note for note in cp.notes)


def test_expert_parallel_spreads_experts_and_their_optimizer():
    """Mixtral at ep 8 over dp 8: each GPU holds one expert of each layer; the experts' optimizer is sharded over
    the expert data-parallel group tp · dp / ep = 1, the rest over dp = 8."""
    spec = load_preset("mixtral-8x7b")
    dense, experts = rank_params(spec, Layout(pp=4, dp=8, ep=8), 0)
    expert = 3 * 4096 * 14336
    assert experts == 8 * expert  # 8 layers per stage, one expert each
    r, _ = train(spec, 32, 4096, 1, pp=4, dp=8, ep=8, zero=1)
    assert r.optimizer_bytes == -(-12 * dense // 8) + 12 * experts


def test_tp_splits_kv_heads_no_further_than_there_are():
    """Llama-2-70B has 8 kv heads: at tp 16 each rank holds one whole (K and V copied on 2 ranks)."""
    spec = load_preset("llama2-70b")
    dense16, _ = rank_params(spec, Layout(tp=16, pp=80), 1)
    dense8, _ = rank_params(spec, Layout(tp=8, pp=80), 1)
    h, kv, f = 8192, 1024, 28672
    assert dense16 == (2 * h * h + 3 * h * f) // 16 + 2 * h * kv // 8 + 2 * h  # q, o, MLP ÷ 16; k, v ÷ 8; norms
    assert dense8 == (2 * h * h + 3 * h * f + 2 * h * kv) // 8 + 2 * h


# ---- (d) one GPU per replica: the figures of before --------------------------------------------------------

GOLDEN = [  # `memory --train` at commit 8e9a180 (before this layout): weights, gradients, optimizer, activations
    ('gpt3-175b', {'batch': 8, 'seq': 1024}, (349208518656, 349208518656, 2095251111936, 311186456576)),
    ('gpt3-175b', {'batch': 16, 'seq': 2048, 'recompute': 'selective', 'flash': False, 'dropout': True, 'zero': 1,
                   'micro_batch': 2, 'dp': 4}, (349208518656, 349208518656, 523812777984, 169132441600)),
    ('gpt3-175b', {'batch': 8, 'seq': 512, 'recompute': 'full', 'zero': 3, 'optimizer': 'adamw-8bit', 'dp': 8},
     (43651064832, 43651064832, 130953194496, 1512409088)),
    ('llama2-70b', {'batch': 4, 'seq': 256, 'weights_dtype': 'fp32', 'zero': 2, 'dp': 2},
     (275906592768, 137953296384, 275906592768, 11316756480)),
    ('mixtral-8x7b', {'batch': 16, 'seq': 2048, 'recompute': 'selective', 'flash': False, 'dropout': True,
                      'zero': 1, 'micro_batch': 2, 'dp': 4}, (93405585408, 93405585408, 140108378112, 32470204416)),
]


@pytest.mark.parametrize("name, kw, figures", GOLDEN)
def test_one_gpu_per_replica_is_unchanged(name, kw, figures):
    kw = dict(kw)
    dp = kw.pop("dp", 1)
    r = memory(load_preset(name), Workload(train=True, layout=Layout(dp=dp), **kw))
    assert (r.weights_bytes, r.gradient_bytes, r.optimizer_bytes, r.activation_bytes) == figures
    assert (r.stage, r.tp, r.pp, r.in_flight) == (0, 1, 1, 1)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama2-70b", "mixtral-8x7b", "deepseek-v3", "gemma2-9b", "gpt2",
                                  "qwen3-30b-a3b", "deepseek-v3.2-exp", "falcon-7b", "longformer-decoder-example"])
def test_stages_hold_every_parameter_once(name):
    """At tp 1 the stages' parameters sum to the model's (a tied head is copied to the last stage when pp > 1);
    at tp t each rank of a stage holds no more than its share plus what every rank keeps whole."""
    spec = load_preset(name)
    total = params(spec).total
    pp = next(p for p in (4, 3, 2, 1) if spec.n_layers % p == 0)
    held = sum(sum(rank_params(spec, Layout(pp=pp), r)) for r in range(pp))
    copy = spec.vocab_size * spec.d_model if spec.tie_embeddings and pp > 1 else 0
    assert held == total + copy
    assert sum(rank_params(spec, Layout(), 0)) == total


def test_most_loaded_stage_is_reported():
    r, _ = train(load_preset("llama2-70b"), 64, 4096, 1, tp=8, pp=8, dp=2, recompute="selective", sp=True)
    assert r.stage == 0 and r.total_bytes == max(r.stage_totals) == r.stage_totals[0]
    assert r.stage_totals[0] > r.stage_totals[1] and len(r.stage_totals) == 8
    with pytest.raises(UserError, match="`micro_batch`"):
        train(load_preset("llama2-70b"), 12, 4096, 1, tp=8, pp=8, vpp=2)


# ---- (c) exit codes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, flag", [
    (["--train", "--sp"], "--sp"),                                         # sp without tp
    (["--train", "--tp", "2", "--cp", "3"], "--cp"),                       # cp does not divide seq 4096
    (["--train", "--vpp", "2"], "--vpp"),                                  # vpp without pp
    (["--train", "--pp", "4", "--vpp", "3"], "--vpp"),                     # 12 chunks do not divide 32 layers
    (["--train", "--pp", "2", "--vpp", "2", "--batch", "3", "--micro-batch", "1"], "--micro-batch"),
    (["--train", "--cp", "2", "--no-flash"], "--cp"),
    (["--train", "--tp", "5"], "--tp"),
    (["--train", "--pp", "40"], "--pp"),                                   # more stages than the 32 layers
    (["--train", "--pp", "4", "--first-stage-layers", "6"], "--first-stage-layers"),  # 26 left over 3 stages
    (["--train", "--pp", "2", "--first-stage-layers", "5", "--last-stage-layers", "5"], "--first-stage-layers"),
    (["--train", "--pp", "4", "--vpp", "2", "--last-stage-layers", "7"], "--last-stage-layers"),
    (["--train", "--ep", "2"], "--ep"),
    (["--train", "--tp", "2", "--sp", "--seq", "1001"], "--sp"),
    (["--train", "--vpp", "0"], "--vpp"),
    (["--tp", "2"], "--tp"),                                               # inference stays whole-model
    (["--train", "--grad-dtype", "int4"], "--grad-dtype"),
])
def test_bad_layouts_exit_two_with_one_line(args, flag):
    r = run_cli("memory", "-p", "llama2-7b", *args)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_cli_json_fields():
    r = run_cli("memory", "-p", "llama2-70b", "--train", "--batch", "64", "--seq", "4096", "--micro-batch", "1",
                "--tp", "8", "--pp", "4", "--vpp", "5", "--dp", "2", "--sp", "--recompute", "selective",
                "--grad-dtype", "fp32", "--zero", "1", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("weights_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "total_bytes",
                "activation_bytes_per_layer", "stage", "in_flight", "micro_batches", "stage_layers"):
        assert type(out[key]) is int, key
    assert (out["tp"], out["pp"], out["vpp"], out["sp"], out["grad_dtype"]) == (8, 4, 5, True, "fp32")
    assert out["stage"] == 0 and out["in_flight"] == 4 * 5 + 4 - 1 and out["micro_batches"] == 32
    assert out["activation_bytes_per_layer"] == 4096 * 8192 * 67 // 2 // 8
