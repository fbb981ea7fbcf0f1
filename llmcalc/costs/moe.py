"""MoE routing costs: expert capacity, expected dropped tokens, router FLOPs, dropless vs padded
expert FLOPs. See docs/moe.md.

  capacity  C = min(ceil(cf · T · k / E), T) (Switch: cf · T / E with k = 1; GShard: 2T/E)
  routing   each token picks k distinct experts uniformly at random, independently across tokens,
            so one expert's load X ~ Binomial(T, k/E)
  dropped   E · E[max(0, X − C)] assignments per MoE layer (exact binomial sum)
  router    2 · T · d · (E + Z) per MoE layer (Z zero experts, LongCat-Flash; 0 otherwise)
  experts   dropless 2 · T · k · W_e;  padded to capacity 2 · E · C · W_e  (W_e: one expert's matmul weights)
  ep        the busiest of ep expert-parallel ranks at the traffic's skew (llmcalc/costs/expert_balance.py)

Pure: no I/O, no torch.
"""

from __future__ import annotations

import math
from fractions import Fraction

from llmcalc.errors import UserError
from llmcalc.model.ffn import mlp_params, weights
from llmcalc.model.moe import MoE
from llmcalc.model.spec import ModelSpec
from llmcalc.model.units import MAC
from llmcalc.costs.expert_balance import busiest_rank
from llmcalc.reports.moe import MoEParallelRow, MoEPhaseRow, MoEReport
from llmcalc.workload import Workload

SPAN = 40
"""The exact sum covers the expert's load within SPAN standard deviations of its mean (and a margin):
the binomial mass outside is far below double precision."""
EXACT_TERMS = 200_000
"""Above this many terms (σ ≳ 2,500, e.g. T ≳ 5·10⁷ tokens at k/E = 1/8) the normal approximation is used."""
EP_DEGREES = (2, 4, 8, 16, 32, 64, 128, 256)
"""The expert-parallel degrees the report lists, those that divide the experts."""
FORMULA = ("C = min(ceil(cf · T · k / E), T); X ~ Binomial(T, k/E); dropped = E · E[max(0, X − C)]; "
           "router = 2 · T · d · E; experts dropless = 2 · T · k · W_e, padded = 2 · E · C · W_e (per MoE layer)")


def capacity(capacity_factor: float, tokens: int, top_k: int, experts: int) -> int:
    """C = min(ceil(cf · T · k / E), T), with cf read as the decimal it is written as (1.2 is 6/5, not
    the binary float just above it), so the ceiling is exact. An expert receives at most T tokens
    (each token picks distinct experts), so a larger capacity is clamped to T, as DeepSpeed does."""
    return min(math.ceil(Fraction(repr(float(capacity_factor))) * tokens * top_k / experts), tokens)


def _window(tokens: int, p: float) -> tuple[int, int]:
    mean, sd = tokens * p, math.sqrt(tokens * p * (1 - p))
    return max(0, math.floor(mean - SPAN * sd) - 10), min(tokens, math.ceil(mean + SPAN * sd) + 10)


def _pmf(tokens: int, p: float, lo: int, hi: int) -> list[float]:
    """P(X = x) for x = lo..hi, from the log-space pmf (lgamma), so no term under- or overflows in between."""
    lt, lp, lq = math.lgamma(tokens + 1), math.log(p), math.log1p(-p)
    return [math.exp(lt - math.lgamma(x + 1) - math.lgamma(tokens - x + 1) + x * lp + (tokens - x) * lq)
            for x in range(lo, hi + 1)]


def exact(tokens: int, top_k: int, experts: int) -> bool:
    """Whether expected_overflow uses the exact binomial sum (else the normal approximation)."""
    lo, hi = _window(tokens, top_k / experts)
    return top_k == experts or hi - lo + 1 <= EXACT_TERMS


