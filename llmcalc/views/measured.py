"""Measured against predicted: a benchmark run's figures beside those of `serve`'s simulation of the same
workload (`llmcalc measured`): each run resolved into serve's inputs (the file's, the caller's filling what it
lacks), simulated, and compared (pure: the run and the simulation's report in, rows out); and the time model of
the runs' GPU and engine refitted to them (`llmcalc calibrate --from-runs`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmcalc.errors import UserError
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.measured import MeasuredReport, MeasuredRun, MetricRow
from llmcalc.reports.serve import ServeReport

if TYPE_CHECKING:
    from llmcalc.model.engine import Engine
    from llmcalc.model.gpu import GPU
    from llmcalc.model.time_model import TimeModel
    from llmcalc.views.serve import Load
    from llmcalc.workload import Workload

LABELS = {"ttft": ("TTFT", "s"), "tpot": ("TPOT", "s"), "itl": ("ITL", "s"), "e2e": ("E2E", "s"),
          "request_throughput": ("request throughput", "requests/s"),
          "output_throughput": ("output throughput", "tokens/s")}
"""metric ↦ (its name in a table, its unit)."""

FORMULA = ("predicted: `llmcalc serve` with the file's model, GPU, engine, layout, request count, load and mean "
           "lengths; TPOT and ITL both set against the simulation's time per output token ((e2e − TTFT) / (output "
           "− 1)); ratio = predicted / measured")


def predicted(report: ServeReport, metric: str, statistic: str) -> float:
    """The simulation's figure for a client's metric and statistic."""
    if metric == "request_throughput":
        return report.requests_per_s
    if metric == "output_throughput":
        return report.output_tokens_per_s
    spread = {"ttft": report.ttft_s, "tpot": report.tpot_s, "itl": report.tpot_s, "e2e": report.e2e_s}[metric]
    return getattr(spread, statistic)


def compare(file: str, measured: dict[str, dict[str, float]], report: ServeReport) -> tuple[list[MetricRow], list[str]]:
    """A row for every figure the run measured (METRICS order, then mean, p50, p90, p99), and a note for each one
    left out: a measured zero or a prediction of zero has no ratio."""
    from llmcalc.inputs.benchmarks import METRICS, STATS

    rows, notes = [], []
    for metric in METRICS:
        stats = measured.get(metric, {})
        for statistic in (*STATS, "value"):
            if statistic not in stats:
                continue
            m, p = stats[statistic], predicted(report, metric, statistic)
            name, unit = LABELS[metric]
            if not (m > 0 and p > 0):
                notes.append(f"{name} {statistic}: measured {m:g}, predicted {p:g}; no ratio, left out")
                continue
            rows.append(MetricRow(file=file, metric=name, statistic=statistic, unit=unit, measured=m, predicted=p, ratio=p / m))
    return rows, notes


# --- a run resolved into what `serve` takes -------------------------------------------------------------------

def _model_flags(ref) -> list[tuple[str, object]]:
    """The serve flags that name the model `ref` (a ModelRef), in the order the command line takes them."""
    return [(f, v) for f, v in (("--preset", ref.preset), ("--config", ref.config), ("--hf-config", ref.hf_config),
                                ("--hf-model", ref.hf_model)) if v is not None]


@dataclass
class Case:
    """A run resolved into what `serve` takes: the model, GPU, the layout's workload, the engine and the time model
    chosen (names, read when simulated), the load, the request lengths and count; `args` the same as `llmcalc
    serve` arguments, `given` what the caller supplied in place of the file."""

    run: Any
    spec: ModelSpec
    device: GPU
    w: Workload
    engine: str
    time_model: str | None
    calibration: Path | None
    load: Load
    lengths: list
    requests: int
    seed: int
    args: list[str]
    given: list[str]

    def serving_engine(self) -> Engine:
        """The engine that served the run (presets/engines/, or an engine file)."""
        from llmcalc.inputs.engines import load_engine

        return load_engine(self.engine)

    def base_time_model(self) -> TimeModel:
        """The time model chosen, on the run's GPU under its engine (inputs/time_models.py: load_time_model)."""
        from llmcalc.inputs.time_models import load_time_model

        return load_time_model(self.time_model, self.device, self.calibration, engine=self.serving_engine())

    def simulate(self, tm: TimeModel | None = None, requests: int | None = None) -> ServeReport:
        """`serve`'s report of the run, under the time model `tm` (None: the one chosen), over its first `requests`
        requests (None: all)."""
        from llmcalc.views.serve import make_requests
        from llmcalc.views.serve import serve as simulate

        tm = self.base_time_model() if tm is None else tm
        settings = self.serving_engine().settings(self.device, context=self.spec.max_seq_len)
        rows = make_requests(min(self.requests, requests or self.requests), *self.lengths, self.load, self.seed)
        return simulate(self.spec, self.device, self.w, tm, rows, settings, self.load,
                        self.args[self.args.index("--prompt") + 1], self.args[self.args.index("--output") + 1],
                        seed=self.seed)


