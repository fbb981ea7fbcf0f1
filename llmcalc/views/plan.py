"""`llmcalc plan`: the deployments of a model that meet latency targets under a load, cheapest first. See
docs/serving.md.

Candidates: for each GPU kind, every layout of at most max_gpus GPUs (tp a power of two within a node, pp of
PIPELINES, ep 1 or one that divides the experts and tp · dp, dp replicas), each weights dtype the GPU computes
(bf16; fp8 where it has an fp8 peak; a quantised checkpoint only as it ships: precisions()) and each max_seqs of
MAX_SEQS; with `disaggregated`, also a prefill pool (tp_p · dp_p GPUs) beside a decode pool. Two passes:

1. Closed form, per engine (a replica's pp virtual engines share its rate λ_e = λ / (dp · pp)), from the engine's
   step (llmcalc/costs/engine_step.py) at the mean lengths P and O, b sequences at context P + O/2:
     Δ = t_step(b decodes + a prompt) − t_decode(b)  (what a prompt adds to the step it rides in),
     ρ_p = λ_e · Δ < 1  (the share of time prompts take),
     TPOT = t_decode(b) / (1 − ρ_p)  (prompt chunks stretch the decode steps),
     TTFT = t_decode(b) + Δ + ρ_p / (2 (1 − ρ_p)) · Δ  (the step that runs it, after the prompts ahead: an
            M/D/1 queue, as the scheduler admits waiting prompts at once), plus t_decode(b) under overlap
            scheduling (the step already planned when it arrives: Engine.overlap_scheduling),
     b = λ_e · (TTFT + (O − 1) · TPOT)  (Little's law), solved by iteration; the TTFT reported adds the host's
     request_s (spent before the engine holds the request, so not in b); the busy share is
     ρ = ρ_p + λ_e · (O − 1) · t_decode(b) / b ≤ 1;
   feasible when the iteration settles (else the batch grows without bound: the engine does not keep up),
   b ≤ max_seqs and b requests' KV fit. Disaggregated: the prefill pool runs prompts alone (ρ_p = λ·t_prefill(P),
   TTFT = t_prefill + ρ_p / (2 (1 − ρ_p)) · t_prefill, plus the KV transfer: bytes / link); the decode pool has
   TPOT = t_decode(b).
   Each candidate's saturation throughput: its engines full (full_batch = min(max_seqs, KV fit) each), decode
   steps alone at context P + O/2 (costs/engine_step.py: decode_ceiling); disaggregated, also the prefill pool's
   prompts/s (prefill_ceiling) · O.
2. The simulator (llmcalc/views/serve.py) runs the cheapest feasible candidates (cost per million output tokens,
   then GPUs) and keeps those whose p99 TTFT and p99 TPOT meet the targets.

Bounds: max_gpus at most MAX_GPUS; the closed-form candidates, counted before any is evaluated (with
`disaggregated` as if every prefill pool kept up), at most MAX_CANDIDATES; at most max(3 · top, 10) simulations
of `requests` requests each, MAX_SIMULATED requests and (at the output's mean length) MAX_OUTPUT_TOKENS output
tokens in all, each run within serve's own bounds.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from llmcalc.costs.capacity import engine_pool
from llmcalc.costs.engine_step import EngineStep, decode_ceiling, prefill_ceiling
from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.shard import kv_per_gpu
from llmcalc.costs.weights import formats_label, quantised_label
from llmcalc.errors import UserError
from llmcalc.inputs.requests import Lengths, check_requests
from llmcalc.model.engine import Engine, Settings
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import TimeModel
from llmcalc.reports.plan import PlanCandidate, PlanReport, PrefillPool
from llmcalc.views.serve import MAX_OUTPUT_TOKENS, SLO, Load, make_requests, serve, shared_steps
from llmcalc.workload import Layout, Workload

MAX_GPUS = 1024
"""Most GPUs a searched deployment may use: the layouts grow linearly with it (about 7 per GPU and GPU kind)."""
MAX_CANDIDATES = 250_000
"""Most closed-form candidates one search evaluates (up to ~30 s and ~0.5 GB on a loaded 2-core machine); with
`disaggregated` they grow as max_gpus², so 64 GPUs of three kinds is about the most that fits."""
MAX_SIMULATED = 100_000
"""Most requests the finalists' simulations run in all: max(3 · top, 10) finalists at most, `requests` each."""
MAX_SEQS = (16, 32, 64, 128, 256, 512)
PIPELINES = (1, 2, 4, 8)
NODE = 8
"""GPUs per node where the GPU's spec does not say."""
FORMULA = ("ρ_p = λ_e·Δ, Δ what a prompt adds to a decode step; TPOT = t_decode(b)/(1 − ρ_p); "
           "b = λ_e·(TTFT + (O−1)·TPOT) (Little); finalists simulated; $/M tokens = GPUs · price_per_hour / "
           "(output tokens/s · 3600) · 10⁶")


