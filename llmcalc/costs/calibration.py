"""Calibration: what `llmcalc calibrate` measures (a plan) and the time-model figures fitted to what it measured.
Pure Python: the torch harness that runs a plan is llmcalc/reference/calibrate.py; see docs/roofline.md#time-models.

The fit inverts the time model's own op form (llmcalc/model/time_model.py, llmcalc/costs/step_time.py), with
c = FLOPs / (peak · efficiency) and m = bytes / (bandwidth · memory_efficiency):

  t(op) = max(c, m) + overlap · min(c, m) + kernel_s,   a weight matmul's FLOPs 2 · (M + matmul_pad_rows) · N · K

  memory_efficiency    = copy bytes (read + written) / seconds / datasheet bandwidth
  kernel_s             = the fixed seconds of a real kernel replayed from a CUDA graph, as serving stacks replay a
                         decode step: where the run timed weight matmuls of M ≤ SMALL_M rows from a graph (its
                         kernel curves), the median of their time less max(c, m) + overlap · min(c, m) at the
                         fitted figures below (kernel_fixed_s); else the time per kernel of tiny adds replayed from
                         a graph, which no kernel that reads its operands reaches. The fits below subtract an
                         isolated call's time instead (its host launch included), as each GEMM and attention run
                         is timed as one isolated call
  compute_efficiency   = at each pad p: the best, over the large-M bf16 GEMMs, of the efficiency at which t(op)
                         is the measured time; matmul_pad_rows = the p whose t(op) fits every M of every shape best
                         (least squares of the relative error: a 1-D search over [0, 4096])
  fp8_efficiency       = the same best over the large-M fp8 GEMMs, at the bf16 fit's pad
  attention_efficiency = the same best over the longest causal prefills (FLOPs counted as llmcalc counts them:
                         4 · heads · head_dim per (query, key) pair, S · (S + 1) / 2 pairs)
  collective_s         = seconds of the smallest all-reduce; comm_efficiency = the best, over the largest, of
                         ring bytes 2 · (n − 1) / n · size / (t − collective_s) over the one-way link

overlap, step_s and launch_s are not measurable by microbenchmarks: they are kept from the bundled profile (and any
figure not measured, such as one-GPU collectives), and `sources` says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from llmcalc.errors import UserError
from llmcalc.model.attention import GQA
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import BOUNDS, ROOFLINE, SHARES, SMOKE_GPU, TimeModel, compute_behind, overlapped
from llmcalc.model.units import MAC, ceil_div

BF16, FP8 = 2, 1
"""Bytes per element of a bf16 and an fp8 (e4m3) operand."""
CPU_SCALE = 16
"""A CPU smoke run divides every GEMM width by this: it covers the code path in seconds, not the figures."""
LARGE = 3
"""The efficiency of a series is the best of its LARGE largest runs (largest M, longest prefill, largest message)."""
REFERENCE_PRESETS = ("llama3-8b", "mixtral-8x7b", "deepseek-v2-lite", "gemma2-9b", "nemotron-h-8b")
"""The families whose shapes the reference engine's kernel curves take (the GPU validation campaign's): dense GQA,
MoE, MLA + MoE, sliding window, a Mamba-2 hybrid."""
HOST_EXTRA = ("qwen3-8b", "olmo2-7b", "qwen1.5-moe-a2.7b")
"""Families beyond the calibrated ones whose tiny copies also time the reference's host cost per call."""
KEPT = ("overlap", "step_s", "launch_s")
"""Figures no microbenchmark measures: always kept from the bundled profile."""
SMALL_M = 16
"""The most rows of the graph-replayed weight matmuls kernel_s is read from: memory-bound at every shape, so that
their time is the op form's memory time, a small compute share and the kernel's fixed cost."""


@dataclass(frozen=True)
class Gemm:
    """One weight matmul shape y = x · Wᵀ: W is N × K (out × in); `name` lists the projections that share it."""

    name: str
    n: int
    k: int


