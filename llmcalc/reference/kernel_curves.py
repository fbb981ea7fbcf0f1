"""The reference engine's kernel curves: what the bundled reference model's own kernels achieve on this device, by
size, measured as the reference runs them (llmcalc/reference/layers.py). Only `llmcalc calibrate --engine
reference` imports this module (through llmcalc/reference/calibrate.py).

Each curve is a list of plain-JSON points. Times are seconds per call:

- graph: a CUDA graph of n tiny kernels replayed, n = 1 … 1000: its per-replay and per-kernel cost.
- host: an eager aten call's host cost (Python, dispatch, launch) when the GPU keeps up.
- elementwise: in-place and out-of-place element-wise kernels (copy, add, mul, silu, a row norm in fp32) over
  2 KB … 512 MB, replayed from a graph (as a decode step runs them) and back to back.
- gemm: y = F.linear(x, W) in bf16 and fp8 (torch._scaled_mm) for every weight shape of the plan's presets and
  their LM heads, M = 1 … 16384, replayed from a graph, the weights rotated through copies larger than the L2
  (a step reads every weight from memory once).
- grouped_gemm: the routed experts' grouped GEMM (torch._grouped_mm, fp8 through torch._scaled_grouped_mm) at
  1 … 4096 tokens per expert, and at T tokens routed top-k at random (a decode step's few experts).
- attention_prefill: SDPA as the reference calls it (causal, grouped K/V, no backend forced) by length and
  batch for each head shape; attention_backward: its backward (autograd) by length, alone and queued behind a
  sleeping kernel (its kernels' own time).
- attention_decode: one query per sequence over a cache of L keys (SDPA, grouped K/V), replayed from a graph.
- mla_decode: MLA's absorbed decode step over the latent cache (MLAttention._absorbed_step), by batch and L.
- mamba: the reference Mamba-2 mixer (chunked scan for a prefill, the recurrence for a step), by batch and length.

Legend: M rows, N × K a weight (out × in), E experts, H query heads, H_kv key/value heads, hd head dim, S a
prefill's length, L a cache's, B batch, r MLA's latent rank, d_r its RoPE key width.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16
FP8 = getattr(torch, "float8_e4m3fn", None)
ROTATE_BYTES = 160 << 20
"""Weights and caches smaller than this are rotated through copies totalling it, so a replay reads them from memory
rather than the L2 (50–60 MB on a Hopper GPU), as a decode step does."""
MAX_COPIES = 32


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str, warmup: int = 1, runs: int = 5) -> float:
    """Median seconds of one call of fn (CUDA events on cuda, perf_counter elsewhere), after `warmup` calls."""
    for _ in range(warmup):
        fn()
    _sync(device)
    out = []
    for _ in range(runs):
        if device.startswith("cuda"):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return statistics.median(out)


def queued(fn: Callable[[], object], device: str, runs: int = 3, sleep_cycles: int = 20_000_000) -> float:
    """Median GPU seconds of fn()'s kernels queued behind a kernel sleeping `sleep_cycles` (the host's dispatch
    hidden; 20M cycles are about 10 ms), CUDA events; elsewhere fn()'s time."""
    if not device.startswith("cuda"):
        return timed(fn, device, 1, runs)
    fn()
    times = []
    for _ in range(runs):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep_cycles)  # the host queues the call behind it
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) / 1e3)
    return statistics.median(times)


def replayed(calls: list[Callable[[], object]], device: str, runs: int = 7) -> tuple[float, str]:
    """Seconds per call of `calls` run back to back, captured once in a CUDA graph and replayed (median of `runs`
    replays after two), and "graph"; off cuda, or where capture fails, the calls run eagerly ("eager: why")."""
    def every() -> None:
        for c in calls:
            c()

    if device.startswith("cuda"):
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                every()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                every()
            seconds = timed(graph.replay, device, 2, runs)
            del graph
            return seconds / len(calls), "graph"
        except RuntimeError as e:
            how = f"eager: capture failed ({str(e).splitlines()[0][:100]})"
    else:
        how = "eager"
    return timed(every, device, 1, runs) / len(calls), how


def copies(nbytes: int) -> int:
    """Copies of a tensor of `nbytes` a replay rotates through (ROTATE_BYTES in all, at most MAX_COPIES)."""
    return max(1, min(MAX_COPIES, math.ceil(ROTATE_BYTES / max(nbytes, 1))))


