"""The GPU validation campaign: the reference model's time and memory measured on a GPU, set against llmcalc.

Two steps, so docs/validation.md can be regenerated from the raw figures without a GPU:

  python benchmarks/gpu_validation.py run --device cuda --out results.json [--budget 420]
  python benchmarks/gpu_validation.py report results.json [--write docs/validation.md]

`run` (needs torch; on a GPU machine): the environment (device as torch names it, driver, CUDA, torch, date),
`llmcalc calibrate` on the device (its profile and raw timings are kept in the JSON), then for each model family
(dense GQA llama3-8b, MoE mixtral-8x7b, MLA + MoE deepseek-v2-lite, sliding-window gemma2-9b) the reference
decoder (llmcalc/reference/model.py) in bf16 on its serving kernels (SDPA, whose flash kernel runs causal and
decode attention; grouped GEMMs for routed experts; a preallocated static cache) at batch {1, 8, 64} × prompt
{512, 4096, 32768}: the prefill's median time (CUDA events, warm-up) and peak memory
(torch.cuda.max_memory_allocated), and a decode step at the same context, captured in a CUDA graph and replayed
(no Python overhead), with the eager step beside it. A model keeps all its layers when its bf16 weights take at
most WEIGHT_SHARE of the GPU's memory, else the first layers that do (the JSON records it). Cells run cheapest
first: every decode step and the prefills of at most FIRST_PASS_TOKENS tokens, then the larger prefills while
the `budget` lasts; a cell whose `llmcalc memory` estimate exceeds FIT_SHARE of the GPU's memory is left out.
Every figure goes to the JSON as soon as it is measured.

`report` (CPU, no GPU needed): the counts of each measured cell from the same reference model under
FakeTensorMode (params, KV bytes, prefill and decode FLOPs under FlopCounterMode; all shapes, so exact on any
device), and llmcalc's estimates: `memory` for the peak, `latency` on the GPU preset named like the device,
roofline and calibrated (the bundled profile; `--profile FILE` adds another), achieved TFLOP/s (the latency
model's causal prefill FLOPs / measured time) and bandwidth (its decode-step bytes / measured time). Printed as
Markdown, or written between the GPU markers of docs/validation.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmcalc.costs.flops import flops  # noqa: E402
from llmcalc.costs.kv import kv_cache  # noqa: E402
from llmcalc.costs.latency import latency  # noqa: E402
from llmcalc.costs.memory import memory  # noqa: E402
from llmcalc.costs.params import params  # noqa: E402
from llmcalc.inputs.gpus import load_gpu, preset_for_device  # noqa: E402
from llmcalc.inputs.presets import load_preset  # noqa: E402
from llmcalc.costs.engine_time import engine_step  # noqa: E402
from llmcalc.inputs.time_models import load_engine_profile, load_time_model  # noqa: E402
from llmcalc.model.time_model import ROOFLINE  # noqa: E402
from llmcalc.views.validate import memory_note, scaled_copy  # noqa: E402
from llmcalc.workload import Workload  # noqa: E402

MODELS = [("llama3-8b", "dense, GQA"), ("mixtral-8x7b", "MoE (8 experts, top 2)"),
          ("deepseek-v2-lite", "MLA + MoE (64 routed + 2 shared)"),
          ("gemma2-9b", "sliding window (4096, every other layer)"),
          ("nemotron-h-8b", "hybrid: 24 Mamba-2, 4 attention, 24 MLP layers")]
TRAINING = [("llama3-8b", 8, 2, "dense, GQA"), ("mixtral-8x7b", 4, 2, "MoE (8 experts, top 2)"),
            ("deepseek-v2-lite", 4, 2, "MLA + MoE (64 routed + 2 shared)"),
            ("gemma2-9b", 8, 2, "sliding window (4096, every other layer)"),
            ("nemotron-h-8b", 8, 2, "hybrid: Mamba-2, attention and MLP layers")]
"""(preset, layers, width divisor, family) of the scaled models whose training step is measured."""
TRAIN_SHAPES, TRAIN_RUNS = ((1, 2048), (1, 4096), (1, 8192), (4, 2048)), (1, 3)
"""(batch, sequence length) of the training steps, and their (warm-up, timed) runs."""
PROFILE_TOKENS = 32768
"""Cells of at most this many prompt tokens also run once under torch.profiler (prefill and eager decode)."""
BATCHES, PROMPTS = (1, 8, 64), (512, 4096, 32768)
CPU_BATCHES, CPU_PROMPTS, CPU_LAYERS, CPU_SCALE, CPU_FIRST_PASS = (1, 2), (16, 48), 2, 16, 48
"""A CPU smoke run: scaled copies (CPU_LAYERS layers, widths ÷ CPU_SCALE) at tiny shapes; it covers the code path."""
WEIGHT_SHARE = 0.7
"""A model keeps all its layers when its bf16 weights take at most this share of the GPU's memory."""
FIT_SHARE = 0.9
"""A cell runs when `llmcalc memory` puts its peak within this share of the GPU's memory."""
FIRST_PASS_TOKENS = 32768
"""Prefills of at most this many tokens (batch × prompt) run in the first pass, with every decode step."""
PREFILL_RUNS, LONG_PREFILL_RUNS, DECODE_RUNS, EAGER_RUNS = (1, 3), (1, 2), (3, 20), (2, 5)
"""(warm-up, timed) runs of a prefill (one estimated over LONG_PREFILL_S: LONG_PREFILL_RUNS), a graph-replayed decode
step, an eager decode step."""
LONG_PREFILL_S = 2.0
BEGIN, END = "<!-- gpu-validation:begin -->", "<!-- gpu-validation:end -->"


# ---- run (GPU) -------------------------------------------------------------------------------------------


