"""The `llmcalc serve` command: a continuous-batching engine simulated under a stream of requests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    ADVANCED,
    OUTPUT,
    PRECISION,
    SERVING,
    EngineKVDtypeOpt,
    EnforceEagerOpt,
    ExpertSkewOpt,
    GPUOpt,
    IntervalOpt,
    PlotForceOpt,
    RateOpt,
    RequestsOpt,
    SeedOpt,
    _count_opt,
    _opt,
    _real_opt,
    progress_bar,
)
from llmcalc.errors import UserError


@command(rank=170)
def serve(
    *,
    model: groups.Model,
    gpu: GPUOpt = None,
    layout: groups.Layout,
    rate: RateOpt = None,
    concurrency: Annotated[Optional[int], _count_opt(
        "--concurrency", help="Closed loop: N clients instead of --rate.", panel=SERVING)] = None,
    arrivals: Annotated[Optional[Literal["poisson", "constant"]], _opt(
        "--arrivals", help="poisson or constant, under --rate (default: poisson).", panel=ADVANCED,
        metavar="KIND")] = None,
    requests: RequestsOpt = 1000,
    tokens: groups.Lengths,
    trace: Annotated[Optional[Path], _opt(
        "--trace", help="Arrivals and lengths from a CSV or JSONL file.", panel=SERVING, metavar="FILE")] = None,
    max_seqs: Annotated[Optional[int], _count_opt(
        "--max-seqs", help="Most sequences per step (default: the engine's).", panel=SERVING)] = None,
    max_batched_tokens: Annotated[Optional[int], _count_opt(
        "--max-batched-tokens", help="Most tokens per step (default: the engine's).", panel=ADVANCED)] = None,
    block_size: Annotated[Optional[int], _count_opt(
        "--block-size", help="Tokens per KV block (default: the engine's).", panel=ADVANCED)] = None,
    gpu_memory_utilization: Annotated[Optional[float], _real_opt(
        "--gpu-memory-utilization", help="GPU memory share for the KV pool (default: the engine's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    prefix_hit: Annotated[float, _real_opt(
        "--prefix-hit", help="Prompt share cached.", panel=ADVANCED,
        metavar="SHARE")] = 0.0,
    seed: SeedOpt = 0,
    expert_skew: ExpertSkewOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    targets: groups.Targets,
    draft: Annotated[Optional[str], _opt(
        "--draft", help="Speculate with this draft model (a preset).", panel=SERVING,
        metavar="NAME")] = None,
    mtp: Annotated[bool, _opt("--mtp", help="Speculate with the model's MTP modules.", panel=SERVING)] = False,
    spec_tokens: Annotated[Optional[int], _count_opt(
        "--spec-tokens", help="Draft tokens per step (default 3).", panel=SERVING)] = None,
    acceptance: Annotated[Optional[float], _real_opt(
        "--acceptance", help="Draft token acceptance chance (default 0.7).", panel=SERVING, metavar="P")] = None,
    weights: groups.Weights,
    kv_dtype: EngineKVDtypeOpt = None,
    compute_dtype: Annotated[Optional[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]], _opt(
        "--compute-dtype", help="Matmul type (default: bf16 or native).", panel=PRECISION,
        metavar="DTYPE")] = None,
    timing: groups.EngineTime,
    plot: Annotated[Optional[Path], _opt(
        "--plot", help="Also plot latency to a .png or .svg file.", panel=OUTPUT, metavar="FILE")] = None,
    plot_vs: Annotated[Optional[Literal["time", "load"]], _opt(
        "--plot-vs", help="--plot's x axis: time (default) or load, the rate.", panel=OUTPUT,
        metavar="AXIS")] = None,
    force: PlotForceOpt = False,
    interval: IntervalOpt = False,
    out: groups.Output,
) -> None:
    """Throughput, goodput and latency of a serving engine (docs/commands/serve.md)."""
    from llmcalc import api
    from llmcalc.inputs.models import ModelRef

    if plot_vs is not None and plot is None:
        raise UserError("--plot-vs is the axis of the --plot file; give --plot FILE, or leave out --plot-vs")
    if plot is not None:
        from llmcalc.render.plot import check_target

        check_target(plot)
    from llmcalc.cli.files import check_outputs

    check_outputs(force, plot=plot)
    run = api.prepare_serve(
        model.ref(), gpu, **layout.values(), **tokens.values(), **targets.values(), **weights.values(),
        **timing.values(), rate=rate, concurrency=concurrency, arrivals=arrivals, requests=requests, trace=trace,
        max_seqs=max_seqs, max_batched_tokens=max_batched_tokens, block_size=block_size,
        gpu_memory_utilization=gpu_memory_utilization, prefix_hit=prefix_hit, seed=seed,
        draft=ModelRef(preset=draft) if draft is not None else None, mtp=mtp, spec_tokens=spec_tokens,
        acceptance=acceptance, kv_dtype=kv_dtype, compute_dtype=compute_dtype, expert_skew=expert_skew,
        enforce_eager=enforce_eager)
    if plot is not None and plot_vs == "load":
        run.check_curve()
    with progress_bar("simulating", requests) as update:  # reading a trace or drawing the requests included
        report = run.run(update)
    if plot is not None:
        from llmcalc.cli.files import written
        from llmcalc.render.plot import plot_serve_load, plot_serve_time

        curve = run.curve() if plot_vs == "load" else None
        with written(plot) as tmp:
            if curve is None:
                plot_serve_time(report, tmp)
            else:
                plot_serve_load(curve, tmp)
        sys.stderr.write(f"plot: wrote {plot}\n")
    out.emit(api.with_ranges(report, "serve_ranges") if interval else report, of=serve)
