"""Sweeps over (batch, seq): the figures of kv_cache, memory, flops and latency at many points, fast.

`Sweeper(spec, gpu, options)` does once per model all the work that does not depend on the point;
`point(B, S)` then costs a few int operations. Per attention window w of the layer groups (full
attention: w = ∞), with keys k_w = min(S + 1, w) and prefill pairs p_w = Σ_{i=1..S} min(i, w):

  kv       = B · Σ_w c_kv,w · (k_w − 1)                 c_kv,w = layers_w · kv elements · bytes
  memory   = weights + kv + S·t + max(B·S·(2·a·d + m(S)), a·B·S·d + B·h)   (as memory.inference_activations)
  prefill  = B·S·C_tok + B·Σ_w C_pair,w · p_w + 2·B·d·V        (causal, last logits)
  decode   = B·C_step + B·Σ_w C_key,w · k_w + 2·B·d·V
  ttft, tpot = Σ_entries max(FLOPs / peak, bytes / bandwidth) + comm bytes / link

The coefficients come from the estimators' own building blocks (layer_flops probed with one unit
variable at a time, layer_bytes_per_gpu, the blocks' io widths). Each entry of latency.step_costs
(layer group, op) is affine in T (tokens), R (sequences on one GPU) and Y (its window's pairs or
cached keys), plus ⌊b·hit(T)⌋ bytes of routed experts. The entries in T alone sum to a convex
piecewise-linear function of T, kept as breakpoints; the rest are evaluated one by one.

Rounding: step_costs rounds terms up (ceil_div by tp, by the KV shards; bytes of sub-byte dtypes).
A term whose divisor divides its coefficient is affine; one in T or R that is not is evaluated
exactly, term by term. One in Y, in routed experts, in the KV column (an odd latent in int4) or a
tensor all-reduce that tp does not divide makes the model fall back to the estimators at every
point (`fast` is False); no preset does on the layouts tests/test_sweep.py covers.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from math import inf
from typing import NamedTuple

from llmcalc.costs.fit import FitOptions, activation_workspace, require_weights_fit
from llmcalc.costs.flops import MAC, Conventions, flops, layer_flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import (
    LatencyOptions,
    Roofline,
    experts_hit,
    latency,
    op_name,
)
from llmcalc.costs.memory import (
    LOGIT_BYTES,
    MemoryOptions,
    layer_peak_per_token,
    memory,
    weights_bytes,
)
from llmcalc.costs.shard import ceil_div, edge_bytes, layer_bytes_per_gpu
from llmcalc.errors import UserError
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import DTYPE_BITS, ModelSpec
from llmcalc.reports.sweep import SweepGrid, SweepReport, SweepRow

FORMULA = ("kv = B·Σ_w c_w·(min(S+1, w) − 1); memory = weights + kv + activations (as `llmcalc memory`); "
           "prefill/decode FLOPs as `llmcalc flops`; ttft, tpot as `llmcalc latency` (one decode step at "
           "context S); tokens_per_s = B / tpot; fits: weights + KV + workspace ≤ usable per GPU")


class SweepPoint(NamedTuple):
    """One (batch, seq) point; latency figures are None when the weights do not fit the GPUs."""

    batch: int
    seq: int
    kv_bytes: int
    weights_bytes: int
    activation_bytes: int
    memory_bytes: int
    prefill_flops: int
    decode_flops: int
    ttft_s: float | None
    tpot_s: float | None
    tokens_per_s: float | None
    fits: bool


class _NotAffine(Exception):
    """A rounded-up term whose divisor does not divide its coefficient."""


def _per(coef: int, div: int) -> int:
    """The slope of x ↦ ⌈coef·x / div⌉, affine only when div divides coef."""
    if coef % div:
        raise _NotAffine
    return coef // div


class _Entry:
    """One (layer group, op) entry of step_costs for one layer: FLOPs and bytes as coefficients
    of the variables "1", "T", "R", "Y"; terms ⌈(k + c·x) / m⌉ whose m does not divide c; and the
    routed-expert bytes read as ⌊experts·hit⌋."""

    __slots__ = ("layers", "window", "flops", "bytes", "rounded", "experts")

    def __init__(self, layers: int, window: int | None):
        self.layers, self.window, self.experts, self.rounded = layers, window, 0, []
        self.flops: dict[str, int] = defaultdict(int)
        self.bytes: dict[str, int] = defaultdict(int)

    def add(self, side: str, var: str, coef: int, div: int, const: int = 0) -> None:
        """Add ⌈(const + coef·var) / div⌉ to side "flops" or "bytes" (const: bytes only)."""
        if coef % div:
            self.rounded.append((side == "bytes", var, const, coef, div))
        else:
            getattr(self, side)[var] += coef // div
            if const:
                self.bytes["1"] += ceil_div(const, div)


def _entries(spec: ModelSpec, o: LatencyOptions, prefill: bool) -> list[_Entry]:
    """step_costs(spec, o, R, S, 0) (prefill) or step_costs(spec, o, R, 1, S) (decode) as
    coefficients: prefill T = R·S, Y = R·p_w; decode T = R, Y = R·k_w."""
    L, s, attn, d = o.layout, o.storage, spec.attention, spec.d_model
    a = DTYPE_BITS[s.act_dtype] // 8
    mla = attn.latent_cache
    absorbed = mla and not prefill and o.mla_decode == "absorbed"
    latent = "T" if prefill else "Y" if mla and not absorbed else None  # rows attn.reprojected take
    entries: dict[tuple, _Entry] = {}
    for gi, g in enumerate(spec.layer_groups()):
        def entry(comp: str, gi: int = gi, g=g) -> _Entry:
            return entries.setdefault((gi, op_name(comp)), _Entry(g.count, attn.keys_window(g.window)))

        terms: dict[tuple[str, str], int] = defaultdict(int)  # (component, variable) → FLOPs per unit
        for var, probe in (("T", (1, 0, 0)), ("Y", (0, 1, 0)), (latent, (0, 0, 1))):
            if var:
                for comp, f in layer_flops(spec, g, *probe, absorbed).items():
                    terms[comp, var] += f
        for (comp, var), f in terms.items():
            if f:
                entry(comp).add("flops", var, f, L.tp)
        for comp, b in layer_bytes_per_gpu(spec, g, s, L).items():
            if comp.endswith("/experts"):
                entry(comp).experts += b
            else:
                entry(comp).bytes["1"] += b
        io = {f"attention/{k}": v for k, v in attn.io(d).items()}
        io |= {spec.ffn_prefix(g) + k: v for k, v in g.ffn.io(d).items()}
        for comp, width in io.items():
            if var := latent if comp.removeprefix("attention/") in attn.reprojected else "T":
                entry(comp).add("bytes", var, width * a, L.tp)
        core = entry("attention/core")
        core.add("bytes", "T", (attn.query_io() + (attn.key_value_io() if prefill else 0)) * a, L.tp)
        # the cache read and written: ⌈⌈x·elements·bits / 8⌉ / shards⌉ = ⌈x·elements·bits / (8·shards)⌉
        core.add("bytes", "T" if prefill else "Y", attn.kv_elements() * DTYPE_BITS[s.kv_dtype], 8 * L.kv_shards(spec))
    embedding, head = _Entry(1, None), _Entry(1, None)
    embedding.add("bytes", "T", d * (2 + a), L.tp)
    head.add("flops", "R", MAC * d * spec.vocab_size, L.tp)
    head.add("bytes", "R", d * a + LOGIT_BYTES * spec.vocab_size, L.tp, const=edge_bytes(spec, s)[1])
    return [*entries.values(), embedding, head]


def _piecewise(lines: list[tuple[float, float, float]]) -> tuple[list[float], list[tuple[float, float]]]:
    """Σ_lines max(c·x, m0 + m·x) for x ≥ 0 as sorted breakpoints and, per interval, the sum's
    (intercept, slope): a line's compute side wins from x* = m0 / (c − m) on, when c > m."""
    cross = [m0 / (c - m) if c > m else inf for c, m0, m in lines]
    points = sorted({x for x in cross if x != inf})
    rank = [bisect_left(points, x) for x in cross]  # interval i is points[i-1] ≤ x < points[i]
    pieces = []
    for i in range(len(points) + 1):
        won = [r < i for r in rank]
        pieces.append((sum(m0 for (_, m0, _), w in zip(lines, won) if not w),
                       sum(c if w else m for (c, _, m), w in zip(lines, won))))
    return points, pieces


