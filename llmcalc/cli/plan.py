"""The `llmcalc plan` command: the deployments that meet latency targets under a load, cheapest first."""

from __future__ import annotations

from typing import Annotated, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    GPUS,
    OUTPUT,
    SERVING,
    EngineOpt,
    ExpertSkewOpt,
    RateOpt,
    SeedOpt,
    TimeModelOpt,
    _count_opt,
    _opt,
    progress_bar,
)


@command(rank=180)
def plan(
    *,
    model: groups.Model,
    gpu: Annotated[Optional[list[str]], _opt(
        "--gpu", help="GPU preset or YAML file; repeat for several.", panel=GPUS, metavar="NAME")] = None,
    max_gpus: Annotated[int, _count_opt(
        "--max-gpus", help="Most GPUs a deployment may use (at most 1024); the search refuses over 250,000 "
        "candidates before any work.", panel=GPUS)] = 8,
    rate: RateOpt = None,
    tokens: groups.Lengths,
    targets: groups.Targets,
    price: Annotated[Optional[list[str]], _opt(
        "--price", help="USD per GPU-hour of a GPU (repeat).", panel=GPUS,
        metavar="GPU=USD")] = None,
    disaggregated: Annotated[bool, _opt(
        "--disaggregated", help="Also try separate prefill and decode pools.",
        panel=SERVING)] = False,
    top: Annotated[int, _count_opt("--top", help="Deployments to list.", panel=SERVING)] = 5,
    requests: Annotated[int, _count_opt("--requests", "-n", help="Requests each finalist's simulation runs (at most 100,000 in all).",
                                        panel=SERVING)] = 400,
    seed: SeedOpt = 0,
    engine: EngineOpt = None,
    time_model: TimeModelOpt = None,
    expert_skew: ExpertSkewOpt = None,
    timings: Annotated[bool, _opt(
        "--timings", help="Add the search's wall-clock seconds (search_s).", panel=OUTPUT)] = False,
    emit: Annotated[Optional[str], _opt(
        "--emit", help="Also the engine's launch and benchmark commands: vllm, sglang or trtllm.", panel=OUTPUT,
        metavar="ENGINE")] = None,
    candidate: Annotated[Optional[int], _opt(
        "--candidate", help="The listed deployment --emit writes for (1, the best, by default).", panel=OUTPUT,
        metavar="N")] = None,
    out: groups.Output,
) -> None:
    """The cheapest layouts (tp/pp/ep/dp, dtype, max batch) that meet p99 TTFT / TPOT targets at a request rate."""
    from llmcalc import api

    with progress_bar("searching", None) as update:  # seconds of search: a bar on a terminal only
        report = api.plan(model.ref(), gpu, **tokens.values(), **targets.values(), max_gpus=max_gpus, rate=rate,
                          price=price, disaggregated=disaggregated, top=top, requests=requests, seed=seed,
                          engine=engine, time_model=time_model, timings=timings, emit=emit,
                          candidate=candidate, expert_skew=expert_skew,
                          progress=lambda what, done, total: update(description=what, completed=done, total=total))
    out.emit(report, of=plan)

