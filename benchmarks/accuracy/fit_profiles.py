"""Fit the calibrated time model's figures to the published measurements of docs/accuracy.md's table subset, and
write one profile per GPU preset to presets/calibration/<gpu>.yaml.

Run: python benchmarks/accuracy/fit_profiles.py [--write]   (without --write: print the figures and the fit)

What is fitted, and on what (llmcalc/model/time_model.py names every figure):
- per GPU with published points in the table subset: compute_efficiency (16-bit matmuls), fp8_efficiency (where
  the GPU has fp8 rows), memory_efficiency;
- shared by every GPU (they are the serving software's, not a chip's): overlap, matmul_pad_rows (the GEMM
  library's tile policy), kernel_s, collective_s, step_s. launch_s (a step without CUDA graphs) is
  benchmarks/accuracy/fit_launch.py's: kept as the profile has it, and the rows run without graphs are timed with
  it while the rest is fitted.
The objective is Σ log(measured / predicted)² over the table subset's rows that are not approximations
(benchmarks/accuracy/evaluate.py says how each published figure maps to a prediction); the held-out rows are not
seen. The search is coordinate descent, each figure by golden section within physical bounds, in a fixed order
from fixed starting points: deterministic. No figure depends on a model: the same profile serves every model.

A GPU preset with no published points gets the figures of the fitted GPU of its architecture (by analogy, said in
its sources); one with no such neighbour is not written. A profile measured on the GPU itself by `llmcalc calibrate`
(h200's, docs/validation.md) is kept as it is; the GPUs fitted by analogy to it keep the published fit's figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from datetime import date
from functools import cache
from pathlib import Path

import yaml

from llmcalc.costs.latency import latency
from llmcalc.model.time_model import TimeModel

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "presets" / "calibration"
SHARED = {"overlap": (0.0, 1.0), "matmul_pad_rows": (0.0, 256.0), "kernel_s": (0.0, 3e-5),
          "collective_s": (0.0, 1e-4), "step_s": (0.0, 5e-3)}
PER_GPU = {"compute_efficiency": (0.4, 0.85), "fp8_efficiency": (0.3, 0.85), "memory_efficiency": (0.5, 0.95)}
"""Physical bounds: no dense GEMM reaches more than ~85% of a datasheet peak (798 of 989 TFLOP/s bf16 measured on
an H100), no streaming kernel more than ~95% of the datasheet bandwidth (a device copy reached ~90%)."""
MIN_ROWS = 8
"""A GPU's own efficiencies are fitted only from at least this many table rows; one with fewer gets a profile by
analogy (ANALOGY) and its rows stay out of the fit."""
START = {"overlap": 0.3, "matmul_pad_rows": 32.0, "kernel_s": 3e-6, "collective_s": 1e-5, "step_s": 2e-4,
         "compute_efficiency": 0.7, "fp8_efficiency": 0.6, "memory_efficiency": 0.8}
ANALOGY = {"h100-pcie": "h100-sxm", "a100-40gb": "a100-80gb", "b200": "h200", "l4": "l40s", "rtx-4090": "l40s",
           "rtx-3090": "a100-80gb", "a10g": "a100-80gb", "h800": "h100-sxm", "h20": "h200", "gb200": "h200",
           "b300": "h200", "gb300": "h200", "mi300x": "h200"}
"""GPU presets without published points → the fitted GPU of the nearest architecture (Hopper, Ampere, Ada;
B200, GB200, B300 and GB300 → H200, the newest fitted; H800 → H100 SXM, the same die and memory; H20 → H200, the
Hopper part nearest its memory-bound balance). MI300X → H200 is an analogy across vendors (the nearest in HBM
bandwidth and era; ROCm kernels differ): a placeholder until MI300X measurements are fitted."""
ACROSS_VENDORS = {"mi300x"}
"""Analogies across vendors, said as such in the profile's sources."""
SWEEPS = 4