class _Phase:
    """One phase's time: piecewise in T and in R, per-window entries in (T, Y), expert entries."""

    def __init__(self, entries: list[_Entry], roof: Roofline, windows: list, comm_per_token: float,
                 decode: bool):
        self.f_, self.b_ = f_, b_ = 1 / roof.flops, 1 / roof.bytes
        in_t, in_r, merged = [(0.0, 0.0, comm_per_token)], [], defaultdict(int)
        self.experts, self.exact = [], []
        for e in entries:
            f, b = dict(e.flops), dict(e.bytes)
            rounded = [(by, var == "T" or decode, *rest) for by, var, *rest in e.rounded]
            if decode:  # one new token per sequence: T = R
                f["T"], b["T"] = f.get("T", 0) + f.pop("R", 0), b.get("T", 0) + b.pop("R", 0)
            n = e.layers
            if rounded:  # evaluated term by term: T and R only
                if "Y" in f or "Y" in b or e.experts or any(var == "Y" for _, var, *_ in e.rounded):
                    raise _NotAffine
                self.exact.append((n, f.get("T", 0), f.get("R", 0), b.get("1", 0), b.get("T", 0), b.get("R", 0),
                                   rounded))
            elif "R" in f or "R" in b:
                if (set(f) | set(b)) - {"1", "R"} or e.experts:
                    raise _NotAffine
                in_r.append((n * f.get("R", 0) * f_, n * b.get("1", 0) * b_, n * b.get("R", 0) * b_))
            elif e.experts:
                if "Y" in f or "Y" in b:
                    raise _NotAffine
                self.experts.append((n * f.get("T", 0) * f_, n * b.get("1", 0) * b_, n * b.get("T", 0) * b_,
                                     e.experts, n * b_))
            elif "Y" in f or "Y" in b:  # groups sharing a window have equal attention: merge their layers
                key = (windows.index(e.window), f.get("T", 0), f.get("Y", 0), b.get("1", 0), b.get("T", 0),
                       b.get("Y", 0))
                merged[key] += n
            else:
                in_t.append((n * f.get("T", 0) * f_, n * b.get("1", 0) * b_, n * b.get("T", 0) * b_))
        self.t_points, self.t_pieces = _piecewise(in_t)
        self.r_points, self.r_pieces = _piecewise(in_r)
        self.in_r = bool(in_r)
        self.by_window: list[list[tuple]] = [[] for _ in windows]
        for (wi, ft, fy, b1, bt, by), n in merged.items():
            self.by_window[wi].append((n * ft * f_, n * fy * f_, n * b1 * b_, n * bt * b_, n * by * b_))