def resolve(run, model=None, gpu: str | None = None, *, gpus: int | None = None, tp: int | None = None, pp: int = 1,
            dp: int = 1, ep: int = 1, weights_dtype: str | None = None, weights_format: str | None = None,
            kv_dtype: str | None = None, engine: str | None = None, time_model: str | None = None,
            calibration: Path | None = None, rate: float | None = None, concurrency: int | None = None,
            requests: int | None = None, prompt: str | None = None, output: str | None = None, seed: int = 0,
            engine_field: str = "engine") -> Case:
    """The run's model, GPU, engine, layout and workload: the file's, the inputs filling what it lacks (each said
    in `given`); what neither gives is a UserError naming the input. `model`: as inputs/models.py's load_model
    takes it, or None (the preset whose source is the file's model); `engine_field`: the input that names the
    engine, in the error when neither gives one; `kv_dtype` None: the engine's default cache dtype (the KV
    quantisation the checkpoint states where the engine takes it, else bf16), as serve's."""
    from llmcalc.inputs.gpus import load_gpu, preset_for_device
    from llmcalc.inputs.models import ModelRef, as_ref, load_model
    from llmcalc.inputs.presets import preset_for_model_id
    from llmcalc.inputs.requests import parse_lengths
    from llmcalc.model.formats import WeightFormats
    from llmcalc.views.serve import Load
    from llmcalc.workload import Layout, Workload

    given: list[str] = []
    args: list[str] = []
    # the model: the caller's, else the preset whose source is the file's model
    ref = ModelRef() if model is None else model if isinstance(model, (ModelRef, ModelSpec)) else as_ref(model)
    if isinstance(ref, ModelSpec):
        given.append(f"model {ref.name} given as a spec (the file names {run.model_id if run.model_id else 'none'}); "
                     "serve_args name no model")
        spec = ref
    elif model_flags := _model_flags(ref):
        args += ["--hf-generic"] if ref.hf_generic else []
        args += [str(x) for fv in model_flags for x in fv]
        given.append(f"model from {model_flags[0][0]} (the file names "
                     f"{run.model_id if run.model_id else 'none'})")
        spec = load_model(ref)
    else:
        name = preset_for_model_id(run.model_id) if run.model_id else None
        if name is None:
            said = f"names model {run.model_id!r}, which no preset's source is" if run.model_id else "names no model"
            raise UserError(f"`preset`: {run.name} {said}; give `preset`, `config`, `hf_config` or `hf_model`")
        args += ["--preset", name]
        spec = load_model(replace(ref, preset=name))
    # the GPU: the caller's, else the one the file's telemetry names
    if gpu is not None:
        device = load_gpu(gpu)
        given.append(f"GPU from --gpu (the file names {run.gpu_device or 'none'})")
        args += ["--gpu", str(gpu)]
    else:
        if not run.gpu_device:
            raise UserError(f"`gpu`: {run.name} names no GPU; give `gpu` NAME (see `llmcalc gpus`)")
        name = preset_for_device(run.gpu_device)
        if name is None:
            raise UserError(f"`gpu`: {run.name} names GPU {run.gpu_device!r}, which no preset matches; give `gpu` NAME")
        device = load_gpu(name)
        args += ["--gpu", name]
    # the engine: the caller's, else the one the file's client names
    if engine is not None:
        given.append(f"engine from --engine (the file names {run.engine or 'none'})")
    elif run.engine:
        engine = run.engine
    else:
        raise UserError(f"`{engine_field}`: {run.name} ({run.kind}) does not say which engine served it; give "
                        f"`{engine_field}` vllm, sglang or trtllm")
    args += ["--engine", engine]
    # the layout: the file's where it records one (trtllm-bench), else the caller's
    degrees = dict(gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep)
    file_layout = {k: v for k, v in (("tp", run.tp), ("pp", run.pp), ("ep", run.ep)) if v}
    if file_layout and gpus is None and tp is None and pp == 1 and ep == 1:
        degrees |= file_layout
    elif file_layout:
        given.append("layout from the options (the file records " +
                     ", ".join(f"{k} {v}" for k, v in file_layout.items()) + ")")
    if kv_dtype is None:
        from llmcalc.inputs.engines import load_engine

        serving = load_engine(engine)
        kv_dtype = serving.stated_kv_dtype(spec.checkpoint) or "bf16"
        if kv_dtype != "bf16":
            given.append(f"KV cache {kv_dtype}: the checkpoint states it and {serving.label}'s default cache dtype "
                         "takes it (--kv-dtype sets another)")
    else:
        args += ["--kv-dtype", kv_dtype]
    formats = WeightFormats.parse(weights_format) if weights_format is not None else None
    w = Workload(weights_dtype=weights_dtype, weights_format=formats, layout=Layout.of(**degrees), kv_dtype=kv_dtype)
    L = w.layout
    args += ["--tp", str(L.tp), "--pp", str(L.pp), "--dp", str(L.dp), "--ep", str(L.ep)]
    for flag, value in (("--weights-dtype", weights_dtype), ("--weights-format", weights_format),
                        ("--time-model", time_model), ("--calibration", calibration)):
        if value is not None:
            args += [flag, str(value)]
    # the workload: request count, load and lengths from the file, the caller's filling what it lacks
    n = _fill(requests, run.requests, "requests", "the request count", run, given)
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
                        "`concurrency` N or `rate` REQ/S")
    if load.concurrency is not None:
        args += ["--concurrency", str(load.concurrency)]
    elif load.rate != float("inf"):
        args += ["--rate", f"{load.rate!r}"]
    lengths = []
    for side, text, mean, std in (("prompt", prompt, run.prompt_mean, run.prompt_std),
                                  ("output", output, run.output_mean, run.output_std)):
        if text is None:
            if mean is None:
                raise UserError(f"`{side}`: {run.name} records no {side} lengths; give `{side}` LEN")
            text = f"normal:{mean:.6g},{std:.6g}" if std > 0 else str(max(1, round(mean)))
        else:
            text = str(text)
            given.append(f"{side} lengths from --{side}" + ("" if mean is None else f" (the file's mean: {mean:g})"))
        lengths.append(parse_lengths(text, side))
        args += [f"--{side}", text]
    args += ["--requests", str(n), "--seed", str(seed)]
    return Case(run=run, spec=spec, device=device, w=w, engine=engine, time_model=time_model,
                calibration=None if calibration is None else Path(calibration), load=load, lengths=lengths,
                requests=n, seed=seed, args=args, given=given)