def environment(device: str) -> dict:
    """What the figures were measured on: the device as torch names it, driver, CUDA, torch, date."""
    import torch

    from llmcalc.reference.calibrate import graph_kernel_s

    env = {"device": device, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
           "torch": torch.__version__, "python": sys.version.split()[0]}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env |= {"device_name": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
                "capability": "%d.%d" % torch.cuda.get_device_capability(), "memory_bytes": props.total_memory,
                "multiprocessors": props.multi_processor_count, "driver": _driver(), "flash_gqa": _flash_gqa(),
                "graph_kernel_s": graph_kernel_s()}
    else:
        from llmcalc.reference.calibrate import device_name

        env |= {"device_name": device_name("cpu"), "cuda": None, "memory_bytes": None, "driver": None}
    return env


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def _flash_gqa() -> str:
    """Whether SDPA's flash kernel takes grouped K/V heads (enable_gqa) here, as the reference's attention uses."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.zeros(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 64, 128, device="cuda", dtype=torch.bfloat16)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
            F.scaled_dot_product_attention(q[:, :, :1], k, k, enable_gqa=True)
        return "yes"
    except RuntimeError as e:
        return f"no ({str(e).splitlines()[0][:100]})"


def serving_check(device: str) -> dict[str, dict[str, float]]:
    """On this device: the logits of a prefill of 4 tokens and 24 decode steps against one forward over all 28
    tokens, on the counted kernels and on the serving ones (a sliding window's cache as a ring, MLA's absorbed
    step, grouped expert GEMMs), for tiny bf16 copies of gemma2-9b (window cut to 6) and deepseek-v2-lite: the
    mean |difference| over the logits' standard deviation. bf16 rounding gives the same small figure on both
    kernels; a wrong key gives order 1 on one."""
    import torch

    from llmcalc.reference.model import Decoder

    out = {}
    for preset, update in (("gemma2-9b", {"sliding_window": 6}), ("deepseek-v2-lite", {})):
        spec = scaled_copy(load_preset(preset), 2, 16).model_copy(update=update)
        torch.manual_seed(0)
        model = Decoder(spec, dtype=torch.bfloat16, device=device).eval()
        model.reset_parameters(std=0.2)
        tokens = torch.randint(0, spec.vocab_size, (2, 28), device=device)
        out[preset] = {}
        with torch.no_grad():
            full = model(tokens, logits="all").float()
            for kernels in ("counted", "serving"):
                model.use_kernels(kernels)
                cache = model.new_cache(2, 28)
                steps = [model(tokens[:, :4], cache, 0, "all")] + [
                    model(tokens[:, i:i + 1], cache, i, "all") for i in range(4, 28)]
                out[preset][kernels] = float((torch.cat(steps, 1).float() - full).abs().mean() / full.std())
    return out


def calibrate(out: dict, device: str, timeout: int, engine: str = "serving") -> None:
    """`llmcalc calibrate` on the device: its profile (YAML text), raw timings and seconds, into out["calibration"]
    (raw timings written before a failure or a timeout are kept)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        profile, raw = Path(tmp, "profile.yaml"), Path(tmp, "raw.json")
        cmd = [sys.executable, "-m", "llmcalc", "calibrate", "--device", device, "--out", str(profile), "--raw",
               str(raw), "--engine", engine]
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
            rc, err = done.returncode, done.stderr[-2000:]
        except subprocess.TimeoutExpired:
            rc, err = None, f"timed out after {timeout} s"
        out["calibration"] = {"command": " ".join(["llmcalc", *cmd[3:6], *cmd[-2:]]), "rc": rc, "stderr": err,
                              "seconds": time.perf_counter() - start,
                              "profile": profile.read_text() if profile.exists() else None,
                              "raw": json.loads(raw.read_text()) if raw.exists() else None}


def layers_that_fit(spec, memory_bytes: int | None) -> int:
    """All of spec's layers when its bf16 weights take at most WEIGHT_SHARE of the memory (None: CPU), else the
    count that does."""
    weights = 2 * params(spec).total
    if memory_bytes is None or weights <= WEIGHT_SHARE * memory_bytes:
        return spec.n_layers
    return max(1, math.floor(spec.n_layers * WEIGHT_SHARE * memory_bytes / weights))


def model_spec(preset: str, layers: int, scale: int):
    """The measured model: the preset, cut to `layers` and its widths divided by `scale` where they differ."""
    spec = load_preset(preset)
    if layers == spec.n_layers and scale == 1:
        return spec
    return scaled_copy(spec, layers if layers < spec.n_layers else None, scale)


def fit_check(spec, batch: int, seq: int, memory_bytes: int | None) -> dict[str, str | None]:
    """Why the prefill and the decode step of a cell would not fit in FIT_SHARE of the GPU's memory (None: they
    fit): the prefill by `llmcalc memory` (weights, cache, activation peak), the decode step by its weights and a
    cache of seq + 1 positions (its activations are a few rows)."""
    if memory_bytes is None:
        return {"prefill": None, "decode": None}
    room = FIT_SHARE * memory_bytes
    pre = memory(spec, Workload(batch=batch, seq=seq)).total_bytes
    dec = 2 * params(spec).total + kv_cache(spec, Workload(batch=batch, seq=seq + 1)).total_bytes
    why = "llmcalc puts {} at {:.1f} GB, over {:.0%} of the GPU's memory"
    return {"prefill": why.format("the prefill", pre / 1e9, FIT_SHARE) if pre > room else None,
            "decode": why.format("the decode step", dec / 1e9, FIT_SHARE) if dec > room else None}


def cells(batches, prompts, first_pass: bool, limit: int) -> list[tuple[int, int, bool, bool]]:
    """(batch, prompt, prefill?, decode?) of a pass, cheapest first: the first pass has every decode step and the
    prefills of at most `limit` tokens, the second the larger prefills."""
    out = []
    for b in batches:
        for s in prompts:
            small = b * s <= limit
            if first_pass:
                out.append((b, s, small, True))
            elif not small:
                out.append((b, s, True, False))
    return sorted(out, key=lambda c: c[0] * c[1])


def run(args) -> None:
    train_shapes = shapes(args.train_shapes) if args.train_shapes else TRAIN_SHAPES
    import torch

    device, dest = args.device, Path(args.out)
    started = time.perf_counter()
    deadline = started + args.budget
    out = {"env": environment(device), "settings": {
        "budget_s": args.budget, "weight_share": WEIGHT_SHARE, "fit_share": FIT_SHARE,
        "first_pass_tokens": FIRST_PASS_TOKENS, "prefill_runs": PREFILL_RUNS, "long_prefill_runs": LONG_PREFILL_RUNS,
        "long_prefill_s": LONG_PREFILL_S, "decode_runs": DECODE_RUNS, "eager_runs": EAGER_RUNS,
        "profile_tokens": PROFILE_TOKENS if args.profiles else None, "train_runs": TRAIN_RUNS, "dtype": "bf16"},
        "calibration": None, "models": [], "training": [], "why": args.why}
    profiles: dict[str, dict] = {}

    prior = json.loads(Path(args.update).read_text(encoding="utf-8")) if args.update else None

    def save() -> None:
        out["elapsed_s"] = time.perf_counter() - started
        write(dest, updated(prior, out) if prior else out)
        if args.profiles:
            write(Path(args.profiles), profiles)

    save()
    print(json.dumps(out["env"]), flush=True)
    try:
        out["env"]["serving_check"] = serving_check(device)
    except Exception as e:  # noqa: BLE001 - recorded; the timings go on
        out["env"]["serving_check"] = f"{type(e).__name__}: {str(e)[:300]}"
    print("serving check:", out["env"]["serving_check"], flush=True)
    if not args.no_calibrate:
        calibrate(out, device, args.calibrate_timeout, args.engine)
        c = out["calibration"]
        print(f"calibrate: rc {c['rc']} in {c['seconds']:.1f} s", flush=True)
        save()
    if device == "cuda":
        torch.cuda.empty_cache()
    presets = [] if args.no_inference else args.models or [m for m, _ in MODELS]
    campaign(out, profiles, presets, device, True, deadline, save, args.profiles is not None)
    if not args.no_training:
        training(out, device, deadline, save, train_shapes)
        if args.profiles is not None:
            profiles["training"] = training_profiles(device)
            save()
    campaign(out, profiles, presets, device, False, deadline, save, args.profiles is not None)
    if args.compiled and time.perf_counter() + 150 < deadline:
        compiled_decode(out, args.compiled, device, deadline, save)
    save()
    print(f"done in {time.perf_counter() - started:.0f} s; wrote {dest}", flush=True)