class Sweeper:
    """A model's (batch, seq) evaluator under fixed options: build once, then point() per point.

    Inputs of point() are not re-validated: batch and seq positive ints, batch a multiple of dp
    (grid() checks its axes once)."""

    def __init__(self, spec: ModelSpec, gpu: GPU | None, o: LatencyOptions | None = None):
        o = o or LatencyOptions()
        s, L = o.storage, o.layout
        L.check(spec, L.dp)
        self.spec, self.gpu, self.o, self.notes = spec, gpu, o, []
        self.mem_opts = MemoryOptions(weights_dtype=s.weights_dtype, kv_dtype=s.kv_dtype, act_dtype=s.act_dtype,
                                      group_size=s.group_size)
        self.weights = weights_bytes(spec, s.weights_dtype, s.group_size)[0]
        fit_opts = FitOptions(storage=s, layout=L, reserve=o.reserve)
        self.weights_per_gpu = None  # None: no time and no fit (no GPU, or the weights do not fit it)
        if gpu is not None:
            try:
                self.weights_per_gpu = require_weights_fit(spec, gpu, fit_opts)
            except UserError as e:
                self.notes.append(f"{spec.name}: no latency: {e}")
        self.workspace = activation_workspace(spec, fit_opts)
        self.usable = gpu.memory_bytes * (1 - o.reserve) if gpu else 0
        try:
            self._compile()
            self.fast = True
        except _NotAffine:
            self.fast = False
            why = ("its attention's cost is not a windowed pair count" if not spec.attention.sweep_fast else
                   "a rounded-up term is not affine")
            self.notes.append(f"{spec.name}: {why}; evaluated with the slow estimators")
        if self.fast and not self._agrees():
            self.fast = False
            self.notes.append(f"{spec.name}: the closed form disagrees with the estimators at a probe point; "
                              "evaluated with the slow estimators")

    def _agrees(self) -> bool:
        """Whether the closed form equals the estimators at probe points: sequence lengths 1, 2, 3, either side of
        every attention window and past the model's context, at the smallest batch. A variant whose costs are not
        what its sweep_fast claims is caught here and falls back to the estimators instead of diverging."""
        windows = {w for w, *_ in self.windows if w is not None}
        seqs = {1, 2, 3, 4097, self.spec.max_seq_len + 1} | {x for w in windows for x in (w - 1, w, w + 1)}
        batch = self.o.layout.dp
        for seq in sorted(x for x in seqs if x > 0):
            fast, slow = self.point(batch, seq), self._slow(batch, seq)
            for f, s in zip(fast, slow, strict=True):
                if f != s and not (isinstance(f, float) and isinstance(s, float) and math.isclose(f, s, rel_tol=1e-9)):
                    return False
        return True

    def _compile(self) -> None:
        spec, o = self.spec, self.o
        L, s, d, attn = o.layout, o.storage, spec.d_model, spec.attention
        a = DTYPE_BITS[s.act_dtype] // 8
        groups = spec.layer_groups()
        if not attn.sweep_fast:
            raise _NotAffine
        windows = list(dict.fromkeys(attn.keys_window(g.window) for g in groups))
        absorbed = attn.latent_cache and o.mla_decode == "absorbed"
        decompress = attn.latent_cache and not absorbed
        per_window = {w: [0, 0, 0] for w in windows}  # c_kv, C_pair, C_key
        self.c_tok = self.c_step = 0
        for g in groups:
            n, c = g.count, per_window[attn.keys_window(g.window)]
            c[0] += n * _per(attn.kv_elements() * DTYPE_BITS[s.kv_dtype], 8)
            c[1] += n * sum(layer_flops(spec, g, 0, 1, 0, False).values())
            c[2] += n * sum(layer_flops(spec, g, 0, 1, int(decompress), absorbed).values())
            self.c_tok += n * sum(layer_flops(spec, g, 1, 0, 1, False).values())
            self.c_step += n * sum(layer_flops(spec, g, 1, 0, 0, absorbed).values())
        self.head = MAC * d * spec.vocab_size
        self.windows = [(w, w * (w + 1) // 2 if w else 0, *per_window[w]) for w in windows]
        # inference_activations: per position tables, per token the residual and the layer peak (which
        # depends on seq only through the windows, so it is computed once per seq), per sequence the head
        self.act_bytes, self.peaks = a, {}
        rot = attn.rope_dim - attn.rope_dim % 2 if spec.positions.rotary else 0
        self.tables = 8 + 2 * a * rot
        self.head_act = a * d + (a + LOGIT_BYTES) * spec.vocab_size
        self.kv_div = L.kv_shards(spec) * L.pp
        if self.weights_per_gpu is None:
            return
        roof = Roofline(self.gpu, o)
        comm = 2 * spec.n_layers * _per(2 * (L.tp - 1) * d * a, L.tp) + (L.pp - 1) * d * a
        self.a2a = None
        if L.ep > 1:
            moe = sum(g.count for g in groups if g.ffn.routed_experts)
            self.a2a = (2 * moe / roof.link, spec.ffn.top_k, d * a)
        self.prefill = _Phase(_entries(spec, o, True), roof, windows, comm / roof.link, decode=False)
        self.decode = _Phase(_entries(spec, o, False), roof, windows, comm / roof.link, decode=True)

    def grid(self, batches: list[int], seqs: list[int]) -> list[SweepPoint]:
        """Every (batch, seq) point, batch-major."""
        for b in batches:
            self.o.layout.check(self.spec, b)
        return [self.point(b, s) for b in batches for s in seqs]

    def point(self, batch: int, seq: int) -> SweepPoint:
        if not self.fast:
            return self._slow(batch, seq)
        rep = batch // self.o.layout.dp
        tokens, t_rep = batch * seq, rep * seq
        kv = pre = dec = 0
        timed = self.weights_per_gpu is not None
        ttft = tpot = 0.0
        pre_phase, dec_phase = (self.prefill, self.decode) if timed else (None, None)
        for wi, (w, w_pairs, c_kv, c_pair, c_key) in enumerate(self.windows):
            if w is None or seq < w:
                keys, pairs = seq + 1, seq * (seq + 1) // 2
            else:
                keys, pairs = w, w_pairs + (seq - w) * w
            kv += c_kv * (keys - 1)
            pre += c_pair * pairs
            dec += c_key * keys
            if timed:
                y = rep * pairs
                for ft, fy, b1, bt, by in pre_phase.by_window[wi]:
                    ttft += max(ft * t_rep + fy * y, b1 + bt * t_rep + by * y)
                y = rep * keys
                for ft, fy, b1, bt, by in dec_phase.by_window[wi]:
                    tpot += max(ft * rep + fy * y, b1 + bt * rep + by * y)
        kv_rep = rep * kv
        kv *= batch
        # the layer peak depends on seq only through which windows the prompt outruns (Attention's
        # reads_fresh_keys: cached_tokens(S, w) < S, i.e. S ≥ w, for the fast path's GQA and MLA)
        key = tuple(w is not None and seq >= w for w, *_ in self.windows)
        peak = self.peaks.get(key)
        if peak is None:
            peak = self.peaks[key] = layer_peak_per_token(self.spec, seq, self.mem_opts)[0]
        a, d = self.act_bytes, self.spec.d_model
        act = seq * self.tables + max(tokens * (2 * a * d + peak), a * tokens * d + batch * self.head_act)
        fits = None if self.gpu is None else False
        if timed:
            ttft += self._rest(pre_phase, t_rep, rep)
            tpot += self._rest(dec_phase, rep, rep)
            fits = self.weights_per_gpu + -(-kv_rep // self.kv_div) + self.workspace <= self.usable
        return SweepPoint(batch, seq, kv, self.weights, act, self.weights + kv + act,
                          tokens * self.c_tok + batch * (pre + self.head), batch * (self.c_step + self.head + dec),
                          ttft if timed else None, tpot if timed else None, batch / tpot if timed else None, fits)

    def _rest(self, p: _Phase, t: int, r: int) -> float:
        """A phase's time outside the per-window entries: piecewise in T and R, experts, all-to-all."""
        intercept, slope = p.t_pieces[bisect_right(p.t_points, t)]
        time = intercept + slope * t
        if p.in_r:
            intercept, slope = p.r_pieces[bisect_right(p.r_points, r)]
            time += intercept + slope * r
        if p.experts:
            ffn, L = self.spec.ffn, self.o.layout
            hit = experts_hit(ffn.experts, ffn.top_k, t if L.ep == 1 else t * L.ep / L.tp) / ffn.experts
            for ft, b1, bt, b_exp, per_byte in p.experts:
                time += max(ft * t, b1 + bt * t + int(b_exp * hit) * per_byte)
        for n, ft, fr, b1, bt, br, terms in p.exact:
            f, b = ft * t + fr * r, b1 + bt * t + br * r
            for in_bytes, in_t, const, coef, div in terms:
                v = -(-(const + coef * (t if in_t else r)) // div)
                if in_bytes:
                    b += v
                else:
                    f += v
            time += n * max(f * p.f_, b * p.b_)
        if self.a2a:
            per_link, top_k, width = self.a2a
            L = self.o.layout
            time += per_link * L.alltoall_bytes(t * L.ep // L.tp or 1, top_k, width)
        return time

    def _slow(self, batch: int, seq: int) -> SweepPoint:
        """The same point from the estimators themselves."""
        spec, o = self.spec, self.o
        kv = kv_cache(spec, batch, seq, o.storage.kv_dtype).total_bytes
        m = memory(spec, batch, seq, self.mem_opts)
        f = flops(spec, batch, seq, 1, Conventions(mla_decode=o.mla_decode))
        if self.weights_per_gpu is None:
            ttft = tpot = tps = None
            fits = None if self.gpu is None else False
        else:
            r = latency(spec, self.gpu, batch, seq, 1, o)
            ttft, tpot, tps, fits = r.ttft_s, r.tpot_s, r.decode_tokens_per_s, r.fits
        return SweepPoint(batch, seq, kv, m.weights_bytes, m.activation_bytes, m.total_bytes, f.prefill_flops,
                          f.decode_flops, ttft, tpot, tps, fits)


def sweep(specs: list[ModelSpec], gpu: GPU | None, batches: list[int], seqs: list[int],
          o: LatencyOptions | None = None) -> SweepReport:
    """Every model over the batch × seq grid, one row per (model, batch, seq); time and fit on `gpu` (None:
    neither)."""
    o = o or LatencyOptions()
    rows, notes = [], []
    for spec in specs:
        sweeper = Sweeper(spec, gpu, o)
        rows += [SweepRow(model=spec.name, **p._asdict()) for p in sweeper.grid(batches, seqs)]
        notes += sweeper.notes
        if seqs[-1] > spec.max_seq_len:
            notes.append(f"{spec.name}: seq beyond its max_seq_len {spec.max_seq_len:,} is an extrapolation")
    L = o.layout
    if gpu is None:
        notes.append("no --gpu: time per token and fit are left out (no GPU is assumed)")
    else:
        notes += [f"latency on {L.gpus} × {gpu.name} (tp={L.tp} pp={L.pp} dp={L.dp} ep={L.ep}); fits is per GPU",
                  "memory counts one unchunked prefill's activations (as `llmcalc memory`); fits assumes a chunked "
                  "prefill's workspace (as `llmcalc fit`), so a point can fit while its memory exceeds the GPUs",
                  "tpot is one decode step at context seq; tokens_per_s = batch / tpot (decode throughput)"]
    return SweepReport(models=[s.name for s in specs], gpu=gpu.name if gpu else None, gpus=L.gpus,
                       grid=SweepGrid(batch=batches, seq=seqs), rows=rows, formula=FORMULA, notes=notes)