def expected_overflow(tokens: int, top_k: int, experts: int, cap: int) -> float:
    """E[max(0, X − C)] for one expert, X ~ Binomial(T, k/E): the assignments it drops.

    Exact: the upper tail Σ_{x>C} (x − C)·P(x) when C ≥ E[X] (no cancellation when the answer is tiny),
    else the complementary E[X] − C + Σ_{x<C} (C − x)·P(x). Each sum runs over the window where the
    pmf is not negligible. Above EXACT_TERMS terms: the normal approximation σ·φ(z) + (μ − C)·Φ(z),
    z = (μ − C)/σ.
    """
    if cap >= tokens:
        return 0.0
    if top_k == experts:  # every expert gets every token
        return float(tokens - cap)
    p = top_k / experts
    mean, sd = tokens * p, math.sqrt(tokens * p * (1 - p))
    if not exact(tokens, top_k, experts):
        z = (mean - cap) / sd
        return sd * math.exp(-z * z / 2) / math.sqrt(2 * math.pi) + (mean - cap) * 0.5 * math.erfc(-z / math.sqrt(2))
    lo, hi = _window(tokens, p)
    if cap >= mean:
        start = max(cap + 1, lo)
        if start > hi:
            return 0.0
        return sum((x - cap) * q for x, q in zip(range(start, hi + 1), _pmf(tokens, p, start, hi)))
    stop = min(cap - 1, hi)
    below = sum((cap - x) * q for x, q in zip(range(lo, stop + 1), _pmf(tokens, p, lo, stop))) if stop >= lo else 0.0
    return mean - cap + below


def expected_busiest(tokens: int, top_k: int, experts: int) -> float:
    """E[max_e X_e], the busiest expert's load, treating the E loads as independent (they are slightly
    negatively correlated, so this leans high): Σ_m (1 − F(m)^E) over the window."""
    if top_k == experts:
        return float(tokens)
    p = top_k / experts
    lo, hi = _window(tokens, p)
    if hi - lo + 1 > EXACT_TERMS:  # normal approximation of the largest of E: μ + σ·sqrt(2 ln E)
        return tokens * p + math.sqrt(tokens * p * (1 - p)) * math.sqrt(2 * math.log(experts))
    cdf, total = 0.0, float(lo)  # max ≥ lo almost surely: Σ_{m<lo} 1 = lo
    for m, q in zip(range(lo, hi + 1), _pmf(tokens, p, lo, hi)):
        cdf = min(1.0, cdf + q)
        total += 1 - cdf ** experts
    return total


def expert_weights(moe: MoE, d_model: int) -> int:
    """W_e: the matmul weights of one routed expert (2 FLOPs per weight per routed row)."""
    return weights(mlp_params(d_model, moe.d_ff, gated=moe.gated, bias=False))


def phase(name: str, moe: MoE, d_model: int, layers: int, tokens: int, cf: float | None) -> MoEPhaseRow:
    """One phase (T routed tokens per MoE layer) over the model's `layers` MoE layers."""
    E, k, w = moe.experts, moe.top_k, expert_weights(moe, d_model)
    router = MAC * tokens * d_model * moe.router_width  # E + Z logits (Z zero experts: LongCat-Flash)
    dropless = MAC * tokens * k * w
    mean = tokens * k / E
    sd = math.sqrt(tokens * (k / E) * (1 - k / E))
    cap = capacity(cf, tokens, k, E) if cf is not None else None
    dropped = E * expected_overflow(tokens, k, E, cap) if cap is not None else 0.0
    busiest = expected_busiest(tokens, k, E)
    return MoEPhaseRow(
        phase=name, layers=layers, experts=E, top_k=k, shared_experts=moe.shared_experts, tokens=tokens,
        assignments=tokens * k, capacity=cap, expected_tokens_per_expert=mean, load_std=sd,
        expected_busiest_load=busiest, busiest_to_mean=busiest / mean,
        expected_dropped=dropped, dropped_fraction=dropped / (tokens * k),
        expected_dropped_all_layers=dropped * layers,
        padding_fraction=None if cap is None else max(0.0, 1 - (tokens * k - dropped) / (E * cap)),
        exact=exact(tokens, k, E),
        router_flops_per_layer=router, router_flops=layers * router,
        expert_flops_dropless=layers * dropless,
        expert_flops_padded=None if cap is None else layers * MAC * E * cap * w,
        expert_flops_processed=layers * MAC * (tokens * k - dropped) * w,
    )