def failure(e: Exception) -> str:
    """One line naming an exception a cell recorded instead of its figures."""
    return f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def write(path: Path, data) -> None:
    """`data` as strict JSON (no NaN or Infinity), written whole: a temporary file renamed over `path`."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def campaign(out: dict, profiles: dict, presets: list[str], device: str, first_pass: bool, deadline: float, save,
             profile: bool) -> None:
    """One pass of the campaign over `presets` (cells: see `cells`), each cell written to `out` as it is measured;
    with `profile`, the first pass's cells of at most PROFILE_TOKENS prompt tokens also run once under
    torch.profiler, into `profiles`."""
    import torch

    from llmcalc.reference.measure import decode_run, prefill_run
    from llmcalc.reference.model import Decoder

    mem = out["env"]["memory_bytes"]
    cpu = device == "cpu"
    gpu = load_gpu(preset_for_device(out["env"]["device_name"]) or "h100-sxm") if not cpu else load_gpu("h100-sxm")
    batches = CPU_BATCHES if cpu else BATCHES
    prompts = CPU_PROMPTS if cpu else PROMPTS
    for preset in presets:
        full = load_preset(preset)
        layers = CPU_LAYERS if cpu else layers_that_fit(full, mem)
        scale = CPU_SCALE if cpu else 1
        spec = model_spec(preset, layers, scale)
        entry = next((m for m in out["models"] if m["preset"] == preset), None)
        if entry is None:
            entry = {"preset": preset, "family": dict(MODELS).get(preset, ""), "layers": layers,
                     "n_layers": full.n_layers, "scale": scale, "cells": []}
            out["models"].append(entry)
        todo = []
        for b, s, pre, dec in cells(batches, prompts, first_pass, CPU_FIRST_PASS if cpu else FIRST_PASS_TOKENS):
            cell = {"batch": b, "seq": s, "pass": 1 if first_pass else 2}
            fits = fit_check(spec, b, s, mem)
            pre, dec = pre and fits["prefill"] is None, dec and fits["decode"] is None
            cell |= {f"{k}_left_out": v for k, v in fits.items() if v}
            if not (pre or dec):
                cell["skipped"] = "; ".join(v for v in fits.values() if v) or "nothing to measure"
                entry["cells"].append(cell)
                continue
            lat = latency(spec, gpu, Workload(batch=b, seq=s, gen=2))
            runs = LONG_PREFILL_RUNS if lat.ttft_s > LONG_PREFILL_S else PREFILL_RUNS
            est = (sum(runs) * lat.ttft_s if pre else 0) + (
                (sum(DECODE_RUNS) + sum(EAGER_RUNS)) * lat.tpot_s if dec else 0)
            todo.append((cell, pre, dec, runs, 3 * est + 2))
        if not todo:
            continue
        if time.perf_counter() + todo[0][4] + 10 > deadline:
            entry.setdefault("notes", []).append(f"pass {2 - first_pass}: the budget ran out before it")
            continue
        t0 = time.perf_counter()
        try:
            model = Decoder(spec, dtype=torch.bfloat16, device=device).eval().use_kernels("serving")
        except Exception as e:  # noqa: BLE001 - recorded; the next model goes on
            entry.setdefault("notes", []).append(f"the model did not build: {type(e).__name__}: {str(e)[:200]}")
            continue
        if not cpu:
            torch.cuda.synchronize()
        entry["params_measured"] = sum(p.numel() for p in model.parameters())
        entry["weight_bytes"] = model.weight_bytes
        entry.setdefault("build_s", []).append(time.perf_counter() - t0)
        for cell, pre, dec, runs, est in todo:
            if time.perf_counter() + est > deadline:
                cell["skipped"] = "the GPU-time budget ran out"
                entry["cells"].append(cell)
                continue
            b, s = cell["batch"], cell["seq"]
            print(f"{preset} ({layers} layers) batch {b} seq {s}", flush=True)
            try:
                if pre:
                    cell["prefill_s"], cell["peak_bytes"], cell["kv_bytes"] = prefill_run(model, b, s, *runs)
                if dec:
                    cell["decode_s"], cell["decode_mode"] = decode_run(model, b, s, "absorbed", *DECODE_RUNS)
                    cell["decode_eager_s"], _ = decode_run(model, b, s, "absorbed", *EAGER_RUNS, graph=False)
                if profile and first_pass and b * s <= (CPU_FIRST_PASS if cpu else PROFILE_TOKENS):
                    profiles[f"{preset} {b}x{s}"] = cell_profile(model, b, s, pre, dec, device)
            except Exception as e:  # noqa: BLE001 - one cell's failure is recorded, the campaign goes on
                cell["error"] = failure(e)
            record(entry["cells"], cell, cpu, save)
        del model
        if not cpu:
            torch.cuda.empty_cache()


def record(cells: list, cell: dict, cpu: bool, save) -> None:
    """Append a measured cell (its error printed), free the GPU's cached blocks and save the JSON."""
    import torch

    if "error" in cell:
        print(cell["error"], flush=True)
    cells.append(cell)
    if not cpu:
        torch.cuda.empty_cache()
    save()


