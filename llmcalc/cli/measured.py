"""The `llmcalc measured` command: serving-benchmark result files, each run set beside `llmcalc serve`'s
prediction for the same model, GPU, engine, layout and workload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    GPUS,
    SERVING,
    EngineKVDtypeOpt,
    RateOpt,
    SeedOpt,
    _count_opt,
    _opt,
)


@command(rank=175)
def measured(
    files: Annotated[list[Path], typer.Argument(
        help="Result files: vLLM, SGLang, genai-perf, AIPerf or trtllm-bench.", show_default=False,
        metavar="FILE...")],
    *,
    model: groups.Model,
    gpu: Annotated[Optional[str], _opt(
        "--gpu", help="GPU preset (default: the one the file's telemetry names).", panel=GPUS,
        metavar="NAME")] = None,
    layout: groups.Layout,
    rate: RateOpt = None,
    concurrency: Annotated[Optional[int], _count_opt(
        "--concurrency", help="Closed loop: N clients (default: the file's).", panel=SERVING)] = None,
    requests: Annotated[Optional[int], _count_opt(
        "--requests", "-n", help="Requests to simulate (default: the file's).", panel=SERVING)] = None,
    prompt: Annotated[Optional[str], _opt(
        "--prompt", help="Prompt tokens per request (default: the file's mean).", panel=SERVING,
        metavar="LEN")] = None,
    output: Annotated[Optional[str], _opt(
        "--output", help="Output tokens per request (default: the file's mean).", panel=SERVING,
        metavar="LEN")] = None,
    seed: SeedOpt = 0,
    weights: groups.Weights,
    kv_dtype: EngineKVDtypeOpt = None,
    timing: groups.EngineTime,
    out: groups.Output,
) -> None:
    """Measured benchmark runs beside serve's prediction (docs/commands/measured.md)."""
    from llmcalc import api

    out.emit(api.measured(files, model.ref(), gpu, **layout.values(), **weights.values(), **timing.values(),
                          rate=rate, concurrency=concurrency, requests=requests, prompt=prompt, output=output,
                          seed=seed, kv_dtype=kv_dtype), of=measured)
