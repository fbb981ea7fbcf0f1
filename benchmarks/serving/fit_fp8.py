"""The share of the fp8 peak an engine's matmuls over per-tensor-scaled fp8 weights reach on GPUs of one
architecture (presets/engines/<engine>.yaml `fp8`), fitted to the table subset of benchmarks/serving/ only: the
share at which the median predicted / measured output tokens/s of that engine's per-tensor fp8 points on those GPUs
is 1. Each point runs as evaluate.py runs it, with the share in place of the profile's fp8_efficiency; the median
rises with the share, so a bisection over [0.2, 0.95] finds it. The held-out points are never run here.

Run: python benchmarks/serving/fit_fp8.py trtllm hopper
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import evaluate as ev  # noqa: E402

from llmcalc.inputs.gpus import load_gpu  # noqa: E402

LOW, HIGH, STEPS = 0.2, 0.95, 12
"""The bracket of shares and the bisection's steps (its width then 0.75 / 2^12 < 0.001)."""


def fp8_points(engine: str, architecture: str):
    """The filter of evaluate.evaluate: the engine's table-subset points with per-tensor fp8 weights on GPUs of
    `architecture` that publish output tokens/s."""
    def keep(p: dict, split: str) -> bool:
        return (split == "table" and p["engine_name"] == engine and ev.dtype(p["weights_dtype"]) == "fp8"
                and p["model"] not in ev.BLOCK_FP8 and "output_tokens_per_s" in p["measured"]
                and load_gpu(p["gpu"]).architecture == architecture)
    return keep


def median_log_ratio(engine: str, architecture: str, share: float) -> tuple[float, list[dict]]:
    rows, _ = ev.evaluate(only=fp8_points(engine, architecture), fp8_efficiency=share)
    rows = [r for r in rows if r["quantity"] == "output_tps"]
    if not rows:
        raise SystemExit(f"no table-subset per-tensor fp8 points of {engine} on {architecture}")
    return statistics.median(math.log(r["ratio"]) for r in rows), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine")
    parser.add_argument("architecture")
    args = parser.parse_args()
    low, high = LOW, HIGH
    for _ in range(STEPS):
        mid = (low + high) / 2
        m, rows = median_log_ratio(args.engine, args.architecture, mid)
        low, high = (mid, high) if m < 0 else (low, mid)
    share = round((low + high) / 2, 3)
    _, rows = median_log_ratio(args.engine, args.architecture, share)
    for r in rows:
        print(f"{r['id']:<52} {r['gpu']:<9} predicted/measured {r['ratio']:.2f}")
    print(f"{args.engine} fp8 on {args.architecture}: {share} of the fp8 dense peak, from {len(rows)} table-subset "
          f"points (median ratio {statistics.median(r['ratio'] for r in rows):.3f})")


if __name__ == "__main__":
    main()