@dataclass(frozen=True)
class Estimate:
    """The closed-form pass at one engine's rate: the concurrency b it settles at, its latencies and load."""

    b: float
    ttft: float
    tpot: float
    rho: float


def steady(step: EngineStep, prompt: int, output: int, rate: float, disaggregated: str = "",
           overlap: bool = False) -> Estimate | None:
    """The fixed point of the module docstring's pass 1 for one engine at `rate` requests/s; None when it does not
    keep up. `disaggregated`: "prefill" (a prefill pool: prompts alone) or "decode" (a decode pool: no prompts).
    `overlap`: the engine plans each step while the one before runs."""
    if disaggregated == "prefill":
        t_pre = step.time([(prompt, 0)], [])
        rho_p = rate * t_pre
        return Estimate(0.0, t_pre + rho_p / (2 * (1 - rho_p)) * t_pre + step.request_s, 0.0, rho_p) \
            if rho_p < 1 else None
    ctx, decodes = prompt + output // 2, max(output - 1, 0)
    b = 1.0
    for _ in range(100):
        n = max(1, round(b))
        t_d = step.decode_time(n, ctx)
        # a prompt rides in a decode step and adds what its tokens cost there (the weights are read anyway)
        extra = 0.0 if disaggregated == "decode" else step.decode_time(n, ctx, prompt) - t_d
        rho_p = rate * extra
        if rho_p >= 1:
            return None
        tpot = t_d / (1 - rho_p)
        ttft = 0.0 if disaggregated else (2 if overlap else 1) * t_d + extra + rho_p / (2 * (1 - rho_p)) * extra
        nxt = rate * (ttft + decodes * tpot)
        if nxt > 2 * MAX_SEQS[-1]:  # the batch grows without bound: the engine does not keep up
            return None
        if abs(nxt - b) <= 0.005 * b + 0.01:  # the host's request_s is spent before the engine holds it
            return Estimate(nxt, ttft + (0.0 if disaggregated else step.request_s), tpot, min(1.0, rho_p + rate * decodes * t_d / max(nxt, 1.0)))
        b = (b + nxt) / 2
    return None