@dataclass
class Plan:
    """What a calibration run measures. Every size is an int; the harness runs it as written."""

    device: str  # cuda or cpu
    model: str  # the preset whose weight shapes the GEMMs take
    gemms: list[Gemm]
    rows: list[int]  # M of every GEMM
    heads: int
    kv_heads: int
    head_dim: int
    prefill: list[int]  # causal prefill lengths (one sequence)
    decode: list[int]  # cache lengths of a one-query decode step
    copy_bytes: int  # bytes of the source of the device-to-device copy
    tiny: int  # elements of the tiny kernel
    flush_bytes: int  # bytes written between runs to flush the caches
    messages: list[int]  # collective message sizes in bytes (several GPUs only)
    warmup: int
    runs: int
    tiny_runs: int
    quick: bool
    smoke: bool  # a CPU run: covers the code path, not the figures
    notes: list[str] = field(default_factory=list)
    curves: Curves | None = None  # the reference engine's kernel curves (engine reference), else None

    @property
    def steps(self) -> int:
        """Measurements the harness makes, for a progress bar (collectives not counted; the curves one each)."""
        curves = len(CURVES) if self.curves else 0
        return (2 * len(self.gemms) * len(self.rows) + len(self.prefill) + len(self.decode) + 2 + (self.device == "cuda")
                + curves)


CURVES = ("graph", "graph_copies", "host", "eager", "elementwise", "strided", "reductions", "scatter", "gemm",
          "grouped_gemm", "attention_prefill", "attention_backward", "attention_decode", "mla_decode", "mamba",
          "host_models", "host_full_depth")
"""The reference engine's kernel curves, in the order the harness measures them (llmcalc/reference/kernel_curves.py)."""


@dataclass
class Curves:
    """What the reference engine's kernel curves measure: sizes, and the shapes of the presets they come from."""

    presets: list[str]
    gemms: list[tuple[str, int, int]]  # (name, N, K) of every weight matrix and LM head
    rows: list[int]  # M of every GEMM
    head_rows: int  # the largest M of an LM head's GEMM
    elementwise: list[int]  # elements of each element-wise kernel
    width: int  # row width of the row norm
    experts: list[tuple[str, int, int, int, int]]  # (name, E, K, N, top_k) of every routed expert matrix
    per_expert: list[int]  # rows per expert of the uniform grouped GEMMs
    routed: list[int]  # tokens routed top-k at random
    heads: list[tuple[str, int, int, int]]  # (name, H, H_kv, hd) of every prefill attention (MLA: its decompressed)
    decode_heads: list[tuple[str, int, int, int]]  # the same for a decode step's attention over a K/V cache
    mla: list[tuple[str, int, int, int]]  # (name, H, r, d_r) of every absorbed MLA decode
    prefill: list[tuple[int, int]]  # (B, S) of the prefill attentions
    backward: list[int]  # S of the attention backwards (one sequence, the first head shape)
    batches: list[int]  # B of the decode steps
    lengths: list[int]  # L of the decode steps
    cache_budget: int  # bytes of cache a decode cell may hold
    mamba: str | None  # the preset whose Mamba-2 mixer is timed
    mamba_prefill: list[tuple[int, int]]  # (B, T) of its prefills
    mamba_steps: list[int]  # B of its decode steps
    reduction_rows: list[int]  # rows of the row norms
    host_presets: list[str]  # the families whose tiny copies time the host's cost per call
    scatter_tokens: list[int]  # tokens of the routed experts' combine (index_add_)
    scatter_widths: list[int]
    scatter_top_k: list[int]
    order: tuple[str, ...] = CURVES  # the curves, in the order the harness measures them


