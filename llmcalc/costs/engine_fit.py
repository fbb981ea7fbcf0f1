"""The reference engine's profile fitted to its kernel curves (llmcalc/reference/kernel_curves.py): pure Python, each
kernel class by least squares of the relative error of the form its class takes (llmcalc/model/engine_profile.py):

  matmul, grouped_matmul  t = max(c, m) + overlap·min(c, m) + fixed_s: fixed_s and memory_efficiency from the
                          memory-bound calls (M ≤ 16 rows, or rows per active expert), compute_efficiency and pad
                          from the compute-bound ones (M ≥ 4096, ≥ 1024 rows per expert) at each overlap on a grid
                          of 0.05, the overlap whose form fits every call best
  attention_prefill       t = (F + pad·F₁)/(peak·e) + fixed_s, F the causal FLOPs 4·H·hd·B·S(S+1)/2, F₁ those of
                          one more key per query 4·H·hd·B·S
  attention_backward      the same over the backward's time (forward + backward − forward; the kernels' own,
                          queued behind a sleeping kernel, where the curve has it), FLOPs 2.5 × F
  attention_decode        t = bytes/(bw·e) + fixed_s, bytes the K/V cache read (2·2·B·H_kv·L·hd)
  latent_decode[_unaligned] the same, bytes the latent cache (2·B·L·(r + d_r)), keys a multiple of 8 or not
  elementwise, strided,   the two asymptotes: fixed_s the median time of the smallest quarter of sizes, e the
  scatter, reduction      median of bytes / ((t − fixed_s)·bw) over the largest quarter
  scan_prefill, _decode   the mixer's time less its projections (matmul) and its own kernels (counted at each
                          point): (F_core/(peak·e) or bytes_core/(bw·e)) + fixed_s
  host                    call_s: an F.linear call's host time / its 3 aten calls; eager_kernel_s: a tiny kernel's
                          time in an eager stream less its time in a graph; replay_s: a one-kernel graph's replay
                          less the per-kernel slope of a 1,000-kernel one
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from llmcalc.costs.engine_time import curve_seconds
from llmcalc.errors import UserError
from llmcalc.model.engine_profile import EngineHost, EngineKernels, EngineProfile, KernelCurve
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Workload

OVERLAPS = [i / 10 for i in range(11)]
PADS = [16.0 * i for i in range(33)]
"""The overlap and pad-row grids of the matmul fits."""
MAX_SHARE = 2.0
"""The largest share a fit may give (KernelCurve's bound): a class whose measured work is all elsewhere gets it."""
BACKWARD_FLOPS = 2.5
"""A flash backward's FLOPs over the forward's: dQ, dK, dV (4 products) and the recomputed scores (1)."""


def lstsq(rows: list[list[float]], y: list[float]) -> list[float]:
    """Least-squares x of rows · x ≈ y (normal equations, Gaussian elimination with partial pivoting)."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] + [sum(r[i] * v for r, v in zip(rows, y))]
         for i in range(k)]
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        if a[col][col] == 0:
            raise UserError("calibrate: the kernel curves do not determine the fit (a singular system); measure more "
                            "sizes")
        for r in range(k):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y_ for x, y_ in zip(a[r], a[col])]
    return [a[i][k] / a[i][i] for i in range(k)]


def relative_fit(points: list[tuple[list[float], float]]) -> list[float]:
    """x minimising Σ (features · x / t − 1)² over (features, t) points."""
    return lstsq([[f / t for f in feats] for feats, t in points], [1.0] * len(points))


def as_share(inverse: float) -> float:
    """The share whose inverse a fit gave, within KernelCurve's bound: MAX_SHARE where the fit found no cost per
    FLOP or byte (a CPU smoke run's noise can give a slope of zero or below)."""
    return MAX_SHARE if inverse <= 1 / MAX_SHARE else 1 / inverse


def median_error(model: Callable[[dict], float], points: list[dict]) -> float:
    return statistics.median(abs(model(p) / p["seconds"] - 1) for p in points)


def asymptotes(points: list[dict], bandwidth: float) -> KernelCurve:
    """A memory-bound class from its two asymptotes (module docstring)."""
    by_size = sorted(points, key=lambda p: p["bytes"])
    quarter = max(1, len(by_size) // 4)
    fixed = statistics.median(p["seconds"] for p in by_size[:quarter])
    shares = [p["bytes"] / ((p["seconds"] - fixed) * bandwidth) for p in by_size[-quarter:] if p["seconds"] > fixed]
    share = min(statistics.median(shares), MAX_SHARE) if shares else MAX_SHARE
    return KernelCurve(memory_efficiency=round(share, 4), fixed_s=float(f"{fixed:.3g}"))


def op_form(points: list[dict], peak: float, bandwidth: float, rows: str, pad_rows: Callable[[dict], float],
            small: Callable[[dict], bool], large: Callable[[dict], bool]) -> tuple[KernelCurve, float]:
    """A matmul class (module docstring): points {m|rows, n, k, seconds, ...}; `pad_rows(p)`: how many pad rows
    a call pays for (1 matmul, or its active experts); `small` and `large` pick the memory- and compute-bound
    calls (where none qualify, a CPU smoke run's, the quarters of fewest and most rows); the fitted curve and its
    median relative error. At each (pad, overlap) of a grid the efficiency is the median, over the compute-bound
    calls, of the one their time gives; the grid point whose form fits every call best (least squares of the
    relative error) is kept."""
    def work(p: dict) -> tuple[float, float, float]:
        m = p[rows]
        return 2 * m * p["n"] * p["k"], 2 * pad_rows(p) * p["n"] * p["k"], 2 * (pad_rows(p) * p["n"] * p["k"]
                                                                                + m * p["k"] + m * p["n"])

    by_rows = sorted(points, key=lambda p: p[rows] / pad_rows(p))
    quarter = max(2, len(by_rows) // 4)
    memory_bound = [p for p in points if small(p)] or by_rows[:quarter]  # a smoke run's sizes: the extremes
    compute = [p for p in points if large(p)] or by_rows[-quarter:]
    memory = relative_fit([([1.0, work(p)[2] / bandwidth], p["seconds"]) for p in memory_bound])
    fixed, share = max(memory[0], 0.0), as_share(memory[1])
    best = None
    for pad in PADS:
        for overlap in OVERLAPS:
            effs = [(f + pad * pf) / (peak * (p["seconds"] - fixed - overlap * b / (bandwidth * share)))
                    for p in compute for f, pf, b in [work(p)] if p["seconds"] > fixed + overlap * b / (bandwidth * share)]
            if not effs:
                continue
            curve = KernelCurve(compute_efficiency=min(statistics.median(effs), 2.0), pad=pad,
                                memory_efficiency=min(share, 2.0), overlap=overlap, fixed_s=fixed)
            err = sum((curve_seconds(curve, *work(p), 1, peak, bandwidth) / p["seconds"] - 1) ** 2 for p in points)
            if best is None or err < best[0]:
                best = (err, curve)
    if best is None:
        raise UserError("calibrate: no GEMM curve ran above its memory time; nothing to fit a compute efficiency to")
    curve = rounded(best[1])
    return curve, median_error(lambda p: curve_seconds(curve, *work(p), 1, peak, bandwidth), points)


def rounded(c: KernelCurve) -> KernelCurve:
    """Figures to 4 significant digits (the fit is not better than that)."""
    figures = {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in c.model_dump().items()}
    return KernelCurve(**figures | {"pad": min(figures["pad"], 65536.0)})


def attention_points(points: list[dict], flops: Callable[[dict], float], key_flops: Callable[[dict], float],
                     seconds: Callable[[dict], float], peak: float) -> tuple[KernelCurve, float]:
    fit = relative_fit([([flops(p) / peak, key_flops(p) / peak, 1.0], seconds(p)) for p in points])
    e = as_share(fit[0])
    pad, fixed = min(max(fit[1] * e, 0.0), 65536.0), max(fit[2], 0.0)
    curve = rounded(KernelCurve(compute_efficiency=e, pad=pad, memory_efficiency=1.0, fixed_s=fixed))
    err = statistics.median(abs((flops(p) + curve.pad * key_flops(p)) / (peak * curve.compute_efficiency)
                                + curve.fixed_s - seconds(p)) / seconds(p) for p in points)
    return curve, err


def memory_points(points: list[dict], nbytes: Callable[[dict], float], bandwidth: float) -> tuple[KernelCurve, float]:
    fit = relative_fit([([nbytes(p) / bandwidth, 1.0], p["seconds"]) for p in points])
    curve = rounded(KernelCurve(memory_efficiency=as_share(fit[0]), fixed_s=min(max(fit[1], 0.0), 0.5)))
    return curve, median_error(lambda p: nbytes(p) / (bandwidth * curve.memory_efficiency) + curve.fixed_s, points)


def causal(p: dict) -> float:
    return 4 * p["heads"] * p["head_dim"] * p.get("batch", 1) * p["length"] * (p["length"] + 1) / 2


def one_key(p: dict) -> float:
    return 4 * p["heads"] * p["head_dim"] * p.get("batch", 1) * p["length"]


def fit_reference(curves: dict, env: dict, gpu: GPU, scan_spec: ModelSpec | None,
                  stamp: str) -> tuple[EngineProfile, list[str]]:
    """The reference engine's profile on `gpu` from its kernel curves (`curves`: llmcalc/reference/kernel_curves.py
    measure's output), measured in the environment `env` (device, driver, cuda, torch, date); `scan_spec`: the model
    whose Mamba-2 mixer the scan points timed (None: no scan classes); `stamp` opens every source. Also notes on
    the fit (each class's median relative error)."""
    peak, bw = gpu.peak("bf16"), gpu.bandwidth
    kernels: dict[str, KernelCurve] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []

    def put(name: str, fitted: tuple[KernelCurve, float], what: str) -> None:
        kernels[name], err = fitted
        sources[name] = f"{stamp}: {what}; median error of the form {err:.1%}"
        notes.append(f"{name}: median error {err:.1%} over its points")

    gemm = [p for p in curves.get("gemm", []) if p["dtype"] == "bf16"]
    if not gemm:
        raise UserError("`from_raw`: the raw timings have no bf16 GEMM curve; give those of a calibration with "
                        "`engine` reference")
    put("matmul", op_form(gemm, peak, bw, "m", lambda p: 1, lambda p: p["m"] <= 16, lambda p: p["m"] >= 4096),
        f"bf16 F.linear replayed from a CUDA graph, weights rotated past the L2, {len(gemm)} calls of "
        f"{len({(p['n'], p['k']) for p in gemm})} shapes at M = 1 … {max(p['m'] for p in gemm)}")
    grouped = [p for p in curves.get("grouped_gemm", []) if p["dtype"] == "bf16"]
    if grouped:
        put("grouped_matmul", op_form(grouped, peak, bw, "rows", lambda p: p["active"],
                                      lambda p: p["rows"] <= 16 * p["active"],
                                      lambda p: p["rows"] >= 1024 * p["active"]),
            f"bf16 torch._grouped_mm, {len(grouped)} calls: 1 … 4096 rows per expert and tokens routed top-k at "
            "random, of the campaign's expert shapes")
    pre = curves.get("attention_prefill", [])
    if pre:
        put("attention_prefill", attention_points(pre, causal, one_key, lambda p: p["seconds"], peak),
            f"causal SDPA as the reference calls it (no backend forced), {len(pre)} calls of "
            f"{len({(p['heads'], p['kv_heads'], p['head_dim']) for p in pre})} head shapes, B·S up to "
            f"{max(p['batch'] * p['length'] for p in pre):,} tokens")
    back = curves.get("attention_backward", [])
    if back:
        queued = all("forward_backward_gpu_s" in p for p in back)
        put("attention_backward", attention_points(
            back, lambda p: BACKWARD_FLOPS * causal(p), lambda p: BACKWARD_FLOPS * one_key(p),
            (lambda p: p["forward_backward_gpu_s"] - p["forward_gpu_s"]) if queued else
            (lambda p: p["forward_backward_s"] - p["forward_s"]), peak),
            "SDPA's backward (autograd) less its forward, "
            + ("each queued behind a sleeping kernel (the kernels' own time), " if queued else
               "each called alone (a backward pass's start on the host included), ")
            + f"S = {', '.join(str(p['length']) for p in back)}, FLOPs {BACKWARD_FLOPS} × the forward's")
    dec = curves.get("attention_decode", [])
    if dec:
        put("attention_decode", memory_points(
            dec, lambda p: 4 * p["batch"] * p["kv_heads"] * p["length"] * p["head_dim"], bw),
            f"one-query SDPA over a K/V cache, replayed from a graph, {len(dec)} calls: B = "
            f"{', '.join(map(str, sorted({p['batch'] for p in dec})))}, L = {min(p['length'] for p in dec)} … "
            f"{max(p['length'] for p in dec)}")
    latent = curves.get("mla_decode", [])
    for name, keep in (("latent_decode", lambda p: p["length"] % 8 == 0),
                       ("latent_decode_unaligned", lambda p: p["length"] % 8 != 0)):
        pts = [p for p in latent if keep(p)]
        if pts:
            put(name, memory_points(pts, lambda p: 2 * p["batch"] * p["length"] * (p["rank"] + p["rope"]), bw),
                f"MLAttention._absorbed_step replayed from a graph, {len(pts)} calls, B = "
                f"{', '.join(map(str, sorted({p['batch'] for p in pts})))}, keys "
                + ("a multiple of 8" if name == "latent_decode" else "2^k + 1 (not a multiple of 8)"))
    classes = {"elementwise": [p for p in curves.get("elementwise", []) if p["op"] in ("copy", "add_", "mul_", "silu")],
               "strided": curves.get("strided", []), "scatter": curves.get("scatter", []),
               "reduction": curves.get("reductions", [])}
    for name, pts in classes.items():
        if pts:
            kernels[name] = asymptotes(pts, bw)
            sources[name] = (f"{stamp}: {len(pts)} kernels replayed from a graph ("
                             f"{', '.join(sorted({p['op'] for p in pts}))}), {min(p['bytes'] for p in pts):,} … "
                             f"{max(p['bytes'] for p in pts):,} bytes: fixed_s the median of the smallest quarter, "
                             "the share the median of the largest quarter")
    scan = curves.get("mamba", [])
    if scan and scan_spec is not None:
        for phase in ("prefill", "decode"):
            pts = [p for p in scan if p["phase"] == phase]
            if pts:
                put(f"scan_{phase}", scan_fit(pts, phase, scan_spec, gpu, kernels),
                    f"the reference Mamba-2 mixer of {scan_spec.name} ({phase}, {len(pts)} points) less its "
                    "projections and its own counted kernels")
    host = curves.get("host", [])
    eager = curves.get("eager", [])
    graph = sorted(curves.get("graph", []), key=lambda p: p["kernels"])
    if not (host and graph):
        raise UserError("calibrate: the raw timings lack the host and graph curves")
    linear = next(p["seconds"] for p in host if p["call"] == "F.linear")
    slope = (graph[-1]["seconds_per_replay"] - graph[0]["seconds_per_replay"]) / (graph[-1]["kernels"]
                                                                                   - graph[0]["kernels"])
    tiny = next((p for p in eager if p["elements"] == min(q["elements"] for q in eager)), None)
    hosted = EngineHost(call_s=float(f"{linear / 3:.3g}"),
                        eager_kernel_s=float(f"{max(tiny['eager_s'] - tiny['graph_s'], 0):.3g}") if tiny else 0.0,
                        replay_s=float(f"{max(graph[0]['seconds_per_replay'] - slope, 0):.3g}"))
    sources["host"] = (f"{stamp}: call_s an F.linear call's host time ({linear * 1e6:.1f} µs) over its 3 aten calls "
                       "(linear, t, mm), on the machine that measured it; eager_kernel_s a tiny add's time launched "
                       "eagerly behind a sleeping kernel less its time in a graph; replay_s a one-kernel graph's "
                       "replay less the per-kernel slope of a 1,000-kernel graph")
    named = named_curves(curves)
    profile = EngineProfile(name="reference", gpu=gpu.name, measured_on=env, kernels=kernels, host=hosted,
                            curves=named, curve_columns={k: CURVE_COLUMNS[k] for k in named}, sources=sources)
    return profile, notes


def scan_fit(points: list[dict], phase: str, spec: ModelSpec, gpu: GPU,
             kernels: dict[str, KernelCurve]) -> tuple[KernelCurve, float]:
    """scan_prefill or scan_decode: each point's time less what the rest of the profile gives its projections and
    its own kernels, fitted as core FLOPs (prefill) or core bytes (decode) plus a fixed cost."""
    from llmcalc.costs.step import Op, step_costs

    mixer = next(g.mixer_name for g in spec.layer_groups()
                 if g.mixer is not None and g.mixer.core_kernel(True, False) == "scan_prefill")
    one = ModelSpec.model_validate(spec.model_dump() | {"n_layers": 1,
                                                        "hybrid_pattern": [{"mixer": mixer, "ffn": "none"}]})
    partial = EngineProfile(name="partial", gpu=gpu.name, measured_on={}, kernels=kernels,
                            host=EngineHost(call_s=0, eager_kernel_s=0, replay_s=0))
    peak, bw = gpu.peak("bf16"), gpu.bandwidth
    rows = []
    for p in points:
        b, t = p["batch"], p["length"]
        new, context = (t, 0) if phase == "prefill" else (1, 1)
        w = Workload(batch=b, seq=max(t, 2), gen=2)
        costs = step_costs(one, w, b, new, context)
        core = costs[Op.of(0, f"{mixer}/core")]
        proj = costs[Op.of(0, f"{mixer}/proj")]
        projections = curve_seconds(kernels["matmul"], proj[0], proj[2], proj[1], 2, peak, bw)
        counted = EngineKernels(**p["counted"])
        own = sum(curve_seconds(partial.curve(k), 0, 0, nb, n, peak, bw) for k, (n, nb) in counted.own().items())
        rest = p["seconds"] - projections - own
        work = core[0] / peak if phase == "prefill" else core[1] / bw
        rows.append(([work, 1.0], rest, p["seconds"], projections + own))
    fit = lstsq([[f / s for f in feats] for feats, _, s, _ in rows], [r / s for _, r, s, _ in rows])
    if fit[0] <= 1 / MAX_SHARE:  # the core's work is within the engine's own kernels: a fixed cost alone
        fit = [1 / MAX_SHARE, max(statistics.median(r - feats[0] / MAX_SHARE for feats, r, _, _ in rows), 0.0)]
    e, fixed = 1 / fit[0], max(fit[1], 0.0)
    curve = rounded(KernelCurve(compute_efficiency=min(e, 2.0), memory_efficiency=1.0, fixed_s=fixed)
                    if phase == "prefill" else KernelCurve(memory_efficiency=min(e, 2.0), fixed_s=fixed))
    share = curve.compute_efficiency or curve.memory_efficiency
    err = statistics.median(abs(feats[0] / share + curve.fixed_s + other - s) / s for feats, _, s, other in rows)
    return curve, err


CURVE_COLUMNS = {
    "grouped_matmul_bf16": ["experts", "k", "n", "rows per expert", "seconds"],
    "grouped_matmul_fp8": ["experts", "k", "n", "rows per expert", "seconds"],
    "latent_decode": ["batch", "keys", "seconds"],
    "attention_forward": ["heads", "kv heads", "head dim", "batch", "length", "seconds"],
    "attention_backward": ["heads", "kv heads", "head dim", "length", "forward seconds", "forward + backward seconds"],
    "attention_backward_queued": ["heads", "kv heads", "head dim", "length", "forward GPU seconds",
                                  "forward + backward GPU seconds"],
    "graph": ["kernels", "seconds per replay"],
}
"""The measured curves a profile keeps beside its fitted classes, and their columns."""


def named_curves(curves: dict) -> dict[str, list[list[float]]]:
    """The curves CURVE_COLUMNS names that the raw kernel curves hold, as rows of numbers."""
    grouped = [p for p in curves.get("grouped_gemm", []) if p["series"] == "uniform"]
    named = {
        "grouped_matmul_bf16": [[p["experts"], p["k"], p["n"], p["size"], p["seconds"]] for p in grouped
                                if p["dtype"] == "bf16"],
        "grouped_matmul_fp8": [[p["experts"], p["k"], p["n"], p["size"], p["seconds"]] for p in grouped
                               if p["dtype"] == "fp8"],
        "latent_decode": [[p["batch"], p["length"], p["seconds"]] for p in curves.get("mla_decode", [])],
        "attention_forward": [[p["heads"], p["kv_heads"], p["head_dim"], p["batch"], p["length"], p["seconds"]]
                              for p in curves.get("attention_prefill", [])],
        "attention_backward": [[p["heads"], p["kv_heads"], p["head_dim"], p["length"], p["forward_s"],
                                p["forward_backward_s"]] for p in curves.get("attention_backward", [])],
        "attention_backward_queued": [[p["heads"], p["kv_heads"], p["head_dim"], p["length"], p["forward_gpu_s"],
                                       p["forward_backward_gpu_s"]] for p in curves.get("attention_backward", [])
                                      if "forward_gpu_s" in p],
        "graph": [[p["kernels"], p["seconds_per_replay"]] for p in curves.get("graph", [])],
    }
    return {name: rows for name, rows in named.items() if rows}

