"""Calibration microbenchmarks: run a plan (llmcalc/costs/calibration.py Plan, read by its fields: reference/
depends on the model package only) with torch and return the raw timings the fit reads, as plain JSON-ready
data. Only `llmcalc calibrate` imports this module (through llmcalc/views/calibrate.py).

Timing: each run flushes the caches (writes flush_bytes), synchronizes, then times one call: CUDA events around
it on cuda (so a call's launch is in its time, as it is in kernel_s), time.perf_counter on cpu; a series is the
median of `runs` runs after `warmup` untimed calls. Legend: M rows (tokens), N × K a weight (out × in), H query
heads, H_kv key/value heads, hd head dim, S / L prefill / cache length.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BF16 = torch.bfloat16
FP8 = getattr(torch, "float8_e4m3fn", None)


class Timer:
    """Median seconds of one call on `device`, each run after `before()` (a cache flush, a barrier)."""

    def __init__(self, device: str, flush_bytes: int = 0, before: Callable[[], None] | None = None):
        self.cuda = device.startswith("cuda")
        self.scratch = torch.empty(flush_bytes, dtype=torch.uint8, device=device) if flush_bytes else None
        self.before = before

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def __call__(self, fn: Callable[[], object], warmup: int, runs: int) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(runs):
            if self.scratch is not None:
                self.scratch.zero_()
            if self.before is not None:
                self.before()
            self.sync()
            times.append(self._once(fn))
        return statistics.median(times)

    def _once(self, fn: Callable[[], object]) -> float:
        if self.cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return begin.elapsed_time(end) / 1e3
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start


GRAPH_KERNELS = 1000
"""Tiny kernels in the CUDA graph whose replay gives the fixed cost of one kernel inside a captured step."""


def graph_kernel_s(kernels: int = GRAPH_KERNELS, elements: int = 16, runs: int = 10) -> float:
    """Seconds per kernel of `kernels` tiny kernels (an add on `elements` elements) replayed back to back from one
    CUDA graph (median of `runs` replays after two): the fixed cost each kernel adds to a step that serving stacks
    capture and replay, with no launch from the host between kernels (an isolated call's time includes one)."""
    x = torch.ones(elements, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    return Timer("cuda")(graph.replay, 2, runs) / kernels


def device_name(device: str) -> str:
    """torch.cuda.get_device_name() on cuda; the CPU's model name on cpu."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def fp8_support(device: str) -> str | None:
    """Why fp8 GEMMs cannot run here (None: they can): e4m3 torch._scaled_mm needs compute capability ≥ 8.9 on
    cuda; on cpu, a tiny call tells."""
    if FP8 is None or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm"
    if device == "cuda":
        cc = torch.cuda.get_device_capability()
        return None if cc >= (8, 9) else f"compute capability {cc[0]}.{cc[1]} < 8.9 has no fp8 tensor cores"
    try:
        scaled_mm(torch.ones(16, 16, dtype=BF16), torch.ones(16, 16, dtype=BF16).to(FP8), device)()
    except (RuntimeError, NotImplementedError) as e:
        return f"torch._scaled_mm on cpu: {str(e).splitlines()[0][:120]}"
    return None


def scaled_mm(x: torch.Tensor, w8: torch.Tensor, device: str) -> Callable[[], torch.Tensor]:
    """y = x · Wᵀ in fp8: x (M, K) cast to e4m3, W (N, K) e4m3 given as Wᵀ (K, N) column-major, unit per-tensor
    scales, bf16 out."""
    a, b = x.to(FP8), w8.t()
    one = torch.ones((), dtype=torch.float32, device=device)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=BF16)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, gqa: bool) -> Callable[[], torch.Tensor]:
    """scaled_dot_product_attention of q (1, H, S, hd) over k, v (1, H_kv, L, hd): with enable_gqa, or with K and V
    repeated to H heads where the backend refuses it."""
    if not gqa and k.shape[1] != q.shape[1]:
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)


def measure(plan, progress: Callable[[str], None] = lambda step: None,
            checkpoint: Callable[[dict], None] = lambda raw: None, model: Callable | None = None) -> dict:
    """Time every run of `plan`; `progress(step)` is called once per measurement (plan.steps in all), and
    `checkpoint(raw so far)` after the standard runs and after each kernel curve (plan.curves, whose models
    `model(name, layers, scale)` gives)."""
    dev = plan.device
    timer = Timer(dev, plan.flush_bytes)
    notes = list(plan.notes)
    raw: dict = {"device": dev, "device_name": device_name(dev), "date": datetime.date.today().isoformat(),
                 "torch": torch.__version__, "cuda": torch.version.cuda if dev == "cuda" else None,
                 "model": plan.model, "smoke": plan.smoke, "quick": plan.quick, "plan": asdict(plan)}

    progress("copy bandwidth")
    raw["copy"] = {"bytes": 2 * plan.copy_bytes, "seconds": copy_time(plan, timer)}

    progress("tiny kernel")
    x = torch.ones(plan.tiny, device=dev)
    y = torch.empty_like(x)
    raw["tiny"] = {"elements": plan.tiny,
                   "seconds": timer(lambda: torch.add(x, 1, out=y), plan.warmup, plan.tiny_runs)}

    if dev == "cuda":
        progress("tiny kernels in a CUDA graph")
        raw["graph_tiny"] = {"elements": plan.tiny, "kernels": GRAPH_KERNELS, "seconds_per_kernel": graph_kernel_s()}

    raw["gemm"] = gemms(plan, timer, progress, notes)
    raw["attention"], raw["attention_backend"] = attention(plan, timer, progress, notes)

    raw["collectives"], raw["comm"], raw["comm_note"] = [], None, None
    gpus = torch.cuda.device_count() if dev == "cuda" else 0
    if gpus > 1:
        progress(f"all-reduce, all-to-all on {gpus} GPUs")
        version = torch.cuda.nccl.version()  # a tuple (2, 21, 5) in recent torch, an int in old ones
        raw["comm"] = f"NCCL {'.'.join(map(str, version)) if isinstance(version, tuple) else version}"
        try:  # the other figures stand without them
            raw["collectives"] = collectives(gpus, "nccl", "cuda", plan.messages, plan.warmup, plan.runs)
        except Exception as e:  # a worker's failure comes back as torch.multiprocessing's ProcessRaisedException
            raw["comm_note"] = f"the collectives on {gpus} GPUs failed ({type(e).__name__}: {str(e)[:160]!r})"
            notes.append(raw["comm_note"])
    else:
        raw["comm_note"] = ("one GPU visible: no collective measured" if dev == "cuda"
                            else "CPU smoke run: no collective measured")
    raw["notes"] = notes
    if plan.curves is not None:
        from llmcalc.reference.kernel_curves import measure as curves

        checkpoint(raw)
        raw["curves"] = curves(plan.curves, dev, model, progress, notes, lambda c: checkpoint(raw | {"curves": c}))
    return raw


def copy_time(plan, timer: Timer) -> float:
    """Seconds of a device-to-device copy of plan.copy_bytes (it reads and writes as many)."""
    src = torch.empty(plan.copy_bytes, dtype=torch.uint8, device=plan.device)
    dst = torch.empty_like(src)
    return timer(lambda: dst.copy_(src), plan.warmup, plan.runs)


def gemms(plan, timer: Timer, progress: Callable[[str], None], notes: list[str]) -> list[dict]:
    """bf16 y = F.linear(x, W) = x · Wᵀ for every shape and M; fp8 the same through torch._scaled_mm where the
    device has it (a size it refuses is skipped, with a note)."""
    dev, out = plan.device, []
    why = fp8_support(dev)
    if why:
        notes.append(f"fp8 GEMMs skipped: {why}")
    for g in plan.gemms:
        w = torch.randn(g.n, g.k, device=dev).to(BF16)  # W (N, K)
        w8 = w.to(FP8) if not why else None
        refused = []
        for m in plan.rows:
            progress(f"GEMM {g.name} {m}×{g.n}×{g.k} bf16")
            x = torch.randn(m, g.k, device=dev).to(BF16)  # x (M, K)
            t = timer(lambda: F.linear(x, w), plan.warmup, plan.runs)  # (M, N)
            out.append({"name": g.name, "dtype": "bf16", "m": m, "n": g.n, "k": g.k, "seconds": t})
            progress(f"GEMM {g.name} {m}×{g.n}×{g.k} fp8")
            if w8 is None:
                continue
            try:
                fn = scaled_mm(x, w8, dev)
                fn()
            except (RuntimeError, NotImplementedError):
                refused.append(m)
                continue
            out.append({"name": g.name, "dtype": "fp8", "m": m, "n": g.n, "k": g.k,
                        "seconds": timer(fn, plan.warmup, plan.runs)})
        if refused:
            notes.append(f"fp8 GEMM {g.name} {g.n}×{g.k}: torch._scaled_mm refused M = "
                         f"{', '.join(map(str, refused))}")
    return out


def attention(plan, timer: Timer, progress: Callable[[str], None], notes: list[str]) -> tuple[list[dict], str]:
    """Causal bf16 prefill of one sequence of S tokens, and one decode query over a cache of L keys: flash
    attention on cuda (SDPBackend.FLASH_ATTENTION), the default backend on cpu."""
    dev, H, Hkv, hd = plan.device, plan.heads, plan.kv_heads, plan.head_dim
    backend = "flash attention" if dev == "cuda" else "the default cpu backend"
    context = (lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)) if dev == "cuda" else nullcontext
    gqa, out = True, []
    with context():
        for phase, lengths in (("prefill", plan.prefill), ("decode", plan.decode)):
            for n in lengths:
                progress(f"attention {phase} {n}")
                q = torch.randn(1, H, n if phase == "prefill" else 1, hd, device=dev).to(BF16)  # (1, H, S or 1, hd)
                k, v = (torch.randn(1, Hkv, n, hd, device=dev).to(BF16) for _ in range(2))  # (1, H_kv, S or L, hd)
                fn = sdpa(q, k, v, phase == "prefill", gqa)
                try:
                    fn()
                except RuntimeError:
                    if not gqa or Hkv == H:
                        raise
                    gqa = False
                    notes.append(f"{backend} refused enable_gqa: K and V repeated to {H} heads")
                    fn = sdpa(q, k, v, phase == "prefill", gqa)
                out.append({"phase": phase, "length": n, "heads": H, "kv_heads": Hkv, "head_dim": hd,
                            "gqa": gqa, "seconds": timer(fn, plan.warmup, plan.runs)})
                del q, k, v, fn
    return out, backend


# ---- collectives: one process per GPU ------------------------------------------------------------------


def collectives(world: int, backend: str, device: str, messages: list[int], warmup: int, runs: int) -> list[dict]:
    """All-reduce and all-to-all of each message size over `world` processes (torch.multiprocessing spawn,
    torch.distributed `backend`: nccl on cuda, gloo on cpu), timed on rank 0 after a barrier each run."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "collectives.json")
        mp.spawn(_collective_worker, args=(world, port, backend, device, messages, warmup, runs, path), nprocs=world,
                 join=True)
        with open(path, encoding="utf-8") as f:
            return json.load(f)


def _collective_worker(rank: int, world: int, port: int, backend: str, device: str, messages: list[int],
                       warmup: int, runs: int, path: str) -> None:
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        dev = device
        if device == "cuda":
            torch.cuda.set_device(rank)
            dev = f"cuda:{rank}"
        dtype = BF16 if device == "cuda" else torch.float32
        size = torch.empty((), dtype=dtype).element_size()
        timer = Timer(dev, before=dist.barrier)
        out = []
        for op in ("all_reduce", "all_to_all"):
            for nbytes in messages:
                numel = max(world, nbytes // size // world * world)
                x = torch.ones(numel, dtype=dtype, device=dev)
                y = torch.empty_like(x)
                fn = (lambda: dist.all_reduce(x)) if op == "all_reduce" else (lambda: dist.all_to_all_single(y, x))
                try:
                    t = timer(fn, warmup, runs)
                except (RuntimeError, NotImplementedError):  # gloo has no all-to-all in some builds
                    break
                out.append({"op": op, "bytes": numel * size, "world": world, "seconds": t})
        if rank == 0:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(out, f)
    finally:
        dist.destroy_process_group()
