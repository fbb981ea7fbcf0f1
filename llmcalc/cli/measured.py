"""The `llmcalc measured` command: serving-benchmark result files, each run set beside `llmcalc serve`'s
prediction for the same model, GPU, engine, layout and workload."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.groups import workload
from llmcalc.cli.options import (
    GPUS,
    PRECISION,
    SERVING,
    KVDtypeOpt,
    RateOpt,
    SeedOpt,
    _count_opt,
    _opt,
)
from llmcalc.errors import UserError


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
    kv_dtype: KVDtypeOpt = "bf16",
    timing: groups.EngineTime,
    out: groups.Output,
) -> None:
    """Measured benchmark runs beside serve's prediction (docs/commands/measured.md)."""
    from llmcalc.inputs.benchmarks import read_runs
    from llmcalc.reports.measured import MeasuredReport
    from llmcalc.views.measured import FORMULA

    if rate is not None and concurrency is not None:
        raise UserError("--rate and --concurrency are two loads; give one")
    if not files:
        raise UserError("measured: give at least one result file")
    runs = [run for path in files for run in read_runs(path)]
    flags = dict(gpu=gpu, rate=rate, concurrency=concurrency, requests=requests, prompt=prompt, output=output,
                 seed=seed, kv_dtype=kv_dtype)
    done = [_one(run, model, layout, weights, timing, **flags) for run in runs]
    notes = [f"{run.name}: {n}" for run in runs for n in run.notes]
    notes += [n for _, _, extra in done for n in extra]
    out.emit(MeasuredReport(rows=[row for _, rows, _ in done for row in rows], files=len(files),
                            runs=[r for r, _, _ in done], formula=FORMULA, notes=notes), of=measured)


@dataclass
class Case:
    """A run resolved into what `serve` takes: the model, GPU, layout's workload, engine (its time options), the
    load, the request lengths and count; `args` the same as `llmcalc serve` arguments, `given` what the options
    supplied."""

    run: object
    spec: object
    device: object
    w: object
    timing: object
    load: object
    lengths: list
    requests: int
    seed: int
    args: list[str]
    given: list[str]

    def simulate(self, tm=None, requests: int | None = None):
        """`serve`'s report of the run, under the time model `tm` (None: the options'), over its first `requests`
        requests (None: all)."""
        from llmcalc.views.serve import make_requests
        from llmcalc.views.serve import serve as simulate

        tm = self.timing.load(self.device) if tm is None else tm
        settings = self.timing.serving_engine().settings(self.device)
        rows = make_requests(min(self.requests, requests or self.requests), *self.lengths, self.load, self.seed)
        return simulate(self.spec, self.device, self.w, tm, rows, settings, self.load,
                        self.args[self.args.index("--prompt") + 1], self.args[self.args.index("--output") + 1],
                        seed=self.seed)


def _one(run, model, layout, weights, timing, **flags):
    """The run and its simulation, the rows of its figures measured beside predicted, and the notes of the
    comparison."""
    from llmcalc.reports.measured import MeasuredRun
    from llmcalc.views.measured import compare

    case = resolve(run, model, layout, weights, timing, **flags)
    report = case.simulate()
    metric_rows, notes = compare(run.name, run.metrics, report)
    if not metric_rows:
        raise UserError(f"`files`: {run.name} holds no latency or throughput figure to compare; give a result file "
                        "with the client's metrics")
    return MeasuredRun(file=run.name, kind=run.kind, model_id=run.model_id, model=case.spec.name,
                       gpu=case.device.name, gpus=case.w.layout.gpus, engine=report.engine,
                       time_model=report.time_model, load=report.load, requests=case.requests, prompt=report.prompt,
                       output=report.output, serve_args=case.args, given=case.given), \
        metric_rows, [f"{run.name}: {x}" for x in notes]