def op_profile(fn, device: str) -> dict:
    """fn() once under torch.profiler: per aten op and input shapes (and per CUDA kernel) the calls, the device
    time of the kernels it launched itself and its own host time, in µs; ops with neither above 20 µs are
    summed into one row. Also the kernels launched and the host's total."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as prof:
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    rows, rest, kernels, kernel_us, ops, host_us = [], [0, 0.0, 0.0], 0, 0.0, 0, 0.0
    for e in prof.key_averages(group_by_input_shape=True):
        dev = float(getattr(e, "self_device_time_total", 0) or 0)
        cpu_us = float(e.self_cpu_time_total or 0)
        kernel = "CUDA" in str(getattr(e, "device_type", ""))
        if kernel:
            kernels += e.count
            kernel_us += dev
        elif e.key.startswith("aten::"):
            ops += e.count
            host_us += cpu_us
        if dev > 20 or cpu_us > 20 or kernel:
            rows.append([e.key[:160], "" if kernel else str(e.input_shapes)[:240], e.count, round(dev, 1),
                         round(cpu_us, 1), int(kernel)])
        else:
            rest = [rest[0] + e.count, rest[1] + dev, rest[2] + cpu_us]
    rows.append(["(the rest)", "", rest[0], round(rest[1], 1), round(rest[2], 1), 0])
    return {"kernels": kernels, "kernel_us": round(kernel_us, 1), "aten_calls": ops, "aten_host_us": round(host_us, 1),
            "rows": rows}


def cell_profile(model, batch: int, seq: int, prefill: bool, decode: bool, device: str) -> dict:
    """A cell's prefill and eager decode step once each under op_profile."""
    import torch

    from llmcalc.reference.measure import random_tokens

    out = {}
    with torch.no_grad():
        if prefill:
            tokens, cache = random_tokens(model, batch, seq), model.new_cache(batch, seq)
            out["prefill"] = op_profile(lambda: model(tokens, cache, 0, "last").float(), device)
            del cache
        if decode:
            tokens, cache = random_tokens(model, batch, 1), model.new_cache(batch, seq + 1)
            model(tokens, cache, seq, "last")  # warm
            out["decode"] = op_profile(lambda: model(tokens, cache, seq, "last"), device)
            del cache
    return out


def training_profiles(device: str) -> dict:
    """One training step (after a warm-up) of each TRAINING model at its first sequence length under op_profile, its
    forward (with the loss), backward and optimizer update each profiled on its own."""
    import torch

    from llmcalc.reference.measure import random_tokens
    from llmcalc.reference.optimizer import MasterAdamW
    from llmcalc.reference.model import Decoder

    cpu, out = device == "cpu", {}
    for preset, layers, scale, _ in TRAINING:
        spec = model_spec(preset, CPU_LAYERS if cpu else layers, CPU_SCALE if cpu else scale)
        seq = CPU_PROMPTS[0] if cpu else TRAIN_SHAPES[0][1]
        model = Decoder(spec, dtype=torch.bfloat16, device=device).use_kernels("serving").train()
        opt = MasterAdamW(model.parameters())
        tokens = random_tokens(model, 1, seq)

        def forward():
            logits = model(tokens, None, 0, "all")
            held.append(torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten()))

        held: list = []
        forward()
        held.pop().backward()
        opt.step()
        parts = {"forward": op_profile(forward, device)}
        parts["backward"] = op_profile(lambda: held.pop().backward(), device)
        parts["optimizer"] = op_profile(opt.step, device)
        out[f"{preset} 1x{seq}"] = parts
        if not cpu:
            torch.cuda.empty_cache()
    return out


def shapes(text: str) -> tuple[tuple[int, int], ...]:
    """"1x2048,4x2048" → ((1, 2048), (4, 2048)); a bad one exits with one line naming the option."""
    try:
        out = tuple((int(b), int(s)) for b, s in (item.lower().split("x") for item in text.split(",")))
    except ValueError:
        out = ()
    if not out or any(b < 1 or s < 1 for b, s in out):
        print(f"--train-shapes: {text!r} is not a list of BxS, each at least 1 (e.g. 1x2048,4x2048)", file=sys.stderr)
        sys.exit(2)
    return out


def training(out: dict, device: str, deadline: float, save, train_shapes: tuple[tuple[int, int], ...]) -> None:
    """A training step (forward, backward, MasterAdamW) of each TRAINING model, scaled, at each of `train_shapes`
    (a CPU run: batch 1 and CPU_PROMPTS), into out["training"]: the parts' medians and the peak and static bytes
    allocated."""
    from dataclasses import asdict

    import torch

    from llmcalc.reference.measure import train_run
    from llmcalc.reference.model import Decoder

    cpu = device == "cpu"
    for preset, layers, scale, family in TRAINING:
        spec = model_spec(preset, CPU_LAYERS if cpu else layers, CPU_SCALE if cpu else scale)
        for batch, seq in ([(1, s) for s in CPU_PROMPTS] if cpu else train_shapes):
            cell = {"preset": preset, "family": family, "layers": CPU_LAYERS if cpu else layers,
                    "scale": CPU_SCALE if cpu else scale, "batch": batch, "seq": seq}
            if time.perf_counter() + 30 > deadline:
                cell["skipped"] = "the GPU-time budget ran out"
                out["training"].append(cell)
                continue
            print(f"training {preset} ({cell['layers']} layers, widths ÷{cell['scale']}) {batch} × {seq}", flush=True)
            try:
                if not cpu:
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                model = Decoder(spec, dtype=torch.bfloat16, device=device).use_kernels("serving")
                cell["params"] = sum(p.numel() for p in model.parameters())
                cell |= asdict(train_run(model, batch, seq, *TRAIN_RUNS))
                del model
            except Exception as e:  # noqa: BLE001 - recorded; the campaign goes on
                cell["error"] = failure(e)
            record(out["training"], cell, cpu, save)


def compiled_decode(out: dict, preset: str, device: str, deadline: float, save) -> None:
    """Batch-1 decode steps of `preset` with the reference compiled by torch.compile (Inductor's default mode: its
    element-wise work fused into a few generated kernels, matmuls left to cuBLAS), then captured in a CUDA graph as
    the campaign's steps are: how much of the step's time is the eager kernels' count."""
    import torch

    from llmcalc.reference.measure import decode_run
    from llmcalc.reference.model import Decoder

    spec = model_spec(preset, CPU_LAYERS, CPU_SCALE) if device == "cpu" else load_preset(preset)
    model = Decoder(spec, dtype=torch.bfloat16, device=device).eval().use_kernels("serving")
    fast = torch.compile(model, dynamic=False)
    entry = out["compiled"] = {"preset": preset, "how": "torch.compile (Inductor, default mode, dynamic=False), "
                               "then a CUDA graph", "torch": torch.__version__, "cells": []}
    for s in CPU_PROMPTS if device == "cpu" else PROMPTS:
        if time.perf_counter() + 60 > deadline:
            entry["cells"].append({"batch": 1, "seq": s, "skipped": "the GPU-time budget ran out"})
            continue
        t0 = time.perf_counter()
        cell = {"batch": 1, "seq": s}
        try:
            cell["decode_s"], cell["decode_mode"] = decode_run(fast, 1, s, "absorbed", *DECODE_RUNS)
        except Exception as e:  # noqa: BLE001 - recorded
            cell["error"] = failure(e)
        cell["wall_s"] = time.perf_counter() - t0  # compile included
        print(f"compiled {preset} batch 1 seq {s}: {cell}", flush=True)
        entry["cells"].append(cell)
        save()