def moe_report(spec: ModelSpec, w: Workload, capacity_factor: float | None = None) -> MoEReport:
    """Capacity, expected drops and FLOPs of the MoE layers for the workload's prefill (T = B·S) and one
    decode step (T = B). capacity_factor overrides the spec's; None on both: dropless."""
    moe, batch, seq = spec.ffn, w.batch, w.seq
    if not moe.routed_experts:
        raise UserError(f"moe: {spec.name} has no MoE layers (ffn is {spec.ffn.kind}); give an MoE model, e.g. "
                        "`preset` mixtral-8x7b or switch-base-8-decoder")
    if capacity_factor is not None and not (math.isfinite(capacity_factor) and capacity_factor > 0):
        raise UserError(f"`capacity_factor`: must be a finite number > 0 (got {capacity_factor}); e.g. 1.25")
    cf = capacity_factor if capacity_factor is not None else moe.capacity_factor
    layers = sum(g.count for g in spec.layer_groups() if g.ffn.routed_experts)
    d = spec.d_model
    rows = [phase("prefill", moe, d, layers, batch * seq, cf), phase("decode", moe, d, layers, batch, cf)]
    notes = [
        "routing assumption: each token picks top_k distinct experts uniformly at random, independently of "
        "the other tokens, so one expert's load is Binomial(T, k/E); a trained router's loads differ (skewed: more "
        "drops; balanced by an auxiliary loss or bias: closer to this)",
        "prefill routes T = B·S tokens per MoE layer at once; decode routes one token per sequence, T = B",
        "router FLOPs equal `llmcalc flops`' ffn/router row; dropless expert FLOPs its ffn/experts row",
        "padded: a capacity-based kernel computes E·C rows whatever the load (Switch, GShard); processed: "
        "the assignments kept, T·k − dropped",
        "busiest expert: E[max of the E loads] with the loads taken as independent; in a dropless "
        "implementation it sets the MoE layer's time",
    ]
    if cf is None:
        notes.insert(0, "dropless: no capacity factor in the spec and none given (`capacity_factor`), so no "
                        "assignment is dropped and nothing is padded")
    if moe.shared_experts:
        notes.append(f"{moe.shared_experts} shared expert(s) take every token and are never dropped; not counted here")
    if not all(r.exact for r in rows):
        notes.append(f"loads with more than {EXACT_TERMS:,} non-negligible terms use the normal approximation")
    skew = w.routing_skew
    parallel = [MoEParallelRow(ep=ep, experts_per_rank=moe.routed_experts // ep,
                               busiest_rank=busiest_rank(moe.routed_experts, ep, moe.top_k, skew))
                for ep in EP_DEGREES if ep <= moe.routed_experts and not moe.routed_experts % ep]
    notes.append(f"expert parallel: the busiest of ep ranks, each holding E/ep experts, at the traffic's expert skew "
                 f"{skew:g} (`expert_skew`: the experts' popularity as a coefficient of variation; 0: uniform); "
                 "`latency`, `serve` and `plan` time each MoE layer at it (docs/moe.md#expert-parallel-load)")
    return MoEReport(model=spec.name, batch=batch, seq=seq, capacity_factor=cf,
                     capacity_source="option" if capacity_factor is not None else "spec" if cf is not None else "none",
                     d_model=d, d_ff=moe.d_ff, expert_weights=expert_weights(moe, d), rows=rows,
                     expert_skew=skew, expert_parallel=parallel, formula=FORMULA, notes=notes)