def resolve(run, model, layout, weights, timing, *, gpu=None, rate=None, concurrency=None, requests=None,
            prompt=None, output=None, seed=0, kv_dtype="bf16") -> Case:
    """The run's model, GPU, engine, layout and workload: the file's, the options filling what it lacks (each
    said in `given`); what neither gives is a UserError naming the option."""
    from llmcalc.inputs.gpus import load_gpu, preset_for_device
    from llmcalc.inputs.presets import preset_for_model_id
    from llmcalc.inputs.requests import parse_lengths
    from llmcalc.views.serve import Load

    given: list[str] = []
    args: list[str] = []
    # the model: the options, else the preset whose source is the file's model
    model_flags = [(f, v) for f, v in (("--preset", model.preset), ("--config", model.config),
                                       ("--hf-config", model.hf_config), ("--hf-model", model.hf_model))
                   if v is not None]
    args += ["--hf-generic"] if model_flags and model.hf_generic else []
    if model_flags:
        args += [str(x) for fv in model_flags for x in fv]
        given.append(f"model from {model_flags[0][0]} (the file names "
                     f"{run.model_id if run.model_id else 'none'})")
        spec = model.load()
    else:
        name = preset_for_model_id(run.model_id) if run.model_id else None
        if name is None:
            said = f"names model {run.model_id!r}, which no preset's source is" if run.model_id else "names no model"
            raise UserError(f"`preset`: {run.name} {said}; give --preset, --config, --hf-config or --hf-model")
        args += ["--preset", name]
        spec = model.replace(preset=name).load()
    # the GPU: --gpu, else the one the file's telemetry names
    if gpu is not None:
        device = load_gpu(gpu)
        given.append(f"GPU from --gpu (the file names {run.gpu_device or 'none'})")
        args += ["--gpu", gpu]
    else:
        if not run.gpu_device:
            raise UserError(f"`gpu`: {run.name} names no GPU; give --gpu NAME (see `llmcalc gpus`)")
        name = preset_for_device(run.gpu_device)
        if name is None:
            raise UserError(f"`gpu`: {run.name} names GPU {run.gpu_device!r}, which no preset matches; give --gpu NAME")
        device = load_gpu(name)
        args += ["--gpu", name]
    # the engine: the file's where its client names it, else --engine
    if timing.engine is not None:
        engine_name = timing.engine
        given.append(f"engine from --engine (the file names {run.engine or 'none'})")
    elif run.engine:
        engine_name = run.engine
    else:
        raise UserError(f"`engine`: {run.name} ({run.kind}) does not say which engine served it; give --engine "
                        "vllm, sglang or trtllm")
    timing = timing.replace(engine=engine_name)
    args += ["--engine", engine_name]
    # the layout: the file's where it records one (trtllm-bench), else the options
    lay = layout
    file_layout = {k: v for k, v in (("tp", run.tp), ("pp", run.pp), ("ep", run.ep)) if v}
    if file_layout and layout.gpus is None and layout.tp is None and layout.pp == 1 and layout.ep == 1:
        lay = layout.replace(**file_layout)
    elif file_layout:
        given.append("layout from the options (the file records " +
                     ", ".join(f"{k} {v}" for k, v in file_layout.items()) + ")")
    w = workload(weights, lay, kv_dtype=kv_dtype)
    L = w.layout
    args += ["--tp", str(L.tp), "--pp", str(L.pp), "--dp", str(L.dp), "--ep", str(L.ep)]
    for flag, value in (("--weights-dtype", weights.weights_dtype), ("--weights-format", weights.weights_format),
                        ("--time-model", timing.time_model), ("--calibration", timing.calibration)):
        if value is not None:
            args += [flag, str(value)]
    if kv_dtype != "bf16":
        args += ["--kv-dtype", kv_dtype]
    # the workload: request count, load and lengths from the file, the options filling what it lacks
    n = _fill(requests, run.requests, "--requests", "the request count", run, given)
    if rate is not None or concurrency is not None:
        if run.rate not in (None, float("inf")) or run.concurrency is not None:
            given.append("load from " + ("--rate" if rate is not None else "--concurrency") + " (the file's: "
                         + _load_text(run.rate, run.concurrency) + ")")
        elif run.rate is not None or run.concurrency is not None:
            given.append("load from " + ("--rate" if rate is not None else "--concurrency"))
        load = Load(rate=rate, concurrency=concurrency)
    elif run.concurrency is not None:
        if run.rate not in (None, float("inf")):
            given.append(f"the file's rate {run.rate:g} requests/s is not simulated: its {run.concurrency} "
                         "clients are (serve takes one load)")
        load = Load(concurrency=run.concurrency)
    elif run.rate is not None:
        load = Load(rate=run.rate)
    else:
        raise UserError(f"`concurrency`: {run.name} records neither a request rate nor a concurrency; give "
                        "--concurrency N or --rate REQ/S")
    if load.concurrency is not None:
        args += ["--concurrency", str(load.concurrency)]
    elif load.rate != float("inf"):
        args += ["--rate", f"{load.rate!r}"]
    lengths = []
    for side, text, mean, std in (("prompt", prompt, run.prompt_mean, run.prompt_std),
                                  ("output", output, run.output_mean, run.output_std)):
        if text is None:
            if mean is None:
                raise UserError(f"`{side}`: {run.name} records no {side} lengths; give --{side} LEN")
            text = f"normal:{mean:.6g},{std:.6g}" if std > 0 else str(max(1, round(mean)))
        else:
            given.append(f"{side} lengths from --{side}" + ("" if mean is None else f" (the file's mean: {mean:g})"))
        lengths.append(parse_lengths(text, side))
        args += [f"--{side}", text]
    args += ["--requests", str(n), "--seed", str(seed)]
    return Case(run=run, spec=spec, device=device, w=w, timing=timing, load=load, lengths=lengths, requests=n,
                seed=seed, args=args, given=given)


def _fill(flag_value, file_value, flag: str, what: str, run, given: list[str]):
    if flag_value is not None:
        given.append(f"{what} from {flag}" + ("" if file_value is None else f" (the file's: {file_value})"))
        return flag_value
    if file_value is None:
        raise UserError(f"`{flag[2:]}`: {run.name} does not record {what}; give {flag}")
    return file_value


def _load_text(rate, concurrency) -> str:
    if concurrency is not None:
        return f"concurrency {concurrency}"
    return "all at once" if rate == float("inf") else f"{rate:g} requests/s"