def updated(prior: dict, out: dict) -> dict:
    """`prior` results with this run's models in place of theirs (and added), this run's environment appended to
    its `reruns`, and its compiled-decode experiment if it made one."""
    merged = dict(prior)
    names = [m["preset"] for m in out["models"]]
    merged["models"] = [m for m in prior["models"] if m["preset"] not in names] + out["models"]
    order = [n for n, _ in MODELS]
    merged["models"].sort(key=lambda m: order.index(m["preset"]) if m["preset"] in order else len(order))
    merged["reruns"] = prior.get("reruns", []) + [{"env": out["env"], "models": names, "why": out.get("why"),
                                                   "elapsed_s": out.get("elapsed_s")}]
    if "compiled" in out:
        merged["compiled"] = out["compiled"]
    if out.get("training"):
        merged["training"] = out["training"]
    if out.get("calibration"):
        merged["calibration"] = out["calibration"]
    return merged


# ---- report (CPU) ----------------------------------------------------------------------------------------


ENGINE = "reference engine"
"""The time model column of the reference engine's profile (presets/calibration/reference/<gpu>.yaml)."""
COUNTS: dict[str, dict] = {}
"""Counts already measured, by model name and cell (report --counts-cache keeps them between runs)."""


def _counts(spec, b: int, s: int) -> dict:
    key = f"{spec.name} {b}x{s}"
    if key not in COUNTS:
        COUNTS[key] = _measure_counts(spec, b, s)
    return {k: tuple(v) for k, v in COUNTS[key].items()}


def _engine_counts(spec, b: int, s: int, phase: str):
    """The reference engine's own kernels at a cell's prefill or decode step (kernel_count.count_step, shapes only),
    kept in COUNTS."""
    from dataclasses import asdict

    from llmcalc.model.engine_profile import EngineKernels
    from llmcalc.reference.kernel_count import count_step

    key = f"engine {spec.name} {b}x{s} {phase}"
    if key not in COUNTS:
        COUNTS[key] = asdict(count_step(spec, b, s, 0) if phase == "prefill" else count_step(spec, b, 1, s))
    return EngineKernels(**COUNTS[key])


def _measure_counts(spec, b: int, s: int) -> dict:
    """The reference model's counts at batch b × prompt s under FakeTensorMode (shapes only, so exact on any
    device), with llmcalc's: params, KV bytes, prefill and decode FLOPs (FlopCounterMode's conventions: every
    matmul, attention over the full S×S, last logits; llmcalc with attention=dense)."""
    from llmcalc.reference.measure import measure

    m = measure(spec, b, s, "fake", train=False)
    w = Workload(batch=b, seq=s, attention_core="dense", logits="last")
    f = flops(spec, w)
    return {"params": (m.params_total, params(spec).total), "kv_bytes": (m.kv_bytes, kv_cache(spec, w).total_bytes),
            "prefill_flops": (m.prefill_flops, f.prefill_flops), "decode_flops": (m.decode_flops, f.decode_flops)}


def _err(measured: float, estimate: float) -> float:
    return estimate / measured - 1


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:,.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def merged(cells: list[dict]) -> list[dict]:
    """One cell per (batch, prompt), its passes' figures together (a cell measured in one pass and left out in
    another keeps what was measured), in order of batch, then prompt."""
    out: dict[tuple[int, int], dict] = {}
    for c in cells:
        have = out.setdefault((c["batch"], c["seq"]), {})
        measured = any(k.endswith("_s") for k in c)
        have |= {k: v for k, v in c.items() if k not in ("pass", "skipped")}
        if "skipped" in c and not any(k.endswith("_s") for k in have):
            have["skipped"] = c["skipped"]
        elif measured:
            have.pop("skipped", None)
    for c in out.values():  # a phase measured in either pass is not left out
        for phase in ("prefill", "decode"):
            if f"{phase}_s" in c:
                c.pop(f"{phase}_left_out", None)
    return [out[k] for k in sorted(out)]


def evaluate(data: dict, extra: dict) -> dict:
    """Every measured cell beside its estimates: {"gpu", "models": [{..., "rows": [...]}], "summary"}."""
    env = data["env"]
    cpu = env["device"] == "cpu"
    gpu = load_gpu(preset_for_device(env["device_name"]) or "h100-sxm") if not cpu else load_gpu("h100-sxm")
    models = {"roofline": ROOFLINE, "calibrated": load_time_model("calibrated", gpu)} | {
        k: load_time_model("calibrated", gpu, Path(v)) for k, v in extra.items()}
    profile = None if cpu else load_engine_profile(gpu)
    result = {"gpu": gpu.name, "time_models": list(models) + ([ENGINE] if profile else []), "models": [],
              "engine_profile": profile.measured_on if profile else None}
    for entry in data["models"]:
        spec = model_spec(entry["preset"], entry["layers"], entry["scale"])
        rows = []
        for cell in merged(entry["cells"]):
            if "skipped" in cell or ("prefill_s" not in cell and "decode_s" not in cell):
                rows.append({"cell": cell, "counts": None})
                continue
            b, s = cell["batch"], cell["seq"]
            row = {"cell": cell, "counts": _counts(spec, b, s)}
            if cell.get("peak_bytes") is not None and memory_note(spec) is None:  # a mixer's reference activations
                w = Workload(batch=b, seq=s, attention_core="dense", logits="last")  # are not in the memory model
                row["peak_estimate"] = memory(spec, w).total_bytes
            times = {}
            for name, tm in models.items():
                lat = latency(spec, gpu, Workload(batch=b, seq=s, gen=2), tm)
                times[name] = {"prefill_s": lat.ttft_s, "decode_s": lat.tpot_s}
                if name == "roofline":
                    row["prefill_flops_causal"] = lat.phases[0].flops
                    row["decode_bytes"] = lat.phases[1].bytes
            if profile is not None:
                w = Workload(batch=b, seq=s, gen=2)
                pre = engine_step(spec, gpu, w, profile, _engine_counts(spec, b, s, "prefill"), b, s, 0)
                dec = engine_step(spec, gpu, w, profile, _engine_counts(spec, b, s, "decode"), b, 1, s)
                times[ENGINE] = {"prefill_s": pre.seconds, "decode_s": dec.seconds}
                row["engine_bound"] = {"prefill_s": pre.bound, "decode_s": dec.bound}
                row["engine_gpu"] = {"prefill_s": pre.gpu_s, "decode_s": dec.gpu_s}
            row["times"] = times
            if cell.get("prefill_s"):
                row["tflops"] = row["prefill_flops_causal"] / cell["prefill_s"] / 1e12
                row["mfu"] = row["tflops"] * 1e12 / (gpu.peak_tflops.bf16 * 1e12)
            if cell.get("decode_s"):
                row["gbs"] = row["decode_bytes"] / cell["decode_s"] / 1e9
                row["bandwidth_share"] = row["gbs"] / gpu.memory_bandwidth_gbs
            rows.append(row)
        result["models"].append({**{k: v for k, v in entry.items() if k != "cells"}, "spec": spec.name, "rows": rows})
    result["summary"] = _summary(result)
    return result