def _free(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


# ---- fixed costs ------------------------------------------------------------------------------------------


def graph_costs(device: str, counts: tuple[int, ...] = (1, 10, 100, 1000)) -> list[dict]:
    """Seconds of one replay of a CUDA graph of n tiny kernels (an add on 16 elements), for each n: the slope is
    a kernel's cost inside a captured step, the intercept the replay's own."""
    x = torch.ones(16, device=device)
    out = []
    for n in counts:
        seconds, how = replayed([lambda: x.add_(1)] * n, device)
        out.append({"kernels": n, "seconds_per_replay": seconds * n, "how": how})
    return out


def host_costs(device: str, calls: int = 2000) -> list[dict]:
    """Host seconds of one eager call when the GPU keeps up (tiny operands): an aten add, an F.linear on one row,
    an nn.Module call of an nn.Linear. Timed over `calls` calls with perf_counter and one synchronisation."""
    x = torch.ones(16, device=device)
    y = torch.empty_like(x)
    lin = torch.nn.Linear(16, 16, device=device)
    row = torch.ones(1, 16, device=device)
    out = []
    for name, fn in (("aten add", lambda: torch.add(x, 1, out=y)), ("F.linear", lambda: F.linear(row, lin.weight)),
                     ("nn.Linear module", lambda: lin(row))):
        for _ in range(50):
            fn()
        _sync(device)
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
        out.append({"call": name, "seconds": (time.perf_counter() - t) / calls})
    return out


# ---- element-wise -------------------------------------------------------------------------------------------


ELEMENTWISE = {  # name: (bytes read + written per element of x in bf16, the call)
    "copy": 4, "add_": 6, "mul_": 4, "silu": 4, "row_norm_fp32": 2,
}


def elementwise(device: str, sizes: list[int], width: int) -> list[dict]:
    """Each ELEMENTWISE kernel on n bf16 elements (rows of `width` for the norm), n in `sizes`: replayed from a
    graph (reps back to back on the same tensors, L2-warm when they fit, as a step's activations are)."""
    out = []
    for n in sizes:
        x = torch.randn(n, device=device).to(BF16)
        y = torch.randn(n, device=device).to(BF16)
        z = torch.empty_like(x)
        rows = x.view(-1, width) if n % width == 0 else x.view(1, -1)
        calls = {"copy": lambda: z.copy_(x), "add_": lambda: z.add_(y), "mul_": lambda: z.mul_(1.001),
                 "silu": lambda: F.silu(x), "row_norm_fp32":
                 lambda: torch.linalg.vector_norm(rows, dim=-1, keepdim=True, dtype=torch.float32)}
        reps = 50 if n <= 1 << 20 else 10 if n <= 1 << 24 else 3
        for name, fn in calls.items():
            seconds, how = replayed([fn] * reps, device)
            out.append({"op": name, "elements": n, "bytes": ELEMENTWISE[name] * n, "seconds": seconds, "how": how})
        del x, y, z, rows
        _free(device)
    return out


def strided(device: str, sizes: list[int], width: int) -> list[dict]:
    """The reference's element-wise kernels that broadcast or stride, on n bf16 elements in rows of `width`, replayed
    from a graph: a row of weights (x · w, an RMSNorm's weight), a column of scales (x · s, its 1/rms), half of
    each head's features against a position table (RoPE, in place), and K written into a slice of a cache
    [1, 8, 2·T, 128] from [1, T, 8, 128] laid out by tokens (a cache step)."""
    out = []
    for n in sizes:
        rows = max(1, n // width)
        x = torch.randn(rows, width, device=device).to(BF16)
        w = torch.randn(width, device=device).to(BF16)
        s = torch.randn(rows, 1, device=device).to(BF16)
        heads = x.view(rows, width // 64, 64)  # [T, heads, 64]
        table = torch.randn(rows, 1, 32, device=device).to(BF16)  # [T, 1, rot/2]
        t = max(1, n // 1024)
        k = torch.randn(1, t, 8, 128, device=device).to(BF16).transpose(1, 2)  # [1, 8, T, 128] laid out by tokens
        cache = torch.zeros(1, 8, 2 * t, 128, device=device, dtype=BF16)
        calls = {"row_scale": (lambda: x.mul_(w), 4 * rows * width + 2 * width),
                 "column_scale": (lambda: x * s, 4 * rows * width + 2 * rows),
                 "rope_half": (lambda: heads[..., :32].mul_(table), 2 * rows * width + 2 * rows * 32),
                 "cache_write": (lambda: cache[:, :, :t].copy_(k), 4 * t * 1024)}
        reps = 50 if n <= 1 << 20 else 10 if n <= 1 << 24 else 3
        for name, (fn, moved) in calls.items():
            seconds, how = replayed([fn] * reps, device)
            out.append({"op": name, "elements": n, "bytes": moved, "seconds": seconds, "how": how})
        del x, w, s, heads, table, k, cache
        _free(device)
    return out


def reductions(device: str, rows: list[int], width: int) -> list[dict]:
    """A row norm in fp32 (torch.linalg.vector_norm, as the reference's RMSNorm takes it) over `rows` rows of `width`
    bf16 elements, replayed from a graph: a decode step's few rows and a prefill's many."""
    out = []
    for r in rows:
        x = torch.randn(r, width, device=device).to(BF16)
        seconds, how = replayed([lambda x=x: torch.linalg.vector_norm(x, dim=-1, keepdim=True,
                                                                     dtype=torch.float32)] * 20, device)
        out.append({"op": "row_norm_fp32", "rows": r, "width": width, "bytes": 2 * r * width + 4 * r,
                    "seconds": seconds, "how": how})
        del x
    return out


def scatter_add(device: str, tokens: list[int], widths: list[int], top_k: list[int]) -> list[dict]:
    """The routed experts' combine as the reference runs it: out.index_add_(0, rows, y), each of N tokens receiving
    its k expert outputs (y [N·k, d] in expert order, rows its token), replayed from a graph; bytes counted as
    kernel_count.py counts a scatter (the source three times, and the index)."""
    out = []
    for d in widths:
        for k in top_k:
            for n in tokens:
                g = torch.Generator().manual_seed(0)
                rows = torch.randperm(n * k, generator=g).to(device) // k  # [N·k]: token of each row, in expert order
                y = torch.randn(n * k, d, device=device).to(BF16)
                x = torch.zeros(n, d, device=device, dtype=BF16)
                seconds, how = replayed([lambda: x.index_add_(0, rows, y)] * 10, device)
                out.append({"op": "index_add_", "tokens": n, "width": d, "top_k": k,
                            "bytes": 3 * y.numel() * 2 + rows.numel() * 8, "seconds": seconds, "how": how})
                del rows, y, x
    return out


def graph_copies(device: str, pairs: int = 100) -> list[dict]:
    """Seconds per contiguous copy (torch copies a contiguous tensor with cudaMemcpyAsync: a memcpy node in a
    graph) when copies alternate with kernels in a CUDA graph, as they do in a decode step: a graph of `pairs`
    (add, copy) pairs against one of the adds alone, on 16 and 4096 elements."""
    out = []
    for n in (16, 4096):
        x = torch.ones(n, device=device, dtype=BF16)
        a = torch.ones(n, device=device, dtype=BF16)
        b = torch.empty_like(a)
        adds, _ = replayed([lambda: x.add_(1)] * pairs, device)
        both, how = replayed([lambda: x.add_(1), lambda: b.copy_(a)] * pairs, device)
        out.append({"elements": n, "add_s": adds, "add_and_copy_s": 2 * both, "copy_s": 2 * both - adds,
                    "how": how})
    return out


def eager_stream(device: str, kernels: int = 400) -> list[dict]:
    """Seconds per kernel of `kernels` kernels launched eagerly onto a stream that already holds work (a sleep
    kernel lets the host queue them all), for a tiny add and an add on 1M elements: what each kernel of an eager
    forward costs the GPU when the host keeps ahead (launch gaps included), against its time replayed from a
    graph."""
    if not device.startswith("cuda"):
        return []
    out = []
    for n in (16, 1 << 20):
        x = torch.ones(n, device=device)
        y = torch.ones(n, device=device)
        graph_s, _ = replayed([lambda: x.add_(y)] * 50, device)

        def stream(x=x, y=y):
            for _ in range(kernels):
                x.add_(y)

        # ~50 ms of GPU time asleep: the host queues every kernel behind it
        out.append({"elements": n, "eager_s": queued(stream, device, 5, 100_000_000) / kernels, "graph_s": graph_s})
    return out


def host_models(device: str, presets: list[str], model: Callable, layers: int | None = 2, scale: int = 16
                ) -> list[dict]:
    """Host seconds of an eager forward of narrow copies of `presets` (`layers` layers, None: all of them; widths ÷
    `scale`): a prefill of 16 tokens and a decode step, batch 1, each the median of 5 after 2, wall clock with a
    synchronisation. The GPU work is a few µs a kernel: the time is the reference's Python, dispatch and launches,
    per aten call. `model(name, layers, scale)`: the scaled copy of a preset."""
    from llmcalc.reference.model import Decoder

    out = []
    with torch.no_grad():
        for name in presets:
            spec = model(name, layers, scale)
            model = Decoder(spec, dtype=BF16, device=device).eval().use_kernels("serving")
            for phase, (t, start) in (("prefill", (16, 0)), ("decode", (1, 16))):
                tokens = torch.randint(0, spec.vocab_size, (1, t), device=device)
                cache = model.new_cache(1, 17)

                def fwd(tokens=tokens, cache=cache, start=start):
                    model(tokens, cache, start, "last").float()

                for _ in range(2):
                    fwd()
                _sync(device)
                runs = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    fwd()
                    _sync(device)
                    runs.append(time.perf_counter() - t0)
                out.append({"preset": name, "layers": spec.n_layers, "scale": scale, "phase": phase, "tokens": t,
                            "seconds": statistics.median(runs)})
            del model
    return out


# ---- GEMMs ---------------------------------------------------------------------------------------------------


def gemms(device: str, shapes: list[tuple[str, int, int]], rows: list[int], fp8: bool,
          head_rows: int) -> tuple[list[dict], list[str]]:
    """bf16 (and fp8) y = x · Wᵀ for every (name, N, K) and M in `rows` (LM heads: M ≤ head_rows), replayed from a
    graph over rotated weight copies."""
    out, notes = [], []
    for name, n, k in shapes:
        m_rows = [m for m in rows if not name.startswith("lm_head") or m <= head_rows]
        nbytes = 2 * n * k
        ws = [torch.randn(n, k, device=device).to(BF16) for _ in range(copies(nbytes))]  # W (N, K)
        w8 = [w.to(FP8) for w in ws] if fp8 else []
        one = torch.ones((), dtype=torch.float32, device=device)
        for m in m_rows:
            x = torch.randn(m, k, device=device).to(BF16)  # x (M, K)
            reps = max(len(ws), 2)
            calls = [lambda w=ws[i % len(ws)]: F.linear(x, w) for i in range(reps)]
            seconds, how = replayed(calls, device)
            out.append({"name": name, "dtype": "bf16", "m": m, "n": n, "k": k, "seconds": seconds, "how": how})
            if w8:
                x8 = x.to(FP8)
                calls = [lambda w=w8[i % len(w8)]: torch._scaled_mm(x8, w.t(), scale_a=one, scale_b=one,
                                                                   out_dtype=BF16) for i in range(reps)]
                try:
                    seconds, how = replayed(calls, device)
                    out.append({"name": name, "dtype": "fp8", "m": m, "n": n, "k": k, "seconds": seconds, "how": how})
                except (RuntimeError, NotImplementedError) as e:
                    notes.append(f"fp8 GEMM {name} M={m}: {str(e).splitlines()[0][:100]}")
            del x
        del ws, w8
        _free(device)
    return out, notes


def grouped_offsets(counts: list[int], device: str) -> torch.Tensor:
    """Cumulative row ends of groups of `counts` rows (grouped_mm's offs, int32)."""
    ends, total = [], 0
    for c in counts:
        total += c
        ends.append(total)
    return torch.tensor(ends, dtype=torch.int32, device=device)


def routed_counts(tokens: int, experts: int, top_k: int, seed: int = 0) -> list[int]:
    """Rows per expert when `tokens` tokens each pick top_k distinct experts uniformly at random."""
    g = torch.Generator().manual_seed(seed)
    picks = torch.rand(tokens, experts, generator=g).argsort(-1)[:, :top_k].flatten()
    return torch.bincount(picks, minlength=experts).tolist()


def grouped_gemms(device: str, experts: list[tuple[str, int, int, int, int]], per_expert: list[int],
                  routed: list[int], fp8: bool) -> tuple[list[dict], list[str]]:
    """The routed experts' grouped GEMM x [R, K] @ W [E, K, N] (the reference's layout, GROUPED_MM) for each
    (name, E, K, N, top_k): `per_expert` rows in every expert, then `routed` tokens routed top-k at random."""
    from llmcalc.reference.layers import GROUPED_MM

    out, notes = [], []
    for name, e, k, n, top_k in experts:
        ws = [torch.randn(e, k, n, device=device).to(BF16) for _ in range(copies(2 * e * k * n))]
        w8 = []
        if fp8:
            w8 = [w.transpose(1, 2).contiguous().to(FP8).transpose(1, 2) for w in ws]  # [E, K, N], N×K row-major
        series = [("uniform", m, [m] * e) for m in per_expert] + [
            ("routed", t, routed_counts(t, e, top_k)) for t in routed]
        for kind, size, counts in series:
            rows = sum(counts)
            if rows == 0:
                continue
            x = torch.randn(rows, k, device=device).to(BF16)
            offs = grouped_offsets(counts, device)
            reps = max(len(ws), 2)
            point = {"name": name, "experts": e, "k": k, "n": n, "series": kind, "size": size, "rows": rows,
                     "active": sum(c > 0 for c in counts)}
            try:
                seconds, how = replayed([lambda w=ws[i % len(ws)]: GROUPED_MM(x, w, offs=offs)
                                         for i in range(reps)], device)
                out.append(point | {"dtype": "bf16", "seconds": seconds, "how": how})
            except (RuntimeError, NotImplementedError, TypeError) as err:
                notes.append(f"grouped GEMM {name} {kind} {size} bf16: {str(err).splitlines()[0][:120]}")
            if w8 and hasattr(torch, "_scaled_grouped_mm"):
                x8 = x.to(FP8)
                sa = torch.ones(rows, dtype=torch.float32, device=device)
                sb = torch.ones(e, n, dtype=torch.float32, device=device)
                try:
                    seconds, how = replayed([lambda w=w8[i % len(w8)]: torch._scaled_grouped_mm(
                        x8, w, sa, sb, offs=offs, out_dtype=BF16) for i in range(reps)], device)
                    out.append(point | {"dtype": "fp8", "seconds": seconds, "how": how})
                except (RuntimeError, NotImplementedError, TypeError) as err:
                    notes.append(f"grouped GEMM {name} {kind} {size} fp8: {str(err).splitlines()[0][:120]}")
                    w8 = []
            del x
        del ws, w8
        _free(device)
    return out, notes


# ---- attention ------------------------------------------------------------------------------------------------


def _heads(b: int, s: int, h: int, hd: int, device: str, grad: bool = False) -> torch.Tensor:
    """[B, h, S, hd] laid out [B, S, h, hd], as the reference's projections give them."""
    t = torch.randn(b, s, h, hd, device=device).to(BF16).transpose(1, 2)
    return t.requires_grad_(grad) if grad else t


def attention_prefill(device: str, shapes: list[tuple[str, int, int, int]], cells: list[tuple[int, int]]
                      ) -> list[dict]:
    """Causal SDPA as the reference calls it (grouped K/V, no backend forced) for each head shape (name, H, H_kv,
    hd) and (B, S) in `cells`: one isolated call each (CUDA events; a prefill's kernels run long)."""
    out = []
    for name, h, hkv, hd in shapes:
        for b, s in cells:
            q, k, v = _heads(b, s, h, hd, device), _heads(b, s, hkv, hd, device), _heads(b, s, hkv, hd, device)
            fn = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: E731
            out.append({"name": name, "heads": h, "kv_heads": hkv, "head_dim": hd, "batch": b, "length": s,
                        "seconds": timed(fn, device, 1, 5 if b * s <= 1 << 15 else 3)})
            del q, k, v
            _free(device)
    return out


def attention_backward(device: str, shapes: list[tuple[str, int, int, int]], lengths: list[int]) -> list[dict]:
    """Causal SDPA forward, and forward + backward (autograd), one sequence of S tokens, each called alone and
    queued behind a sleeping kernel: the backward's own time is their difference; the queued one is its kernels'
    alone, without the host's start of a backward pass."""
    out = []
    for name, h, hkv, hd in shapes:
        for s in lengths:
            q, k, v = (_heads(1, s, n, hd, device, grad=True) for n in (h, hkv, hkv))
            grad = torch.randn(1, h, s, hd, device=device).to(BF16)

            def fwd(q=q, k=k, v=v):
                with torch.no_grad():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

            def both(q=q, k=k, v=v, grad=grad):
                F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(grad)
                q.grad = k.grad = v.grad = None

            out.append({"name": name, "heads": h, "kv_heads": hkv, "head_dim": hd, "length": s,
                        "forward_s": timed(fwd, device, 1, 3), "forward_backward_s": timed(both, device, 1, 3),
                        "forward_gpu_s": queued(fwd, device), "forward_backward_gpu_s": queued(both, device)})
            del q, k, v, grad
            _free(device)
    return out


def attention_decode(device: str, shapes: list[tuple[str, int, int, int]], batches: list[int], lengths: list[int],
                     budget: int) -> list[dict]:
    """One query per sequence over L cached keys, as the reference's decode step calls SDPA (grouped K/V, the
    cache a slice of a larger buffer), replayed from a graph over rotated caches; cells whose caches exceed
    `budget` bytes are left out."""
    out = []
    for name, h, hkv, hd in shapes:
        for b in batches:
            for n in lengths:
                nbytes = 2 * 2 * b * hkv * (n + 1) * hd
                if nbytes > budget:
                    continue
                caches = [(torch.randn(b, hkv, n + 1, hd, device=device).to(BF16),
                           torch.randn(b, hkv, n + 1, hd, device=device).to(BF16)) for _ in range(copies(nbytes))]
                q = _heads(b, 1, h, hd, device)
                calls = [lambda c=caches[i % len(caches)]: F.scaled_dot_product_attention(
                    q, c[0][..., :n, :], c[1][..., :n, :], enable_gqa=True) for i in range(max(2, len(caches)))]
                seconds, how = replayed(calls, device)
                out.append({"name": name, "heads": h, "kv_heads": hkv, "head_dim": hd, "batch": b, "length": n,
                            "seconds": seconds, "how": how})
                del caches, q
                _free(device)
    return out


def mla_decode(device: str, shapes: list[tuple[str, int, int, int]], batches: list[int], lengths: list[int],
               budget: int) -> list[dict]:
    """MLA's absorbed decode step over the latent cache (MLAttention._absorbed_step: scores against the latents
    and RoPE keys, softmax in fp32, the weighted latents) for each (name, H, r, d_r), batch and length, replayed
    from a graph over rotated caches."""
    from llmcalc.reference.layers import MLAttention

    out = []
    for name, h, r, dr in shapes:
        scale = 0.1
        for b in batches:
            for n in lengths:
                nbytes = 2 * b * (n + 1) * (r + dr)
                if nbytes > budget:
                    continue
                caches = [(torch.randn(b, n + 1, r, device=device).to(BF16),
                           torch.randn(b, n + 1, dr, device=device).to(BF16)) for _ in range(copies(nbytes))]
                q_lat = torch.randn(b, h, r, device=device).to(BF16)
                q_rope = torch.randn(b, h, dr, device=device).to(BF16)
                calls = [lambda c=caches[i % len(caches)]: MLAttention._absorbed_step(
                    q_lat, q_rope, c[0][:, :n], c[1][:, :n], scale) for i in range(max(2, len(caches)))]
                seconds, how = replayed(calls, device)
                out.append({"name": name, "heads": h, "rank": r, "rope": dr, "batch": b, "length": n,
                            "seconds": seconds, "how": how})
                del caches, q_lat, q_rope
                _free(device)
    return out


def mamba(device: str, spec, prefill: list[tuple[int, int]], steps: list[int]) -> list[dict]:
    """The reference Mamba-2 mixer of `spec` (its first Mamba layer's), whole (in_proj, conv, scan, gated norm,
    out_proj): a prefill of (B, T) from position 0 into a cache, and a decode step at batch B (graph-replayed); each
    point with the mixer's own kernels, counted (kernel_count.mixer_kernels)."""
    from dataclasses import asdict

    from llmcalc.reference.kernel_count import mixer_kernels
    from llmcalc.reference.layers import Step
    from llmcalc.reference.model import Decoder

    mixer = next((g.mixer for g in spec.layer_groups()
                  if g.mixer is not None and g.mixer.core_kernel(True, False) == "scan_prefill"), None)
    if mixer is None:
        return []
    from llmcalc.model.spec import ModelSpec

    name = next(g.mixer_name for g in spec.layer_groups() if g.mixer is mixer)
    one = ModelSpec.model_validate(spec.model_dump() | {"n_layers": 1,
                                                        "hybrid_pattern": [{"mixer": name, "ffn": "none"}]})
    model = Decoder(one, dtype=BF16, device=device).eval().use_kernels("serving")
    layer = model.layers[0].attn
    d = spec.d_model
    out = []
    with torch.no_grad():
        for b, t in prefill:
            x = torch.randn(b, t, d, device=device).to(BF16)
            cache = model.new_cache(b, t)[0]
            step = Step(0, None, None, False, True)
            out.append({"preset": spec.name, "phase": "prefill", "batch": b, "length": t,
                        "seconds": timed(lambda x=x, c=cache, s=step: layer(x, c, s), device, 1, 3),
                        "counted": asdict(mixer_kernels(spec, name, b, t, 0))})
            del x, cache
        for b in steps:
            x = torch.randn(b, 1, d, device=device).to(BF16)
            cache = model.new_cache(b, 2)[0]
            step = Step(1, None, None, False, True)
            seconds, how = replayed([lambda x=x, c=cache, s=step: layer(x, c, s)] * 4, device)
            out.append({"preset": spec.name, "phase": "decode", "batch": b, "length": 1, "seconds": seconds, "how": how,
                        "counted": asdict(mixer_kernels(spec, name, b, 1, 1))})
    del model
    _free(device)
    return out


def measure(c, device: str, model: Callable, progress: Callable[[str], None], notes: list[str],
            checkpoint: Callable[[dict], None] = lambda curves: None, only: list[str] | None = None) -> dict:
    """Every curve of the plan `c` (llmcalc/costs/calibration.py Curves, read by its fields), in its CURVES order
    (`only`: those named); `model(name, layers, scale)` is a preset's spec (layers None and scale 1: whole) or a
    scaled copy. A curve that fails is recorded in `notes` and the others go on; `checkpoint(curves so far)` after
    each."""

    fp8 = FP8 is not None and (not device.startswith("cuda") or torch.cuda.get_device_capability() >= (8, 9))
    runs = {
        "graph": lambda: graph_costs(device),
        "host": lambda: host_costs(device),
        "elementwise": lambda: elementwise(device, c.elementwise, c.width),
        "gemm": lambda: gemms(device, c.gemms, c.rows, fp8 and device.startswith("cuda"), c.head_rows),
        "grouped_gemm": lambda: grouped_gemms(device, c.experts, c.per_expert, c.routed,
                                              fp8 and device.startswith("cuda")),
        "attention_prefill": lambda: attention_prefill(device, c.heads, c.prefill),
        "attention_backward": lambda: attention_backward(device, c.heads[:1], c.backward),
        "attention_decode": lambda: attention_decode(device, c.decode_heads, c.batches, c.lengths, c.cache_budget),
        "mla_decode": lambda: mla_decode(device, c.mla, c.batches, c.lengths, c.cache_budget),
        "mamba": lambda: mamba(device, model(c.mamba, None, 1), c.mamba_prefill, c.mamba_steps) if c.mamba else [],
        "strided": lambda: strided(device, c.elementwise, c.width),
        "reductions": lambda: reductions(device, c.reduction_rows, c.width),
        "eager": lambda: eager_stream(device),
        "host_models": lambda: host_models(device, c.host_presets, model),
        "host_full_depth": lambda: host_models(device, c.host_presets, model, None),
        "scatter": lambda: scatter_add(device, c.scatter_tokens, c.scatter_widths, c.scatter_top_k),
        "graph_copies": lambda: graph_copies(device),
    }
    out: dict = {"seconds": {}}
    for name in only or c.order:
        progress(f"curve {name}")
        start = time.perf_counter()
        try:
            got = runs[name]()
            if isinstance(got, tuple):
                got, more = got
                notes.extend(more)
            out[name] = got
        except Exception as e:  # noqa: BLE001 - one curve's failure is recorded; the others are measured
            notes.append(f"curve {name} failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
            out[name] = []
            _free(device)
        out["seconds"][name] = time.perf_counter() - start
        checkpoint(out)
    return out
