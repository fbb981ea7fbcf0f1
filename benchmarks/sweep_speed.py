"""Points per second of the sweep evaluator (Sweeper.point), the best of several runs.

Run: python benchmarks/sweep_speed.py [POINTS] [RUNS]. Each model is built once on h100-sxm, on
the fewest GPUs (tensor parallel) its bf16 weights fit, so every point includes latency, under each
time model (roofline, and the h100-sxm calibrated profile); then POINTS random (batch, seq) pairs
(batch 1..256, seq 1..131072) are evaluated, timing only the calls to point().

Last, the table of a sweep of 10,000 points (llama3-8b on h100-sxm, batch 1..100 × seq 1k..100k) is printed
as `llmcalc sweep` prints it, into a file 160 columns wide: the seconds it takes, the best of RUNS.
"""

from __future__ import annotations

import platform
import random
import sys
import time

from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.sweep import Sweeper
from llmcalc.workload import Layout, Workload

MODELS = {"llama2-7b": 1, "mixtral-8x7b": 2, "deepseek-v2-lite": 1, "gemma2-9b": 1}
"""Preset → tensor-parallel GPUs (Mixtral's 93 GB of weights need two H100s)."""


def points_per_second(build, grid: list[tuple[int, int]], runs: int) -> float:
    """The best points/s of `runs` runs, each on a fresh sweeper (what it keeps per seq starts empty). The best,
    as timeit reports its minimum: on a shared machine other processes only ever slow a run down."""
    rates = []
    for _ in range(runs):
        point = build().point
        t0 = time.perf_counter()
        for b, s in grid:
            point(b, s)
        rates.append(len(grid) / (time.perf_counter() - t0))
    return max(rates)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rng = random.Random(0)
    scattered = [(rng.randint(1, 256), rng.randint(1, 131072)) for _ in range(n)]
    seqs = sorted(rng.sample(range(1, 131073), max(1, n // 64)))
    grid = [(b, s) for b in range(1, 65) for s in seqs]  # batch-major, as `llmcalc sweep` walks its grid
    gpu = load_gpu("h100-sxm")
    print(f"Python {platform.python_version()} on {platform.machine()}; {n:,} random points, and a grid of "
          f"64 batches × {len(seqs):,} seqs; the best of {runs} runs, each on a fresh sweeper")
    for tm in (load_time_model("roofline", gpu), load_time_model("calibrated", gpu)):
        for name, tp in MODELS.items():
            def build(name=name, tp=tp, tm=tm) -> Sweeper:
                return Sweeper(load_preset(name), gpu, Workload(layout=Layout(tp=tp)), tm)
            t0 = time.perf_counter()
            assert build().weights_per_gpu is not None
            built = time.perf_counter() - t0
            rate, on_grid = points_per_second(build, scattered, runs), points_per_second(build, grid, runs)
            print(f"{rate:12,.0f} random, {on_grid:9,.0f} grid points/s  {name} {tm.name} (tp {tp}; built in "
                  f"{built * 1000:.1f} ms)")
    print(f"{table_seconds(runs):12.2f} s to print the table of 10,000 points")


def table_seconds(runs: int) -> float:
    """The best of `runs` times to print a 10,000-point sweep's table (render/console.py) into a file."""
    import io

    from rich.console import Console

    from llmcalc import sweep
    from llmcalc.render.console import print_report

    report = sweep("llama3-8b", seq="1k..100k:1k", batch="1..100:1", gpu="h100-sxm")
    times = []
    for _ in range(runs):
        file = Console(file=io.StringIO(), width=160, highlight=False, emoji=False)
        t0 = time.perf_counter()
        print_report(report, "both", console=file)
        times.append(time.perf_counter() - t0)
    return min(times)


if __name__ == "__main__":
    main()