def _fill(value, file_value, field: str, what: str, run, given: list[str]):
    if value is not None:
        given.append(f"{what} from --{field}" + ("" if file_value is None else f" (the file's: {file_value})"))
        return value
    if file_value is None:
        raise UserError(f"`{field}`: {run.name} does not record {what}; give `{field}`")
    return file_value


def _load_text(rate, concurrency) -> str:
    if concurrency is not None:
        return f"concurrency {concurrency}"
    return "all at once" if rate == float("inf") else f"{rate:g} requests/s"


def measure_run(case: Case) -> tuple[MeasuredRun, list[MetricRow], list[str]]:
    """The run of a case and its simulation, the rows of its figures measured beside predicted, and the notes of
    the comparison."""
    run, report = case.run, case.simulate()
    metric_rows, notes = compare(run.name, run.metrics, report)
    if not metric_rows:
        raise UserError(f"`files`: {run.name} holds no latency or throughput figure to compare; give a result file "
                        "with the client's metrics")
    return MeasuredRun(file=run.name, kind=run.kind, model_id=run.model_id, model=case.spec.name,
                       gpu=case.device.name, gpus=case.w.layout.gpus, engine=report.engine,
                       time_model=report.time_model, load=report.load, requests=case.requests, prompt=report.prompt,
                       output=report.output, serve_args=case.args, given=case.given), \
        metric_rows, [f"{run.name}: {x}" for x in notes]


