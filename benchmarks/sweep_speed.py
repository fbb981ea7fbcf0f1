"""Points per second of the sweep evaluator (Sweeper.point), median of several runs.

Run: python benchmarks/sweep_speed.py [POINTS] [RUNS]. Each model is built once on h100-sxm, on
the fewest GPUs (tensor parallel) its bf16 weights fit, so every point includes latency, under each
time model (roofline, and the h100-sxm calibrated profile); then POINTS random (batch, seq) pairs
(batch 1..256, seq 1..131072) are evaluated, timing only the calls to point().
"""

from __future__ import annotations

import platform
import random
import statistics
import sys
import time

from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.sweep import Sweeper
from llmcalc.workload import Layout, Workload

MODELS = {"llama2-7b": 1, "mixtral-8x7b": 2, "deepseek-v2-lite": 1, "gemma2-9b": 1}
"""Preset → tensor-parallel GPUs (Mixtral's 93 GB of weights need two H100s)."""


def points_per_second(sweeper: Sweeper, grid: list[tuple[int, int]], runs: int) -> float:
    point, rates = sweeper.point, []
    for _ in range(runs):
        t0 = time.perf_counter()
        for b, s in grid:
            point(b, s)
        rates.append(len(grid) / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rng = random.Random(0)
    grid = [(rng.randint(1, 256), rng.randint(1, 131072)) for _ in range(n)]
    gpu = load_gpu("h100-sxm")
    print(f"Python {platform.python_version()} on {platform.machine()}; {n:,} points, median of {runs} runs")
    for tm in (load_time_model("roofline", gpu), load_time_model("calibrated", gpu)):
        for name, tp in MODELS.items():
            t0 = time.perf_counter()
            sweeper = Sweeper(load_preset(name), gpu, Workload(layout=Layout(tp=tp)), tm)
            build = time.perf_counter() - t0
            assert sweeper.weights_per_gpu is not None
            rate = points_per_second(sweeper, grid, runs)
            print(f"{rate:12,.0f} points/s  {name} {tm.name} (tp {tp}; built in {build * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