def _summary(result: dict) -> dict:
    """Over every timed cell: is the roofline below each measurement, how far each time model is (median |error|,
    cells within 15%), the exact rows' agreement and the peak memory rows' worst error."""
    out = {"exact": True, "peak_worst": 0.0}
    ratios: dict[str, list[float]] = {}
    host = {"cells": 0, "bound_holds": 0}
    for m in result["models"]:
        for r in m["rows"]:
            if r["counts"] is None:
                continue
            out["exact"] &= all(a == b for a, b in r["counts"].values())
            if "peak_estimate" in r:
                out["peak_worst"] = max(out["peak_worst"], abs(_err(r["cell"]["peak_bytes"], r["peak_estimate"])))
            for phase in ("prefill_s", "decode_s"):
                if r["cell"].get(phase):
                    for name, t in r["times"].items():
                        ratios.setdefault(name, []).append(t[phase] / r["cell"][phase])
                    if r.get("engine_bound", {}).get(phase) == "host":
                        host["cells"] += 1
                        host["bound_holds"] += r["engine_gpu"][phase] <= r["cell"][phase]
    for name, rs in ratios.items():
        out[name] = {"cells": len(rs), "below": sum(x < 1 for x in rs),
                     "within_15": sum(abs(x - 1) <= 0.15 for x in rs),
                     "median_abs_error": statistics.median(abs(x - 1) for x in rs),
                     "median_measured_over_estimate": statistics.median(1 / x for x in rs)}
    if ENGINE in out:
        out[ENGINE] |= {"host_bound": host["cells"], "host_bound_holds": host["bound_holds"]}
    return out


def markdown(data: dict, result: dict) -> str:
    env, s, names = data["env"], result["summary"], result["time_models"]
    cal = data.get("calibration") or {}
    lines = [f"Measured on **{env['device_name']}** (compute capability {env.get('capability', '—')}, "
             f"{(env.get('memory_bytes') or 0) / 2**30:,.1f} GiB), driver {env.get('driver') or '—'}, "
             f"CUDA {env.get('cuda') or '—'}, torch {env['torch']}, {env['date']}; estimates on the "
             f"`{result['gpu']}` preset. Raw figures: `{data.get('_path', 'the JSON')}`; regenerate this section "
             "with the `report` command at the top of this page.", ""]
    for r in data.get("reruns", []):
        e = r["env"]
        lines += [f"Measured again in a second run on {e['device_name']} (driver {e.get('driver')}, CUDA "
                  f"{e.get('cuda')}, torch {e['torch']}, {e['date']}): {', '.join(r['models'])}"
                  + (f" ({r['why']})" if r.get("why") else "") + ". Their rows below are that run's.", ""]
    if not result["models"]:  # a run of training steps alone
        return "\n".join(lines + _training_section(data.get("training", []), result["gpu"])
                         + ["Errors are estimate / measured − 1: negative means the estimate is below the "
                            "measurement."]) + "\n"
    lines += ["How it ran: the reference decoder in bf16 on its serving kernels (SDPA as torch dispatches it: a fused "
              f"flash or cuDNN kernel, flash takes grouped K/V: {env.get('flash_gqa', '—')}; grouped GEMMs for routed "
              "experts; a preallocated static cache, a sliding layer's kept as a ring). Prefill: "
              f"{PREFILL_RUNS[0]} warm-up + median of {PREFILL_RUNS[1]} runs, CUDA events, peak memory "
              "`torch.cuda.max_memory_allocated` over it. Decode: one step at position S over a cache of S + 1, "
              f"captured in a CUDA graph and replayed ({DECODE_RUNS[0]} warm-up + median of {DECODE_RUNS[1]}); the "
              "eager step (Python and launches included) beside it. Counts (params, KV bytes, FLOPs) are the "
              "same reference model's under FakeTensorMode: they depend on shapes only. Achieved TFLOP/s: the "
              "latency model's causal prefill FLOPs / measured time (MFU over the datasheet's dense bf16 peak); "
              "GB/s: its decode step's bytes / measured time.", ""]
    lines += [f"- Exact rows (params, KV bytes, prefill and decode FLOPs): "
              f"{'all equal' if s['exact'] else 'NOT all equal'}; peak memory within "
              f"{s['peak_worst']:.1%} of `llmcalc memory` at worst."]
    for name in names:
        if name in s:
            t = s[name]
            lines.append(f"- `{name}`: below the measurement in {t['below']} of {t['cells']} timings, within 15% in "
                         f"{t['within_15']}; median |error| {t['median_abs_error']:.0%}, median measured / "
                         f"estimate ×{t['median_measured_over_estimate']:.2f}.")
            if name == ENGINE:
                lines.append(f"  The engine profile finds {t['host_bound']} of these steps host-bound (marked ʰ: "
                             "the host's dispatch outlasts the kernels); their GPU time is below the measurement in "
                             f"{t['host_bound_holds']} of {t['host_bound']}.")
    kernel = next((e["graph_kernel_s"] for e in [env] + [r["env"] for r in data.get("reruns", [])]
                   if e.get("graph_kernel_s")), None)
    if kernel:
        lines.append(f"- One tiny kernel replayed from a CUDA graph costs {kernel * 1e6:.2f} µs.")
    if cal:
        lines.append(f"- `{cal.get('command', 'llmcalc calibrate')}` ran in {cal.get('seconds', 0):.0f} s "
                     f"(exit {cal.get('rc')}); its profile is in the JSON.")
    lines.append("")
    for m in result["models"]:
        lines += _model_section(m, names)
    if data.get("compiled"):
        lines += _compiled_section(data["compiled"], result["gpu"])
    if data.get("training"):
        lines += _training_section(data["training"], result["gpu"])
    lines.append("Errors are estimate / measured − 1: negative means the estimate is below the measurement.")
    return "\n".join(lines) + "\n"