MAX_RUNS = 1000
"""Most runs `measured` and `calibrate --from-runs` take at once: each is a `serve` simulation (about 25 ms for a
small one), and a 64 MiB file can hold tens of thousands."""


def read_all(files: list[Path]) -> list:
    """Every run of every result file, in order (inputs/benchmarks.py: read_runs); at most MAX_RUNS of them."""
    from llmcalc.inputs.benchmarks import read_runs

    runs = []
    for path in files:
        runs += read_runs(Path(path), MAX_RUNS - len(runs))
        if len(runs) > MAX_RUNS:
            raise UserError(f"`files`: past {MAX_RUNS:,} runs (at {path}), more than are compared at once, each a "
                            "`serve` simulation; give fewer runs at once")
    return runs


def measured(files: list[Path], model=None, gpu: str | None = None, **inputs: Any) -> MeasuredReport:
    """Every run of `files` beside serve's prediction of it (`resolve`'s inputs): `llmcalc measured`."""
    from llmcalc.views.serve import MAX_OUTPUT_TOKENS, shared_steps

    runs = read_all(files)
    cases = [resolve(run, model, gpu, **inputs) for run in runs]
    tokens = sum(c.requests * c.lengths[1].mean for c in cases)
    if tokens > MAX_OUTPUT_TOKENS:  # each run is also bounded on its own, when simulated
        raise UserError(f"`files`: the {len(runs):,} runs hold about {tokens:,.0f} output tokens to simulate, more "
                        f"than the {MAX_OUTPUT_TOKENS:,} of one `serve` run; give fewer runs at once")
    with shared_steps():  # the runs are bounded as one `serve` run is
        done = [measure_run(c) for c in cases]
    notes = [f"{run.name}: {n}" for run in runs for n in run.notes]
    notes += [n for _, _, extra in done for n in extra]
    return MeasuredReport(rows=[row for _, rows, _ in done for row in rows], files=len(files),
                          runs=[r for r, _, _ in done], formula=FORMULA, notes=notes)


# --- the time model refitted to runs ----------------------------------------------------------------------------

FIT_REQUESTS = 30
"""Requests per run simulated while fitting (the run's first ones, same seed): the fit's figures are means."""


@dataclass(frozen=True)
class Refit:
    """A time-model profile refitted to benchmark runs (`llmcalc calibrate --from-runs`): the profile, each term
    before and after and the leave-one-out (`lines`), and the profile file's comment lines (`header`)."""

    profile: TimeModel
    lines: list[str]
    header: list[str]

    def text(self) -> str:
        """The profile file, as `llmcalc calibrate --from-runs` prints or writes it (inputs/time_models.py)."""
        from llmcalc.inputs.time_models import dump_profile

        return dump_profile(self.profile, self.header)