def gemm_shapes(spec: ModelSpec, scale: int = 1) -> list[Gemm]:
    """The distinct weight-matmul shapes of `spec`'s layers (its attention's and every FFN's matrices), each
    width divided by `scale` and rounded up to a multiple of 16 (fp8 GEMMs need it); projections of the same
    shape are one GEMM (llama3-8b: q/o, k/v, gate/up, down)."""
    found: dict[tuple[int, int], list[str]] = {}
    parts = [spec.attention.matrices(spec.d_model)] + [g.ffn.matrices(spec.d_model) for g in spec.layer_groups()]
    for part in parts:
        for name, shapes in part.items():
            for d_in, d_out in shapes:
                n, k = (ceil_div(ceil_div(w, scale), 16) * 16 if scale > 1 else w for w in (d_out, d_in))
                names = found.setdefault((n, k), [])
                if name not in names:
                    names.append(name)
    return [Gemm("/".join(names), n, k) for (n, k), names in found.items()]


def plan(spec: ModelSpec, device: str, quick: bool = False, curves: list[ModelSpec] | None = None) -> Plan:
    """The runs of a calibration on `device`: on cuda M = 1, 2, 4, … 16384 and lengths 512 … 32768 (quick:
    every other one, fewer runs); on cpu a smoke run at tiny sizes (M ≤ 64, lengths ≤ 256, widths / 16).
    `curves`: also the reference engine's kernel curves, at the shapes of these models (curve_plan)."""
    a = spec.attention.gqa_shape()
    if device == "cpu":
        rows, lengths = [2**i for i in range(7)], [16, 32, 64, 128, 256]
        return Plan(device, spec.name, gemm_shapes(spec, CPU_SCALE), rows, a["heads"], a["kv_heads"], a["head_dim"],
                    lengths, lengths, copy_bytes=4 << 20, tiny=16, flush_bytes=1 << 20, messages=[1 << 10, 1 << 20],
                    warmup=1, runs=3, tiny_runs=20, quick=quick, smoke=True,
                    notes=[f"CPU smoke run: GEMM widths / {CPU_SCALE}, M ≤ 64, lengths ≤ 256; it covers the code "
                           "path, its figures are not a GPU's"],
                    curves=curve_plan(curves, device) if curves else None)
    step = 2 if quick else 1
    rows = [2**i for i in range(0, 15, step)]
    lengths = [2**i for i in range(9, 16, step)]
    messages = [2**i for i in range(10, 31, 2 * step)]  # 1 KiB … 1 GiB
    return Plan(device, spec.name, gemm_shapes(spec), rows, a["heads"], a["kv_heads"], a["head_dim"], lengths,
                lengths, copy_bytes=1 << 30, tiny=16, flush_bytes=256 << 20, messages=messages, warmup=3,
                runs=5 if quick else 10, tiny_runs=50 if quick else 200, quick=quick, smoke=False,
                curves=curve_plan(curves, device) if curves else None)