def load_evaluate():
    spec = importlib.util.spec_from_file_location("accuracy_evaluate", HERE / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.load_preset, module.load_gpu = cache(module.load_preset), cache(module.load_gpu)  # read each file once
    return module


def training_pairs(ev) -> list:
    """The table subset's exact (not approximated) pairs, on GPUs with at least MIN_ROWS of them."""
    points = ev.load_points()
    splits = ev.assign_splits(points)
    pairs = [p for p in ev.usable_pairs(points) if splits.get(p.id) == "table" and not p.approx]
    rows: dict[str, int] = {}
    for p in pairs:
        rows[p.inputs.gpu] = rows.get(p.inputs.gpu, 0) + 1
    return [p for p in pairs if rows[p.inputs.gpu] >= MIN_ROWS]


@cache
def bundled_launch_s(gpu: str) -> float:
    """The bundled profile's launch_s (benchmarks/accuracy/fit_launch.py's), which the fit keeps: a row run without
    CUDA graphs is timed with its host floor while the other figures are fitted."""
    path = OUT / f"{gpu}.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("launch_s") or 0.0 if path.exists() else 0.0


def model_of(figures: dict, gpu: str) -> TimeModel:
    keys = set(SHARED) | set(PER_GPU)
    own = {k: v for k, v in figures.get(gpu, {}).items() if k in keys}
    return TimeModel(name="calibrated", gpu=gpu, **{k: figures["shared"][k] for k in SHARED}, **own,
                     launch_s=bundled_launch_s(gpu))


def loss(ev, pairs: list, figures: dict) -> float:
    """Σ log(measured / predicted)² over `pairs` under the figures (a refused pair counts 0)."""
    total = 0.0
    for pair in pairs:
        tm = model_of(figures, pair.inputs.gpu)
        try:
            predicted = ev.predict(pair, lambda s, g, w, tm=tm: latency(s, g, w, tm))
        except Exception:  # noqa: BLE001 - llmcalc refuses the layout: no information
            continue
        total += math.log(pair.measured_s / predicted) ** 2
    return total


def golden(f, lo: float, hi: float, steps: int = 18) -> float:
    """The minimiser of a unimodal-enough f on [lo, hi] by golden-section search."""
    r = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - r * (b - a), a + r * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - r * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + r * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(ev, pairs: list) -> dict:
    gpus = sorted({p.inputs.gpu for p in pairs})
    figures: dict = {"shared": {k: START[k] for k in SHARED}}
    for g in gpus:
        has_fp8 = any(p.inputs.compute_dtype in ("fp8", "int8") for p in pairs if p.inputs.gpu == g)
        figures[g] = {k: START[k] for k in PER_GPU if k != "fp8_efficiency" or has_fp8}
    for _ in range(SWEEPS):
        for g in gpus:
            own = [p for p in pairs if p.inputs.gpu == g]
            for k in list(figures[g]):
                def f(v, g=g, k=k):
                    return loss(ev, own, figures | {g: figures[g] | {k: v}})
                figures[g][k] = golden(f, *PER_GPU[k])
        for k in SHARED:
            def f(v, k=k):
                return loss(ev, pairs, figures | {"shared": figures["shared"] | {k: v}})
            figures["shared"][k] = golden(f, *SHARED[k])
    return figures


def rounded(figures: dict) -> dict:
    """Shares to 3 decimals, seconds to 3 significant digits: what a profile states."""
    def r(k, v):
        if k == "matmul_pad_rows":
            return round(v, 1)
        return round(v, 3) if k in PER_GPU or k == "overlap" else float(f"{v:.3g}")
    return {g: {k: r(k, v) for k, v in fs.items()} for g, fs in figures.items()}


def profile(figures: dict, gpu: str, counts: dict[str, int], fitted_on: str) -> dict:
    shared, own = figures["shared"], figures[fitted_on]
    today = date.today().isoformat()
    n, total = counts[fitted_on], sum(counts.values())
    how = (f"fitted by benchmarks/accuracy/fit_profiles.py ({today}) to {n} published measurements on {fitted_on} "
           "(docs/accuracy.md, table subset)")
    if gpu != fitted_on:
        across = " across vendors (other kernels and software)" if gpu in ACROSS_VENDORS else ""
        how = f"by analogy{across}: no published measurement on {gpu}; the figure fitted for {fitted_on}, {how}"
    software = (f"fitted by benchmarks/accuracy/fit_profiles.py ({today}) to {total} published measurements on "
                f"{', '.join(sorted(counts))} together (docs/accuracy.md, table subset): a property of the serving "
                "software, shared by every GPU")
    data = {"name": "calibrated", "gpu": gpu, **own, **shared}
    data["sources"] = {k: how for k in own} | {k: software for k in shared}
    old = yaml.safe_load((OUT / f"{gpu}.yaml").read_text(encoding="utf-8")) if (OUT / f"{gpu}.yaml").exists() else {}
    if (old or {}).get("launch_s") is not None:  # benchmarks/accuracy/fit_launch.py's, kept with its source
        data = {k: v for k, v in data.items() if k != "sources"} | {"launch_s": old["launch_s"]} | {
            "sources": data["sources"] | {"launch_s": old["sources"]["launch_s"]}}
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write presets/calibration/<gpu>.yaml")
    args = parser.parse_args()
    ev = load_evaluate()
    pairs = training_pairs(ev)
    counts: dict[str, int] = {}
    for p in pairs:
        counts[p.inputs.gpu] = counts.get(p.inputs.gpu, 0) + 1
    figures = rounded(fit(ev, pairs))
    print(f"{len(pairs)} table-subset rows; per GPU: {counts}")
    print(yaml.safe_dump(figures, sort_keys=True))
    print(f"loss: start {loss(ev, pairs, rounded(fit_start(pairs))):.3f}, fitted {loss(ev, pairs, figures):.3f}")
    if not args.write:
        return
    OUT.mkdir(exist_ok=True)
    targets = {g: g for g in counts} | {g: n for g, n in ANALOGY.items() if n in counts}
    for gpu, fitted_on in sorted(targets.items()):
        if measured_on_device(OUT / f"{gpu}.yaml"):
            print(f"kept {OUT / f'{gpu}.yaml'}: measured on the device by llmcalc calibrate")
            continue
        text = yaml.safe_dump(profile(figures, gpu, counts, fitted_on), sort_keys=False, width=120, allow_unicode=True)
        (OUT / f"{gpu}.yaml").write_text(f"# Calibration profile for {gpu}: llmcalc/model/time_model.py names each "
                                         "figure; regenerate with benchmarks/accuracy/fit_profiles.py --write\n"
                                         + text, encoding="utf-8")
        print(f"wrote {OUT / f'{gpu}.yaml'}")


def measured_on_device(path: Path) -> bool:
    """A bundled profile that `llmcalc calibrate` measured on the GPU itself (its compute efficiency's source says
    so): --write leaves it as it is, since a measurement outranks a fit to published figures."""
    if not path.exists():
        return False
    sources = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sources", {})
    return str(sources.get("compute_efficiency", "")).startswith("measured by llmcalc calibrate")


def fit_start(pairs: list) -> dict:
    """The starting figures, for the loss before the fit."""
    gpus = {p.inputs.gpu for p in pairs}
    return {"shared": {k: START[k] for k in SHARED}} | {g: {k: START[k] for k in PER_GPU} for g in gpus}


if __name__ == "__main__":
    main()