def _model_section(m: dict, names: list[str]) -> list[str]:
    scaled = "" if m["layers"] == m["n_layers"] and m["scale"] == 1 else (
        f", first {m['layers']} of {m['n_layers']} layers" + (f", widths ÷{m['scale']}" if m["scale"] > 1 else ""))
    lines = [f"### {m['preset']} — {m['family']}{scaled}", ""]
    done = [r for r in m["rows"] if r["counts"]]
    if done:
        p = done[0]["counts"]["params"]
        lines += [f"Params: {p[0]:,} measured, {p[1]:,} estimated"
                  f"{' (exact)' if p[0] == p[1] else f' ({_pct(_err(*p))})'}.", "",
                  "| batch × prompt | KV bytes | prefill FLOPs | decode FLOPs | peak GiB meas. | est. | error |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in done:
            c, n = r["cell"], r["counts"]

            def exact(key, n=n):
                a, b = n[key]
                return f"{a:,}" + (" ✓" if a == b else f" (est. {b:,})")

            peak = (f"{c['peak_bytes'] / 2**30:,.2f} | {r['peak_estimate'] / 2**30:,.2f} | "
                    f"{_pct(_err(c['peak_bytes'], r['peak_estimate']))}") if "peak_estimate" in r else "— | — | —"
            lines.append(f"| {c['batch']} × {c['seq']:,} | {exact('kv_bytes')} | {exact('prefill_flops')} | "
                         f"{exact('decode_flops')} | {peak} |")
        for phase, label, rate in (("prefill_s", "prefill ms", "TFLOP/s (MFU)"),
                                   ("decode_s", "decode ms (graph)", "GB/s (of peak)")):
            extra = " | eager" if phase == "decode_s" else ""
            lines += ["", f"| batch × prompt | {label}{extra} | " + " | ".join(names) + f" | {rate} |",
                      "|---|---:|" + "---:|" * (len(names) + 1 + bool(extra))]
            for r in done:
                c, t = r["cell"], r["times"]
                if not c.get(phase):
                    continue
                ests = " | ".join(f"{_ms(t[n][phase])} ({_pct(_err(c[phase], t[n][phase]))})"
                                  + ("ʰ" if n == ENGINE and r.get("engine_bound", {}).get(phase) == "host" else "")
                                  for n in names)
                if phase == "prefill_s":
                    got = f"{r['tflops']:,.0f} ({r['mfu']:.0%})"
                    head = _ms(c[phase])
                else:
                    got = f"{r['gbs']:,.0f} ({r['bandwidth_share']:.0%})"
                    head = f"{_ms(c[phase])} | {_ms(c.get('decode_eager_s'))}"
                lines.append(f"| {c['batch']} × {c['seq']:,} | {head} | {ests} | {got} |")
        lines.append("")
    left = [r["cell"] for r in m["rows"] if not r["counts"]]
    errors = [c for c in m["rows"] if c["cell"].get("error")]
    partial = [r["cell"] for r in done if r["cell"].get("prefill_left_out")]
    if left or errors or partial or m.get("notes"):
        lines.append("Not measured: " + "; ".join(
            [f"{c['batch']} × {c['seq']:,} ({c.get('skipped') or c.get('error')})" for c in left]
            + [f"the prefill of {c['batch']} × {c['seq']:,} ({c['prefill_left_out']})" for c in partial]
            + [f"{r['cell']['batch']} × {r['cell']['seq']:,} error: {r['cell']['error']}" for r in errors]
            + m.get("notes", [])) + ".")
        lines.append("")
    return lines


def _compiled_section(comp: dict, gpu_name: str) -> list[str]:
    """The torch.compile'd batch-1 decode beside the campaign's (eager kernels in a CUDA graph)."""
    gpu = load_gpu(gpu_name)
    spec = load_preset(comp["preset"])
    lines = [f"### {comp['preset']} decode, batch 1, compiled", "",
             f"The same steps with the reference compiled first ({comp['how']}; torch {comp['torch']}): Inductor fuses "
             "the element-wise work (norms, RoPE, activations, residual adds) into a few kernels per layer; the "
             "matmuls stay cuBLAS GEMVs.", "",
             "| context | compiled ms | GB/s (of peak) | compile + timing, s |", "|---|---:|---:|---:|"]
    for c in comp["cells"]:
        if not c.get("decode_s"):
            lines.append(f"| {c['seq']:,} | — ({c.get('skipped') or c.get('error')}) | — | — |")
            continue
        moved = latency(spec, gpu, Workload(batch=1, seq=c["seq"], gen=2)).phases[1].bytes
        gbs = moved / c["decode_s"] / 1e9
        lines.append(f"| {c['seq']:,} | {_ms(c['decode_s'])} | {gbs:,.0f} ({gbs / gpu.memory_bandwidth_gbs:.0%}) | "
                     f"{c['wall_s']:.0f} |")
    return lines + [""]


def _training_section(cells: list[dict], gpu_name: str) -> list[str]:
    """The measured training steps beside the reference engine's (llmcalc/costs/engine_time.py
    engine_training_step, where the GPU has an engine profile), `llmcalc train` (the bundled calibrated profile and
    the roofline, one GPU, micro-batch the batch) and `llmcalc memory --train`, with a summary of each."""
    from llmcalc.costs.engine_time import engine_training_step
    from llmcalc.costs.training import training_step

    gpu = load_gpu(gpu_name)
    tm = load_time_model("calibrated", gpu)
    profile = load_engine_profile(gpu)
    lines = ["### Training steps", "",
             "Forward (every position's logits, cross-entropy in fp32), backward and the reference's AdamW "
             "(`reference/optimizer.py` MasterAdamW: bf16 weights and gradients, fp32 master and moments, updated "
             f"in chunks), {TRAIN_RUNS[0]} warm-up + median of {TRAIN_RUNS[1]}, each part between CUDA events; "
             "peak `torch.cuda.max_memory_allocated` over the steps. Times in ms: the step, then its forward, "
             "backward and optimizer update.", ""]
    table = ["| model | B × S | measured | reference engine | error | `train` calibrated | roofline | peak GiB | "
             "`memory --train` | error |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    errors: dict[str, list[float]] = {}
    for c in cells:
        shape = f"{c.get('batch', 1)} × {c['seq']:,}"
        if "step_s" not in c:
            table.append(f"| {c['preset']} | {shape} | — ({c.get('skipped') or c.get('error')}) |" + " |" * 7)
            continue
        spec = model_spec(c["preset"], c["layers"], c["scale"])
        b = c.get("batch", 1)
        w = Workload(batch=b, seq=c["seq"], train=True, micro_batch=b)
        cal, roof = training_step(spec, gpu, w, tm).step_s, training_step(spec, gpu, w).step_s
        peak = memory(spec, w).total_bytes
        name = f"{c['preset']}, first {c['layers']} layers, widths ÷{c['scale']}"
        measured = (f"{c['peak_bytes'] / 2**30:,.2f} | {peak / 2**30:,.2f} | {_pct(_err(c['peak_bytes'], peak))}"
                    if c.get("peak_bytes") else "— | — | —")
        parts = ("step_s", "forward_s", "backward_s", "optimizer_s")
        engine, error = "—", "—"
        if profile is not None:
            e = engine_training_step(spec, gpu, w, profile, _training_counts(spec, b, c["seq"]), b, c["seq"])
            estimates = (e.seconds, e.forward.seconds, e.backward.seconds, e.optimizer.seconds)
            for part, est in zip(parts, estimates, strict=True):
                errors.setdefault(part, []).append(_err(c[part], est))
            engine = " · ".join(_ms(x) for x in estimates) + ("ʰ" if e.forward.bound == "host" else "")
            error = _pct(_err(c["step_s"], e.seconds))
        errors.setdefault("calibrated", []).append(_err(c["step_s"], cal))
        table.append(f"| {name} | {shape} | {' · '.join(_ms(c[p]) for p in parts)} | {engine} | {error} | "
                     f"{_ms(cal)} ({_pct(_err(c['step_s'], cal))}) | {_ms(roof)} ({_pct(_err(c['step_s'], roof))}) | "
                     f"{measured} |")
    for key, what in (("step_s", "`reference engine` step"), ("forward_s", "its forward"),
                      ("backward_s", "its backward"), ("optimizer_s", "its optimizer update"),
                      ("calibrated", "`train` on the calibrated serving profile")):
        if errors.get(key):
            es = errors[key]
            lines.append(f"- {what}: within 15% of the measurement in {sum(abs(x) <= 0.15 for x in es)} of {len(es)}"
                         f", below it in {sum(x < 0 for x in es)}; median error {statistics.median(es):+.0%}, "
                         f"median |error| {statistics.median(abs(x) for x in es):.0%}.")
    if errors.get("step_s"):
        lines.append("- ʰ: the engine profile finds the forward host-bound (the host's dispatch outlasts its kernels)."
                     " The backward is its GPU time (the autograd engine's host is not modelled).")
    return lines + [""] + table + [""]


def _training_counts(spec, b: int, s: int):
    """The reference engine's own kernels in a training step (kernel_count.count_training, shapes only), kept in
    COUNTS."""
    from dataclasses import asdict

    from llmcalc.model.engine_profile import EngineKernels, TrainingKernels
    from llmcalc.reference.kernel_count import count_training

    key = f"engine {spec.name} {b}x{s} train"
    if key not in COUNTS:
        COUNTS[key] = {part: asdict(k) for part, k in count_training(spec, b, s)._asdict().items()}
    return TrainingKernels(**{part: EngineKernels(**k) for part, k in COUNTS[key].items()})


def report(args) -> None:
    data = json.loads(Path(args.results).read_text(encoding="utf-8"))
    data["_path"] = args.results
    extra = dict(p.split("=", 1) for p in args.profile)
    cache = Path(args.counts_cache) if args.counts_cache else None
    if cache is not None and cache.exists():
        COUNTS.update(json.loads(cache.read_text(encoding="utf-8")))
    text = markdown(data, evaluate(data, extra))
    if cache is not None:
        cache.write_text(json.dumps(COUNTS, indent=1) + "\n", encoding="utf-8")
    if args.write is None:
        sys.stdout.write(text)
        return
    page = Path(args.write)
    doc = page.read_text(encoding="utf-8")
    begin, end = markers(args.section)
    if begin not in doc or end not in doc:
        sys.exit(f"{page}: no {begin} … {end} markers to write between")
    head, rest = doc.split(begin, 1)
    page.write_text(head + begin + "\n" + text + end + rest.split(end, 1)[1], encoding="utf-8")
    print(f"wrote {page}")


def curves(args) -> None:
    """Some of the reference engine's kernel curves (`llmcalc calibrate --engine reference` measures them all), into
    a JSON file with the environment: for a run that adds curves to an earlier calibration."""
    from llmcalc.costs.calibration import REFERENCE_PRESETS, curve_plan
    from llmcalc.reference.kernel_curves import measure
    from llmcalc.views.calibrate import curve_model

    device = args.device
    out = {"env": environment(device), "notes": []}
    plan = curve_plan([load_preset(p) for p in REFERENCE_PRESETS], device)
    out["curves"] = measure(plan, device, curve_model, lambda step: print(step, flush=True), out["notes"],
                            lambda c: write(Path(args.out), out | {"curves": c}), args.names.split(","))
    write(Path(args.out), out)
    if args.train_profile:
        out["training_profiles"] = training_profiles(device)
        write(Path(args.out), out)
    print(json.dumps(out["notes"]), flush=True)


def markers(section: str | None) -> tuple[str, str]:
    """The page's markers of a report section (None: the first campaign's, BEGIN and END)."""
    if section is None:
        return BEGIN, END
    return f"<!-- gpu-validation:{section}:begin -->", f"<!-- gpu-validation:{section}:end -->"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    r = sub.add_parser("run", help="measure on this machine's GPU (or a CPU smoke run) into a JSON file")
    r.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    r.add_argument("--out", required=True, help="the JSON file to write (rewritten after every cell)")
    r.add_argument("--budget", type=float, default=420, help="seconds the campaign may take (default 420)")
    r.add_argument("--models", nargs="*", help="presets to measure (default: the four families)")
    r.add_argument("--no-calibrate", action="store_true", help="skip `llmcalc calibrate`")
    r.add_argument("--calibrate-timeout", type=int, default=150)
    r.add_argument("--engine", choices=("serving", "reference"), default="serving",
                   help="calibrate's engine: reference also measures the reference model's kernel curves")
    r.add_argument("--profiles", metavar="FILE", help="also profile the small cells and a training step of each "
                   "training model once (torch.profiler: per op and shape, device and host time) into this JSON file")
    r.add_argument("--no-training", action="store_true", help="skip the training steps")
    r.add_argument("--no-inference", action="store_true", help="skip the prefill and decode cells")
    r.add_argument("--train-shapes", metavar="BxS,...", help="the training steps' BxS, comma-separated (default "
                   + ",".join(f"{b}x{s}" for b, s in TRAIN_SHAPES) + ")")
    r.add_argument("--update", metavar="FILE", help="a JSON file of an earlier run: write it to --out with this "
                   "run's models in place of its own (a rerun of some models)")
    r.add_argument("--why", help="why this run (recorded with its environment under `reruns` when updating)")
    r.add_argument("--compiled", metavar="PRESET", help="after the campaign, batch-1 decode steps of this preset "
                   "compiled by torch.compile")
    p = sub.add_parser("report", help="the tables of a JSON file, against llmcalc's estimates (CPU)")
    p.add_argument("results")
    p.add_argument("--write", help="write between the GPU markers of this page (docs/validation.md)")
    p.add_argument("--profile", action="append", default=[], metavar="NAME=FILE",
                   help="also a calibrated time model from this profile file, under NAME")
    p.add_argument("--section", help="write between the markers of this section (<!-- gpu-validation:NAME:begin "
                   "-->), for a page holding several campaigns")
    p.add_argument("--counts-cache", metavar="FILE", help="keep the counts measured under FakeTensorMode here, and "
                   "read them back on the next run (they depend on the shapes only)")
    c = sub.add_parser("curves", help="some of the reference engine's kernel curves, into a JSON file")
    c.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    c.add_argument("--out", required=True)
    c.add_argument("--names", required=True, help="comma-separated curve names (llmcalc/costs/calibration.py CURVES)")
    c.add_argument("--train-profile", action="store_true", help="also profile a training step of each TRAINING model")
    args = parser.parse_args(argv)
    {"run": run, "report": report, "curves": curves}[args.step](args)


if __name__ == "__main__":
    main()