def curve_plan(specs: list[ModelSpec], device: str) -> Curves:
    """The reference engine's kernel curves at the shapes of `specs` (every weight matrix, LM head, attention
    and expert shape, deduplicated): on cuda at the sizes the campaign's steps reach (GEMMs M = 1 … 16384,
    prefills to 32768 tokens, caches to 32768 keys); on cpu a smoke run (widths / CPU_SCALE, tiny sizes)."""
    cpu = device == "cpu"
    scale = CPU_SCALE if cpu else 1

    def w(x: int) -> int:
        return ceil_div(ceil_div(x, scale), 16) * 16 if cpu else x

    gemms: dict[tuple[int, int], str] = {}
    heads, decode_heads, mla, experts = {}, {}, {}, {}
    mamba = None
    for spec in specs:
        for g in gemm_shapes(spec, scale):
            gemms.setdefault((g.n, g.k), f"{g.name} ({spec.name})")
        gemms.setdefault((w(spec.vocab_size), w(spec.d_model)), f"lm_head ({spec.name})")
        for g in spec.layer_groups():
            m = g.mixer
            if m is not None and m.core_kernel(True, False) == "scan_prefill":
                mamba = mamba or spec.name
            elif m is not None and m.core_kernel(False, True) == "latent_decode":
                a = m.mla_shape()
                h = max(1, a["heads"] // scale)
                heads.setdefault((h, h, a["qk_nope_head_dim"] + a["qk_rope_head_dim"]), spec.name)
                mla.setdefault((h, w(a["kv_lora_rank"]), a["qk_rope_head_dim"]), spec.name)
            elif m is not None:
                a = m.gqa_shape()
                h, kv = max(1, a["heads"] // scale), max(1, a["kv_heads"] // scale)
                heads.setdefault((h, kv if h % kv == 0 else 1, a["head_dim"]), spec.name)
                decode_heads.setdefault((h, kv if h % kv == 0 else 1, a["head_dim"]), spec.name)
            f = g.ffn
            if f.routed_experts:
                d, dff = w(spec.d_model), w(f.d_ff)
                experts.setdefault((f.experts, d, dff), (f"{spec.name} gate/up", f.top_k))
                experts.setdefault((f.experts, dff, d), (f"{spec.name} down", f.top_k))
    two = [2**i for i in range(0, 15)]
    if cpu:
        curves = dict(rows=[1, 2, 8, 16], head_rows=8, elementwise=[2**10, 2**12, 2**14], width=64,
                      per_expert=[1, 4], routed=[1, 8], prefill=[(1, 16), (2, 32)], backward=[16, 32],
                      batches=[1, 2], lengths=[16, 17, 64], cache_budget=1 << 26, mamba_prefill=[(1, 16)],
                      mamba_steps=[1], reduction_rows=[1, 4, 64], scatter_tokens=[1, 16], scatter_widths=[64],
                      scatter_top_k=[2])
    else:
        curves = dict(rows=two, head_rows=4096, elementwise=[2**i for i in range(10, 29, 2)], width=4096,
                      per_expert=two[:13], routed=[1, 8, 64, 512, 4096],
                      prefill=[(1, 2**i) for i in range(9, 16)] + [(8, 512), (8, 4096), (8, 32768), (64, 512),
                                                                   (64, 4096)],
                      backward=[2**i for i in range(9, 15)], batches=[1, 8, 64],
                      lengths=sorted({n for i in range(9, 16) for n in (2**i, 2**i + 1)}),
                      cache_budget=16 << 30, mamba_prefill=[(1, 512), (1, 4096), (8, 512), (8, 4096), (1, 16384)],
                      mamba_steps=[1, 8, 64], reduction_rows=[4**i for i in range(9)],
                      scatter_tokens=[8**i for i in range(6)], scatter_widths=[2048, 4096], scatter_top_k=[2, 6])
    return Curves(presets=[s.name for s in specs], gemms=[(name, n, k) for (n, k), name in gemms.items()],
                  experts=[(name, e, k, n, top) for (e, k, n), (name, top) in experts.items()],
                  heads=[(name, *shape) for shape, name in heads.items()],
                  decode_heads=[(name, *shape) for shape, name in decode_heads.items()],
                  mla=[(name, *shape) for shape, name in mla.items()], mamba=mamba,
                  host_presets=[s.name for s in specs] + [p for p in HOST_EXTRA if p not in {s.name for s in specs}],
                  **curves)


# ---- the fit ----------------------------------------------------------------------------------------------


def op_time(flops: float, bytes_: float, rate: float, bandwidth: float, kernel_s: float, overlap: float) -> float:
    """The time model's seconds of one op (llmcalc/costs/step_time.py StepTime): max(c, m) + overlap·min(c, m)
    + kernel_s."""
    return overlapped(flops / rate, bytes_ / bandwidth, overlap) + kernel_s


def compute_seconds(t: float, m: float, kernel_s: float, overlap: float) -> float | None:
    """The compute time c at which op_time gives the measured `t` for memory time `m`; None where t does not
    depend on c (memory-bound with full overlap) or t is below what memory alone takes."""
    return compute_behind(t - kernel_s, m, overlap)


def gemm_flops(m: int, n: int, k: int, pad: float = 0.0) -> float:
    """FLOPs the time model charges a weight matmul of M rows: 2 · (M + pad) · N · K."""
    return MAC * (m + pad) * n * k


def gemm_bytes(m: int, n: int, k: int, operand: int = BF16, out: int = BF16) -> int:
    """Bytes a weight matmul moves: the weight N·K and the activation M·K in, M·N out."""
    return (n * k + m * k) * operand + m * n * out


def half_peak(gpu: GPU) -> float:
    """The peak the bf16 GEMMs are measured against: the GPU's bf16 peak, else its fp16 one (a GPU without bf16
    tensor cores runs them at its 16-bit rate)."""
    return gpu.peak("bf16" if gpu.peak_tflops.bf16 else "fp16")


def kernel_fixed_s(gemms: list[dict], gpu: GPU, tm: TimeModel) -> tuple[float, int] | None:
    """(seconds, runs): the fixed time of a real kernel under `tm`'s op form, the median over the weight matmuls of
    `gemms` ({m, n, k, dtype, seconds, how}) replayed from a CUDA graph (`how` graph) with M ≤ SMALL_M rows, of the
    measured time less max(c, m) + overlap · min(c, m) at tm's efficiencies and pad (the kernel_s that makes the
    median run exact); None without such runs."""
    residuals = []
    for x in gemms:
        fp8 = x["dtype"] == "fp8"
        if x.get("how") != "graph" or x["m"] > SMALL_M or x["dtype"] not in ("bf16", "fp8"):
            continue
        if fp8 and not (gpu.peak_tflops.fp8 and tm.fp8_efficiency):
            continue
        rate = gpu.peak("fp8") * tm.fp8_efficiency if fp8 else half_peak(gpu) * tm.compute_efficiency
        c = gemm_flops(x["m"], x["n"], x["k"], tm.matmul_pad_rows) / rate
        m = gemm_bytes(x["m"], x["n"], x["k"], FP8 if fp8 else BF16) / (gpu.bandwidth * tm.memory_efficiency)
        residuals.append(x["seconds"] - overlapped(c, m, tm.overlap))
    return (statistics.median(residuals), len(residuals)) if residuals else None


def largest(points: list[dict], key: str, by: tuple[str, ...] = ()) -> list[dict]:
    """The LARGE points with the largest `key`, within each series of equal `by` fields (a GEMM shape)."""
    groups: dict = {}
    for p in points:
        groups.setdefault(tuple(p[b] for b in by), []).append(p)
    return [p for g in groups.values() for p in sorted(g, key=lambda p: p[key])[-LARGE:]]


def best_efficiency(points: list[tuple[float, float, float]], peak: float, kernel_s: float,
                    overlap: float) -> float | None:
    """The best share of `peak` over (FLOPs, memory seconds, measured seconds) points: FLOPs / (peak · c), c
    the compute time at which the op form gives the measured time."""
    effs = [f / (peak * c) for f, m, t in points if (c := compute_seconds(t, m, kernel_s, overlap))]
    return max(effs) if effs else None


def gemm_fit(points: list[dict], peak: float, bandwidth: float, kernel_s: float, overlap: float,
             pad: float | None = None, operand: int = BF16) -> tuple[float, float, float]:
    """(efficiency, pad, median relative error) of weight matmuls `points` ({m, n, k, seconds, name}): at each
    pad the efficiency is the best over the large-M runs; the pad is the one whose op form fits every run best
    (least squares of the relative error), searched over BOUNDS on a grid of 8 rows, then of 1/4 row; `pad`
    given: only the efficiency at it."""
    top = largest(points, "m", by=("name", "n", "k"))

    def efficiency(p: float) -> float | None:
        pts = [(gemm_flops(x["m"], x["n"], x["k"], p), gemm_bytes(x["m"], x["n"], x["k"], operand) / bandwidth,
                x["seconds"]) for x in top]
        return best_efficiency(pts, peak, kernel_s, overlap)

    def errors(p: float) -> list[float]:
        e = efficiency(p)
        if e is None:
            return [float("inf")]
        return [op_time(gemm_flops(x["m"], x["n"], x["k"], p), gemm_bytes(x["m"], x["n"], x["k"], operand),
                        peak * e, bandwidth, kernel_s, overlap) / x["seconds"] - 1 for x in points]

    def loss(p: float) -> float:
        return sum(r * r for r in errors(p))

    if pad is None:
        lo, hi = BOUNDS["matmul_pad_rows"]
        pad = min((lo + 8 * i for i in range(int((hi - lo) // 8) + 1)), key=loss)
        pad = min((max(lo, min(hi, pad + j / 4)) for j in range(-32, 33)), key=loss)
    e = efficiency(pad)
    if e is None:
        raise UserError("calibrate: no GEMM run took longer than its memory time; nothing to fit a compute "
                        "efficiency to (check `gpu`: its bandwidth may be far below this device's)")
    return e, pad, statistics.median(abs(r) for r in errors(pad))


def attention_flops(heads: int, kv_heads: int, head_dim: int, seq: int) -> int:
    """Causal attention-core FLOPs of one sequence's prefill of `seq` tokens, as llmcalc counts them
    (llmcalc/model/attention.py, GQA): 4 · heads · head_dim per pair, seq · (seq + 1) / 2 pairs."""
    attn = GQA(heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    return sum(attn.core(seq, 0, None, "causal").values())


def attention_bytes(heads: int, kv_heads: int, head_dim: int, seq: int) -> int:
    """Bytes a flash prefill moves at least, as latency counts the core's: Q and O, and the fresh K and V, per
    token (query_io + key_value_io), bf16."""
    attn = GQA(heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    return BF16 * seq * (attn.query_io() + attn.key_value_io())


def sig(x: float, digits: int = 3) -> float:
    """`x` to `digits` significant digits."""
    return float(f"{x:.{digits}g}")


def clip(name: str, v: float) -> tuple[float, str | None]:
    """`v` inside TimeModel's range for `name` (BOUNDS), and a note when it had to move."""
    lo, hi = BOUNDS[name]
    if name in SHARES:
        inside = min(max(v, 1e-6), hi)
    elif name.endswith("_s"):
        inside = min(max(v, lo), 0.999)
    else:
        inside = min(max(v, lo), hi)
    return inside, (None if inside == v else f"clipped from {sig(v)} to {inside}, TimeModel's range")


def fit(raw: dict, gpu: GPU, base: TimeModel, base_name: str) -> tuple[TimeModel, list[str]]:
    """The calibrated TimeModel of the measurements `raw` (llmcalc/reference/calibrate.py measure()) on `gpu`,
    with every figure not measured kept from `base` (the bundled profile called `base_name`); notes on the fit."""
    stamp = (f"measured by llmcalc calibrate on {raw['device_name']}"
             + (" (a CPU smoke run: not a GPU's figures)" if raw["smoke"] else "")
             + f", {raw['date']}, torch {raw['torch']}, CUDA {raw['cuda'] or 'none'}")
    figures: dict[str, float] = {}
    sources: dict[str, str] = {}
    notes: list[str] = list(raw.get("notes", []))

    def put(name: str, value: float, what: str, digits: int = 3) -> None:
        value, moved = clip(name, value)
        figures[name] = round(value, 1) if name == "matmul_pad_rows" else sig(value, digits)
        sources[name] = f"{stamp}: {what}" + (f"; {moved}" if moved else "")

    def keep(name: str, why: str) -> None:
        value = getattr(base, name)
        if value is None:
            return
        figures[name] = value
        origin = base.sources.get(name) or f"TimeModel's default, {ROOFLINE.sources.get(name, 'no source given')}"
        sources[name] = f"kept from {base_name} ({why}): {origin}"

    bandwidth = gpu.bandwidth
    put("memory_efficiency", raw["copy"]["bytes"] / raw["copy"]["seconds"] / bandwidth,
        f"device-to-device copy of {raw['copy']['bytes'] // 2:,} bytes, bytes read + written / time, over the "
        f"datasheet {gpu.memory_bandwidth_gbs:g} GB/s")
    kernel_s, overlap = raw["tiny"]["seconds"], base.overlap  # an isolated call's fixed cost, launch included
    fastest = min(x["seconds"] for x in raw["gemm"] + raw["attention"])
    if kernel_s > fastest:  # no call costs less than its fixed part: a noisy isolated add is capped there
        notes.append(f"the isolated add took {kernel_s * 1e6:.1f} µs, longer than the fastest measured call "
                     f"({fastest * 1e6:.1f} µs); the fits subtract {fastest * 1e6:.1f} µs as each call's fixed cost")
        kernel_s = fastest
    if raw.get("graph_tiny"):
        g = raw["graph_tiny"]
        put("kernel_s", g["seconds_per_kernel"], f"per kernel of {g['kernels']:,} adds on {g['elements']} elements "
            "replayed back to back from one CUDA graph, as serving stacks replay a decode step (an isolated call, "
            f"launch included, took {kernel_s * 1e6:.1f} µs: the GEMM and attention fits subtract that)")
    else:
        put("kernel_s", kernel_s, f"median time of an add on {raw['tiny']['elements']} elements")
    stream = bandwidth * figures["memory_efficiency"]

    bf16 = [x for x in raw["gemm"] if x["dtype"] == "bf16"]
    peak = half_peak(gpu)
    try:
        e, pad, err = gemm_fit(bf16, peak, stream, kernel_s, overlap)
    except UserError:  # every GEMM within its fixed cost of the fastest call (a loaded CPU): no fixed cost then
        try:
            e, pad, err = gemm_fit(bf16, peak, stream, 0.0, overlap)
        except UserError:
            if not raw["smoke"]:
                raise
            e = pad = err = None  # a loaded CPU's smoke run: its copy slower than its GEMMs; nothing to fit
        notes.append(f"no GEMM took longer than the fixed cost of {kernel_s * 1e6:.1f} µs plus its memory time; "
                     "the GEMM fits subtract no fixed cost")
        kernel_s = 0.0
    if e is None:
        for name in ("compute_efficiency", "matmul_pad_rows", "fp8_efficiency"):
            keep(name, "the CPU smoke run's GEMMs ran no slower than its copy's bandwidth allows")
    else:
        shapes = ", ".join(sorted({f"{x['name']} {x['n']}×{x['k']}" for x in bf16}))
        ms = sorted({x["m"] for x in bf16})
        span = f"M = {ms[0]} … {ms[-1]}, {len(ms)} sizes, of {shapes} (N×K, {raw['model']})"
        put("compute_efficiency", e, f"best bf16 GEMM throughput over the {LARGE} largest M of each shape / "
            f"{peak / 1e12:g} TFLOP/s, counting M + matmul_pad_rows rows; {span}")
        put("matmul_pad_rows", pad, f"least squares (relative) of t(M) = kernel_s + max(c, m) + overlap·min(c, "
            f"m), c = 2·(M + pad)·N·K / (peak · compute_efficiency), over bf16 GEMMs at {span}; median error "
            f"{err:.1%}")
        notes.append(f"bf16 GEMMs: efficiency {figures['compute_efficiency']}, pad {figures['matmul_pad_rows']} "
                     f"rows, median error of the op form {err:.1%} over {len(bf16)} runs")

        fp8 = [x for x in raw["gemm"] if x["dtype"] == "fp8"]
        if fp8 and gpu.peak_tflops.fp8:
            e8, _, err8 = gemm_fit(fp8, gpu.peak("fp8"), stream, kernel_s, overlap,
                                   pad=figures["matmul_pad_rows"], operand=FP8)
            put("fp8_efficiency", e8, f"best fp8 (e4m3, torch._scaled_mm, bf16 out) GEMM throughput over the "
                f"{LARGE} largest M of each shape / {gpu.peak('fp8') / 1e12:g} TFLOP/s at the bf16 fit's pad; "
                f"median error {err8:.1%}")
        else:
            keep("fp8_efficiency", "no fp8 GEMM measured" if gpu.peak_tflops.fp8 else f"{gpu.name} has no fp8 peak")

    pre = [x for x in raw["attention"] if x["phase"] == "prefill"]
    pts = [(attention_flops(x["heads"], x["kv_heads"], x["head_dim"], x["length"]),
            attention_bytes(x["heads"], x["kv_heads"], x["head_dim"], x["length"]) / stream, x["seconds"])
           for x in largest(pre, "length")]
    if (ea := best_efficiency(pts, peak, kernel_s, overlap)) is not None:
        a = pre[0]
        put("attention_efficiency", ea, f"best causal bf16 SDPA prefill ({raw['attention_backend']}) over the "
            f"{LARGE} longest of {', '.join(str(x['length']) for x in pre)} tokens, {a['heads']} heads "
            f"({a['kv_heads']} kv) × {a['head_dim']}, FLOPs 4·heads·head_dim·S(S+1)/2 / {peak / 1e12:g} TFLOP/s")
    else:
        keep("attention_efficiency", "no prefill ran above its memory time")

    ar = sorted((x for x in raw["collectives"] if x["op"] == "all_reduce"), key=lambda x: x["bytes"])
    if ar:
        n, small = ar[0]["world"], ar[0]
        put("collective_s", small["seconds"], f"all-reduce of {small['bytes']} bytes over {n} GPUs ({raw['comm']})")
        cs = figures["collective_s"]
        ring = [2 * (n - 1) * x["bytes"] / n / (x["seconds"] - cs) for x in ar[-LARGE:] if x["seconds"] > cs]
        if ring:
            put("comm_efficiency", max(ring) / gpu.link_one_way, f"best ring all-reduce bus bandwidth, 2·(n − 1)/n "
                f"· bytes / (t − collective_s), over the {LARGE} largest of {ar[0]['bytes']} … {ar[-1]['bytes']} "
                f"bytes on {n} GPUs / one-way link {gpu.link_one_way / 1e9:g} GB/s")
    for name in ("comm_efficiency", "collective_s"):
        if name not in figures:
            keep(name, raw.get("comm_note") or "no collective measured")
    for name in KEPT:
        keep(name, "not measurable by microbenchmarks")
    order = ("compute_efficiency", "fp8_efficiency", "attention_efficiency", "matmul_pad_rows", "memory_efficiency",
             "comm_efficiency", "overlap", "kernel_s", "collective_s", "step_s", "launch_s")
    tm = TimeModel(name="calibrated", gpu=SMOKE_GPU if raw["smoke"] else gpu.name,
                   **{k: figures[k] for k in order if k in figures},
                   sources={k: sources[k] for k in order if k in sources})
    fixed = kernel_fixed_s(raw.get("curves", {}).get("gemm", []), gpu, tm) if not raw["smoke"] else None
    if fixed is not None and fixed[0] > 0:
        tiny = figures["kernel_s"]
        put("kernel_s", fixed[0], f"median, over {fixed[1]} bf16 and fp8 weight matmuls of M = 1 … {SMALL_M} rows "
            "replayed from a CUDA graph (the run's kernel curves), of the time less max(c, m) + overlap·min(c, m) "
            f"at this profile's figures: a real kernel's fixed cost (a tiny add replayed so took {tiny * 1e6:.3g} µs)")
        tm = tm.model_copy(update={"kernel_s": figures["kernel_s"], "sources": tm.sources | {
            "kernel_s": sources["kernel_s"]}})
    return tm, notes