def refit_runs(files: list[Path], model=None, gpu: str | None = None, served_by: str | None = None) -> Refit:
    """The profile of the (GPU, engine) the runs in `files` were served on, refitted to them
    (llmcalc/costs/run_fit.py); each term before and after and the leave-one-out in its `lines`, and in the
    profile's header."""
    import json
    import math

    from llmcalc.costs.run_fit import LEFT, RunFigures, fit_runs, fold_name, held_out

    runs = read_all(files)
    cases = [resolve(run, model, gpu, engine=served_by, engine_field="served_by") for run in runs]
    pairs = {(c.device.name, c.engine) for c in cases}
    if len(pairs) > 1:
        raise UserError("`from_runs`: a profile is one GPU's under one engine; these runs are on " +
                        ", ".join(f"{g} ({e})" for g, e in sorted(pairs)) + "; give runs of one")
    device, engine = cases[0].device, cases[0].engine
    base = cases[0].base_time_model()
    figures, by_name = [], {}
    for case in cases:
        m = case.run.metrics
        measured = {k: m[k]["mean"] for k in ("ttft", "tpot", "itl") if "mean" in m.get(k, {})}
        if not measured:
            raise UserError(f"`from_runs`: {case.run.name} records no mean TTFT, TPOT or ITL to fit to; give runs "
                            "with latencies")
        figures.append(RunFigures(case.run.name, measured))
        by_name[case.run.name] = case
    cache: dict = {}

    def predict(tm, run: RunFigures) -> dict[str, float]:
        key = (json.dumps(tm.model_dump(exclude={"sources"}), sort_keys=True), run.name)
        if key not in cache:
            r = by_name[run.name].simulate(tm, FIT_REQUESTS)
            cache[key] = {"ttft": r.ttft_s.mean, "tpot": r.tpot_s.mean}
        return cache[key]

    tm, fits = fit_runs(figures, base, predict)
    held = held_out(figures, base, predict)
    names = ", ".join(f.name for f in figures)
    what = f"{len(figures)} run(s) of {engine} on {device.name} ({names})"
    sources = dict(tm.sources)
    for f in fits:
        if f.runs:
            sources[f.name] = f"refitted by llmcalc calibrate --from-runs to {what}: {f.note}"
    tm = tm.model_copy(update={"name": "calibrated", "gpu": device.name, "sources": sources})
    lines = [f"{f.name}: {f.before:.6g} -> {f.after:.6g} ({f.note})" for f in fits]
    lines += [f"{name}: {getattr(tm, name)} kept ({why})" for name, why in LEFT.items()
              if getattr(tm, name) is not None]
    served = cases[0].serving_engine()
    for name in ("step_s", "request_s"):
        if (stated := getattr(served, name)) is not None:
            lines.append(f"note: {engine} states its own {name} ({stated:g} s), the fit's start; the profile's "
                         f"{name} stands wherever the profile is given (--calibration)")
    if held:
        for h in held:
            lines.append(f"held out {h.name}: predicted / measured " + ", ".join(
                f"{m.upper()} {h.before[m]:.3f} -> {h.after[m]:.3f}" for m in h.after))
        for side in ("before", "after"):
            errs = [abs(math.log(r)) for h in held for r in getattr(h, side).values()]
            lines.append(f"{fold_name(len(figures))} {side} the refit: mean |log(predicted / measured)| "
                         f"{sum(errs) / len(errs):.3f} over {len(errs)} figure(s)")
    else:
        lines.append("leave-one-out: needs 2 runs or more; none held out")
    header = [f"Calibration profile for {device.name} under {engine}: the time model the runs' predictions used, "
              f"refitted by `llmcalc calibrate --from-runs` to {what}; llmcalc/model/time_model.py names each figure",
              *(f"fit: {line}" for line in lines),
              "use: llmcalc serve --calibration FILE, llmcalc measured --calibration FILE"]
    return Refit(tm, lines, header)
