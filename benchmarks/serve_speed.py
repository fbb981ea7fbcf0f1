"""Speed of `llmcalc serve` and `llmcalc plan`: simulated steps per second, and the seconds plan's closed-form
pass takes over its candidates (the target: 10,000 candidate layouts in under 10 s on a 2-core machine).

Run: python benchmarks/serve_speed.py [RUNS]. Each figure is the best of RUNS runs (on a shared machine other
processes only ever slow a run down).
  serve: llama3-8b on one h100-sxm, 1,000 requests of 1,024 + 256 tokens at 2, 20 requests/s and all at once.
  plan:  llama3.1-70b on h100-sxm, a100-80gb and h200, up to 64 GPUs, 20 requests/s, p99 TTFT ≤ 2 s and TPOT
         ≤ 50 ms: the closed-form pass (search_s) and the whole command (simulating the finalists), aggregated and
         with --disaggregated.
"""

from __future__ import annotations

import platform
import sys
import time

from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.requests import parse_lengths
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.plan import plan
from llmcalc.inputs.engines import load_engine
from llmcalc.views.serve import SLO, Load, make_requests, serve
from llmcalc.workload import Workload


def best(runs: int, fn):
    """(the smallest seconds of `runs` calls of fn, fn's last result)."""
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(runs: int = 3) -> None:
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, best of {runs}")
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    tm = load_time_model(None, gpu)
    lengths = parse_lengths("1024", "prompt"), parse_lengths("256", "output")
    for load in (Load(rate=2.0), Load(rate=20.0), Load(rate=float("inf"))):
        rows = make_requests(1000, *lengths, load, 0)
        engine = load_engine(None).settings(gpu)
        s, r = best(runs, lambda: serve(spec, gpu, Workload(), tm, rows, engine, load, "1024", "256"))
        print(f"serve llama3-8b, {load}: {s:.2f} s for {r.steps:,} steps ({r.steps / s:,.0f} steps/s)")
    spec = load_preset("llama3.1-70b")
    gpus = [load_gpu(g) for g in ("h100-sxm", "a100-80gb", "h200")]
    tms = {g.name: load_time_model(None, g) for g in gpus}
    prices = {g.name: g.price_per_hour for g in gpus}
    for dis in (False, True):
        s, r = best(runs, lambda: plan(spec, gpus, tms, 64, 20.0, *lengths, "1024", "256", SLO(2.0, 0.05), prices,
                                       load_engine(None), disaggregated=dis, timings=True))
        print(f"plan llama3.1-70b{' --disaggregated' if dis else ''}: {r.searched:,} candidates in "
              f"{r.search_s:.2f} s closed form ({r.searched / r.search_s:,.0f}/s); {s:.2f} s with {r.simulated} "
              "simulated")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
