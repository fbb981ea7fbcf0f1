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
    RateOpt,
    SeedOpt,
    TimeModelOpt,
    _count_opt,
    _opt,
    load_gpu_named,
    progress_bar,
)
from llmcalc.errors import UserError


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
    from llmcalc.model.gpu import FIGURE_MAX
    from llmcalc.inputs.engines import load_engine
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.views.plan import plan as search

    if rate is None:
        raise UserError("--rate: give the requests/s to serve, e.g. --rate 10")
    if targets.slo_ttft is None and targets.slo_tpot is None:
        raise UserError("--slo-ttft / --slo-tpot: give at least one target, e.g. --slo-ttft 2 --slo-tpot 0.05")
    if max_gpus < 1 or top < 1:
        raise UserError("--max-gpus and --top: give at least 1")
    if candidate is not None and emit is None:
        raise UserError("--candidate: it picks the deployment --emit writes for; give --emit vllm, sglang or trtllm")
    if candidate is not None and not 1 <= candidate <= top:
        raise UserError(f"--candidate: {candidate} is not a rank from 1 to --top ({top}); give e.g. --candidate 1")
    commands = None
    if emit is not None:
        from llmcalc.inputs.engines import load_engine_commands

        commands = load_engine_commands(emit)
        if engine is None:
            engine = emit
        elif engine != emit:
            raise UserError(f"--emit: the plan runs on --engine {engine}'s settings, not {emit}'s; give --engine "
                            f"{emit}, or leave --engine out")
    devices = [load_gpu_named(g, "plan") for g in dict.fromkeys(gpu or ["h100-sxm"])]
    prices = {d.name: d.price_per_hour for d in devices}
    for item in price or []:
        name, _, usd = item.partition("=")
        try:
            value = float(usd)
        except ValueError:
            value = -1.0
        if name not in prices or not 0 < value <= FIGURE_MAX:  # NaN fails both comparisons, inf the second
            raise UserError(f"--price: {item[:60]!r} is not GPU=USD (up to {FIGURE_MAX:,.0f}) for a --gpu given "
                            f"({', '.join(prices)}); write e.g. {next(iter(prices))}=2.5")
        prices[name] = value
    lengths = tokens.parse()
    serving = load_engine(engine)
    tms = {d.name: load_time_model(time_model, d, None, engine=serving) for d in devices}
    args = (model.load(), devices, tms, max_gpus, rate, *lengths,
            *(str(x) for x in lengths), targets.slo(), prices, serving)
    options = dict(disaggregated=disaggregated, top=top, requests=requests, seed=seed, timings=timings)
    with progress_bar("searching", None) as update:  # seconds of search: a bar on a terminal only
        report = search(*args, **options, progress=lambda what, done, total: update(description=what, completed=done,
                                                                                     total=total))
    if commands is not None:
        from llmcalc.views.emit import Load, emit_for

        load = Load(rate=rate, prompt=lengths[0], output=lengths[1], requests=requests, seed=seed, slo=targets.slo())
        report = emit_for(report, args[0], devices, serving, commands, candidate or 1, load)
    out.emit(report, of=plan)