def layouts(spec: ModelSpec, gpu: GPU, max_gpus: int) -> Iterator[Layout]:
    """Every valid layout of at most max_gpus GPUs (module docstring)."""
    node = gpu.gpus_per_node or NODE
    experts = spec.ffn.routed_experts
    tps = [t for t in (1, 2, 4, 8, 16) if t <= min(node, max_gpus)]
    for tp in tps:
        for pp in PIPELINES:
            for dp in range(1, max_gpus // (tp * pp) + 1):
                eps = {1} | ({e for e in (tp, tp * dp) if e > 1 and experts % e == 0} if experts else set())
                for ep in sorted(eps):
                    L = Layout(tp=tp, pp=pp, dp=dp, ep=ep)
                    try:
                        L.check(spec, dp)
                    except UserError:
                        continue
                    yield L


class Precision(NamedTuple):
    """One way a candidate runs the model: its label (the candidate's weights_dtype), the Workload fields it sets,
    its KV cache dtype and whether it is the checkpoint as it ships."""

    label: str
    fields: dict[str, str]
    kv_dtype: str
    shipped: bool = False


def precisions(spec: ModelSpec, gpu: GPU, engine: Engine) -> list[Precision]:
    """bf16, and fp8 where the GPU has an fp8 peak (its matmuls then run in fp8), each with its KV cache in that
    dtype; a checkpoint that ships quantised only as it ships (shipped_precision): another precision would be
    another checkpoint."""
    shipped = shipped_precision(spec, engine)
    if shipped is not None:
        return [shipped]
    return [Precision(d, {"weights_dtype": d, "kv_dtype": d, "compute_dtype": d}, d)
            for d in ["bf16"] + (["fp8"] if gpu.peak_tflops.fp8 else [])]


def shipped_precision(spec: ModelSpec, engine: Engine) -> Precision | None:
    """A checkpoint that ships quantised as it ships: its formats (labelled by those that quantise: fp8-block,
    gptq-int4-g128, experts mxfp4), each matmul in its format's native type, its KV cache in the engine's default
    (the dtype the checkpoint states where the engine takes it, else bf16), as `serve` runs it; None for weights
    that come unquantised."""
    ckpt = spec.checkpoint
    if ckpt is None or not ckpt.formats.quantized:
        return None
    kv = engine.stated_kv_dtype(ckpt) or "bf16"
    return Precision(quantised_label(spec, ckpt.formats), {"kv_dtype": kv}, kv, shipped=True)


class Pool(NamedTuple):
    """One engine of a candidate layout: its step, KV bytes per GPU, workload and KV tokens (serve's kv_tokens)."""

    step: EngineStep
    budget: int
    w: Workload
    kv_tokens: int


def precision_note(spec: ModelSpec, engine: Engine) -> str:
    """What the candidates' weights_dtype and KV cache mean for `spec` on `engine` (precisions())."""
    shipped = shipped_precision(spec, engine)
    if shipped is None:
        return "weights in bf16, or fp8 where the GPU computes it, the KV cache in the weights' dtype"
    why = ("the checkpoint states it and the engine takes it" if engine.stated_kv_dtype(spec.checkpoint) else
           "the engine's default for this checkpoint")
    return (f"weights as the checkpoint ships them ({formats_label(spec, spec.checkpoint.formats)}); KV cache "
            f"{shipped.kv_dtype} ({why})")


class _Engines:
    """Engine pools per (GPU, layout without dp unless ep spans replicas, precision), built once, on `engine`'s
    settings for each GPU, the experts' load at `expert_skew` (Workload's)."""

    def __init__(self, spec: ModelSpec, tms: dict[str, TimeModel], engine: Engine, expert_skew: float | None = None):
        self.spec, self.tms, self.engine, self.expert_skew = spec, tms, engine, expert_skew
        self.cache: dict[tuple, Pool | None] = {}
        self.refused: UserError | None = None  # the engine's own refusal of a GPU and layout, where one was met

    def settings(self, gpu: GPU, L: Layout, **given: int | None) -> Settings:
        """The engine's settings on `gpu` for an instance of layout `L`, `given` in place of its own."""
        return self.engine.settings(gpu, L, context=self.spec.max_seq_len, named=("engine", None), **given)

    def precisions(self, gpu: GPU) -> list[Precision]:
        """The precisions the search runs the model in on `gpu` (precisions())."""
        return precisions(self.spec, gpu, self.engine)

    def precision(self, gpu: GPU, label: str) -> Precision:
        """The precision a candidate on `gpu` names by its weights_dtype `label`."""
        return next(p for p in self.precisions(gpu) if p.label == label)

    def get(self, gpu: GPU, L: Layout, p: Precision) -> Pool | None:
        """The pool of `gpu`, `L` and precision `p`, or None when the weights and workspace do not fit."""
        key = (gpu.name, L.tp, L.pp, L.ep, L.dp if L.attention_dp else 0, p.label)
        if key not in self.cache:
            w = Workload(**p.fields, layout=L, expert_skew=self.expert_skew)
            try:
                settings = self.settings(gpu, L)
            except UserError as e:  # plan gives the engine no setting: its own file's rules refuse this one
                self.cache[key], self.refused = None, e
                return None
            try:
                pool = engine_pool(self.spec, gpu, w, settings)
            except UserError:
                self.cache[key] = None
            else:
                w = pool.workload
                self.cache[key] = (Pool(EngineStep(self.spec, gpu, w, self.tms[gpu.name]), pool.budget, w, pool.tokens)
                                   if pool.free > 0 else None)
        return self.cache[key]


def search_size(grids: dict[str, list[Layout]], gpus: list[GPU], max_gpus: int, disaggregated: bool,
                spec: ModelSpec, engine: Engine) -> int:
    """Closed-form candidates the search of `grids` (each GPU's layouts of at most max_gpus) evaluates: exact
    without `disaggregated`; with it, as if every prefill pool kept up (an upper bound). Counted, not built."""
    total = 0
    for gpu in gpus:
        grid = grids[gpu.name]
        n = len(grid)
        if disaggregated:
            decode = sorted(L.gpus for L in grid if L.pp == 1 and L.gpus < max_gpus)
            n += sum(bisect_right(decode, max_gpus - Lp.gpus) for Lp in _pools(grid, max_gpus))
        total += n * len(precisions(spec, gpu, engine)) * len(MAX_SEQS)
    return total


def check_bounds(max_gpus: int, top: int, requests: int, output: float) -> None:
    """The bounds of the module docstring that the arguments alone decide, checked before any work; `output` the
    output lengths' mean."""
    if max_gpus > MAX_GPUS:
        raise UserError(f"`max_gpus`: {max_gpus:,} is more than the {MAX_GPUS:,} GPUs a deployment may use here; "
                        f"give {MAX_GPUS:,} or fewer")
    if max(3 * top, 10) * requests > MAX_SIMULATED:
        raise UserError(f"`requests`: {requests:,} requests for each of up to {max(3 * top, 10)} finalists is more "
                        f"than {MAX_SIMULATED:,} simulated requests; give fewer `requests` or a smaller `top`")
    tokens = max(3 * top, 10) * requests * output
    if tokens > MAX_OUTPUT_TOKENS:
        raise UserError(f"`requests`: {requests:,} requests of {output:,.0f} output tokens for each of up to "
                        f"{max(3 * top, 10)} finalists is {tokens:,.0f} tokens to simulate, more than "
                        f"{MAX_OUTPUT_TOKENS:,}; give fewer `requests`, a smaller `top` or a shorter `output`")


def plan(spec: ModelSpec, gpus: list[GPU], tms: dict[str, TimeModel], max_gpus: int, rate: float, prompt: Lengths,
         output: Lengths, prompt_text: str, output_text: str, slo: SLO, prices: dict[str, float | None],
         engine: Engine, disaggregated: bool = False, top: int = 5, requests: int = 400, seed: int = 0,
         timings: bool = False, expert_skew: float | None = None,
         progress: Callable[[str, int, int], None] | None = None) -> PlanReport:
    """Rank the deployments of `spec` on `gpus` (at most max_gpus each) that meet `slo` at `rate` requests/s on
    `engine` (its settings on each GPU, max_seqs searched), the experts' load at `expert_skew` (Workload's).
    `timings`: report the closed-form pass's seconds (search_s). `progress(what, done, total)` is told of each
    layout evaluated and each simulation."""
    spec.stack.check_decoding("model")
    if not rate > 0 or rate == float("inf"):
        raise UserError(f"`rate`: {rate:g} is not a finite positive number of requests/s; give e.g. 10")
    check_requests(requests)
    check_bounds(max_gpus, top, requests, output.mean)
    grids = {g.name: list(layouts(spec, g, max_gpus)) for g in gpus}
    total = search_size(grids, gpus, max_gpus, disaggregated, spec, engine)
    if total > MAX_CANDIDATES:
        raise UserError(f"`max_gpus`: {max_gpus:,} GPUs of {len(gpus)} kind(s){' disaggregated' * disaggregated} "
                        f"make {total:,} candidates, more than the {MAX_CANDIDATES:,} a search evaluates; give a "
                        f"smaller `max_gpus`, fewer `gpu`{' or leave out `disaggregated`' * disaggregated}")
    tell = progress or (lambda what, done, total: None)
    in_len, out_len = round(prompt.mean), round(output.mean)
    engines = _Engines(spec, tms, engine, expert_skew)
    t0 = time.perf_counter()
    rows: list[PlanCandidate] = []
    searched = 0
    per_request = {}  # kv bytes per GPU of one request at full length, by workload key
    for gpu in gpus:
        price = prices.get(gpu.name)
        for p in engines.precisions(gpu):
            for L in grids[gpu.name]:
                searched += len(MAX_SEQS)
                tell("closed form", searched, total)
                got = engines.get(gpu, L, p)
                if got is None:
                    continue
                step, budget, w, kv_tokens = got
                key = (gpu.name, L.tp, L.pp, p.label)
                if key not in per_request:
                    per_request[key] = kv_per_gpu(spec, 1, in_len + out_len, w)
                fit = budget // per_request[key] if per_request[key] else 10**9
                est = steady(step, in_len, out_len, rate / (L.dp * L.pp), overlap=engines.engine.overlaps(L.pp))
                if est is None:
                    continue
                for m in MAX_SEQS:
                    if est.b > min(m, fit):
                        continue
                    full = min(m, fit)
                    ceiling = decode_ceiling(step, full, in_len + out_len // 2, L.dp * L.pp)
                    rows.append(_candidate(gpu, L, p, m, None, est, rate, out_len, price, slo, full, ceiling,
                                           kv_tokens))
        if disaggregated:
            found, searched = _disaggregated(spec, gpu, grids[gpu.name], engines, max_gpus, rate, in_len, out_len,
                                             price, slo, searched, lambda done: tell("closed form", done, total))
            rows += found
    search_s = time.perf_counter() - t0
    if not rows and engines.refused is not None:  # no candidate, and the engine's own rules refused a GPU
        raise engines.refused
    feasible = [c for c in rows if c.meets_slo]
    feasible.sort(key=_rank)
    finalists, done = [], set()
    simulated = 0
    with shared_steps():  # the finalists' runs are bounded as one `serve` run is
        for c in feasible:  # a deployment is listed once, at the smallest max_seqs that meets the targets
            key = (c.gpu, c.tp, c.pp, c.ep, c.dp, c.weights_dtype, c.prefill)
            if key in done:  # kept, or its TPOT missed: a larger max_seqs only makes the batch larger
                continue
            if len(finalists) >= top or simulated >= max(3 * top, 10):
                break
            simulated += 1
            tell("simulating finalists", simulated, max(3 * top, 10))
            checked = _simulate(spec, c, {g.name: g for g in gpus}[c.gpu], tms[c.gpu], engines, rate, prompt,
                                output, prompt_text, output_text, slo, requests, seed)
            if checked.meets_slo:
                finalists.append(checked)
            if checked.meets_slo or slo.tpot_s is not None and checked.tpot_p99_s > slo.tpot_s:
                done.add(key)
    finalists.sort(key=_rank)
    notes = [f"{searched:,} candidates in closed form ({len(feasible):,} within {SLACK} × the targets there); "
             f"the {simulated} cheapest of them simulated ({requests} Poisson requests each), {len(finalists)} met "
             "them",
             f"engine: {engine.label} {engine.version} ({engine.policy} steps, "
             f"{'chunked prefill, ' if engine.chunked_prefill else ''}its token budget and memory share for each "
             "GPU's memory)", precision_note(spec, engine)]
    if not any(prices.get(g.name) for g in gpus):
        notes.append("no price_per_hour for these GPUs (give --price GPU=USD): ranked by output tokens/s per GPU")
    if not finalists:
        notes.append("no deployment met the targets: raise max_gpus, relax the targets or lower the rate")
    return PlanReport(model=spec.name, gpus=[g.name for g in gpus], max_gpus=max_gpus, rate=rate, prompt=prompt_text,
                      output=output_text, slo_ttft_s=slo.ttft_s, slo_tpot_s=slo.tpot_s, searched=searched,
                      feasible=len(feasible), simulated=simulated, search_s=search_s if timings else None,
                      candidates=finalists, formula=FORMULA, notes=notes)


def _rank(c: PlanCandidate) -> tuple:
    """Cheapest per million tokens, then most tokens/s per GPU, then fewest GPUs, then the lowest p99 TPOT and
    TTFT, then the smallest max_seqs."""
    cost = c.usd_per_million_tokens if c.usd_per_million_tokens is not None else float("inf")
    return cost, -c.output_tokens_per_s_per_gpu, c.gpus, c.tpot_p99_s, c.ttft_p99_s, c.max_seqs


SLACK = 1.2
"""The closed-form pass keeps candidates whose mean estimates are within SLACK × the targets (the simulator then
judges their p99): estimates of a few tens of percent either way must not prune a deployment that meets them."""


def _meets(ttft: float, tpot: float, slo: SLO, slack: float = 1.0) -> bool:
    return (slo.ttft_s is None or ttft <= slack * slo.ttft_s) and (slo.tpot_s is None or tpot <= slack * slo.tpot_s)


def _candidate(gpu: GPU, L: Layout, p: Precision, max_seqs: int, pool: PrefillPool | None, est: Estimate,
               rate: float, out_len: int, price: float | None, slo: SLO, full: int, saturation: float,
               kv_tokens: int, ttft: float | None = None, gpus: int | None = None) -> PlanCandidate:
    """A candidate's row from its closed-form estimate; `full`: one engine's full batch, `saturation`: the output
    tokens/s the deployment sustains full (decode_ceiling, with a prefill pool's bound), `kv_tokens`: one
    (decode) engine's KV cache in tokens."""
    gpus = gpus or L.gpus
    tokens = rate * out_len
    ttft = est.ttft if ttft is None else ttft
    return PlanCandidate(
        gpu=gpu.name, gpus=gpus, tp=L.tp, pp=L.pp, ep=L.ep, dp=L.dp, weights_dtype=p.label, shipped=p.shipped,
        kv_dtype=p.kv_dtype, max_seqs=max_seqs,
        disaggregated=pool is not None, prefill=pool, meets_slo=_meets(ttft, est.tpot, slo, SLACK), simulated=False,
        output_tokens_per_s_per_gpu=tokens / gpus, full_batch=full, kv_tokens=kv_tokens,
        saturation_tokens_per_s=saturation,
        headroom=saturation / tokens,
        usd_per_million_tokens=gpus * price / (tokens * 3600) * 1e6 if price else None,
        ttft_p99_s=ttft, tpot_p99_s=est.tpot, utilization=est.rho)


def _pools(grid: list[Layout], max_gpus: int) -> list[Layout]:
    """The prefill pools of a disaggregated search: pp 1, experts within tp, leaving a GPU for decode."""
    return [L for L in grid if L.pp == 1 and L.ep <= L.tp and L.gpus < max_gpus]


def _disaggregated(spec: ModelSpec, gpu: GPU, grid: list[Layout], engines: _Engines, max_gpus: int, rate: float,
                   in_len: int, out_len: int, price: float | None, slo: SLO, tried: int,
                   tell: Callable[[int], None]) -> tuple[list[PlanCandidate], int]:
    """Prefill pools (tp_p · dp_p GPUs, pp 1) beside decode pools (pp 1), within max_gpus together, from `grid`
    (the layouts of at most max_gpus: those of fewer GPUs are its layouts that use no more): the candidates that
    keep up, and `tried` plus how many were tried."""
    out, decodes = [], [L for L in grid if L.pp == 1]
    for p in engines.precisions(gpu):
        pools = []
        for L in _pools(grid, max_gpus):
            got = engines.get(gpu, L, p)
            est = got and steady(got[0], in_len, out_len, rate / L.dp, "prefill")
            if est:
                pools.append((L, est, prefill_ceiling(got[0], in_len, L.dp) * out_len))
        for Lp, pre, pool_ceiling in pools:
            link = gpu.link(max_gpus)
            transfer = kv_bytes(spec, 1, in_len, p.kv_dtype) / (link.bytes_per_s * Lp.tp) + link.latency_s
            pool = PrefillPool(gpus=Lp.gpus, tp=Lp.tp, dp=Lp.dp, kv_transfer_s=transfer)
            for L in decodes:
                if L.gpus > max_gpus - Lp.gpus:
                    continue
                tried += len(MAX_SEQS)
                tell(tried)
                got = engines.get(gpu, L, p)
                if got is None:
                    continue
                step, budget, w, kv_tokens = got
                est = steady(step, in_len, out_len, rate / L.dp, "decode")
                if est is None:
                    continue
                fit = budget // max(kv_per_gpu(spec, 1, in_len + out_len, w), 1)
                for m in MAX_SEQS:
                    if est.b <= min(m, fit):
                        full = min(m, fit)
                        # the decode pool makes O − 1 of each request's O output tokens, the prefill pool the first
                        decode = decode_ceiling(step, full, in_len + out_len // 2, L.dp * L.pp)
                        ceiling = min(decode * out_len / (out_len - 1), pool_ceiling) if out_len > 1 else pool_ceiling
                        out.append(_candidate(gpu, L, p, m, pool, est, rate, out_len, price, slo, full, ceiling,
                                              kv_tokens, ttft=pre.ttft + transfer, gpus=Lp.gpus + L.gpus))
    return out, tried


def _simulate(spec: ModelSpec, c: PlanCandidate, gpu: GPU, tm: TimeModel, engines: _Engines, rate: float,
              prompt: Lengths, output: Lengths, prompt_text: str, output_text: str, slo: SLO, n: int,
              seed: int) -> PlanCandidate:
    """The candidate run through `llmcalc serve`'s simulator: p99 TTFT and TPOT, and whether they meet `slo`."""
    load = Load(rate=rate)
    rows = make_requests(n, prompt, output, load, seed)
    L = Layout(tp=c.tp, pp=c.pp, dp=c.dp, ep=c.ep)
    p = engines.precision(gpu, c.weights_dtype)
    w = engines.get(gpu, L, p).w.model_copy(update={"layout": L})  # the cached one may differ in dp
    engine = engines.settings(gpu, L, max_seqs=c.max_seqs)
    if c.prefill is None:
        r = serve(spec, gpu, w, tm, rows, engine, load, prompt_text, output_text, slo, seed)
        ttft, tpot = r.ttft_s.p99, r.tpot_s.p99
    else:  # the prefill pool emits the first token; the decode pool gets each request after its KV arrives
        pool = c.prefill
        Lp = Layout(tp=pool.tp, dp=pool.dp)
        wp = engines.get(gpu, Lp, p).w.model_copy(update={"layout": Lp})
        first = serve(spec, gpu, wp, tm, [(a, p, 1) for a, p, _ in rows], engines.settings(gpu, Lp), load, prompt_text,
                      "1", slo, seed)
        ready = [(x.arrival_s + x.ttft_s + pool.kv_transfer_s, x.prompt, o) for x, (_, _, o) in
                 zip(first.timeline, sorted(rows))]
        decode = serve(spec, gpu, w, tm, ready, engine, load, prompt_text, output_text, slo, seed,
                       prefix_hit=0.999)
        ttft = first.ttft_s.p99 + pool.kv_transfer_s
        tpot = decode.tpot_s.p99
    return c.model_copy(update={"simulated": True, "ttft_p99_s": ttft, "tpot_p99_s": tpot,
                                "meets_slo": _meets(ttft, tpot, slo)})
