"""Typed results: benchmark runs measured by a serving client, set beside what `llmcalc serve` predicts for the
same model, GPU, engine, layout and workload (`llmcalc measured`)."""

from typing import ClassVar

from pydantic import ConfigDict

from llmcalc.reports.base import Report

FINITE = ConfigDict(allow_inf_nan=False)


class MetricRow(Report):
    """One figure of a run: as the client measured it and as the simulation predicts it."""

    model_config = FINITE

    file: str
    """The run: its result file, with `:LINE` for a run on a line of a JSONL file."""
    metric: str
    """TTFT, TPOT, ITL, E2E (seconds), request throughput (requests/s) or output throughput (tokens/s)."""
    statistic: str
    """mean, p50, p90 or p99 over the requests; `value` for a throughput."""
    unit: str
    measured: float
    predicted: float
    ratio: float
    """predicted / measured: above 1 the prediction is slower (a latency) or higher (a throughput)."""


class MeasuredRun(Report):
    """One run of a result file and the simulation made for it (`llmcalc serve` with `serve_args`)."""

    model_config = FINITE

    file: str
    """The result file, with `:LINE` for a run on a line of a JSONL file."""
    kind: str
    """The client that wrote it: vllm, sglang, genai-perf, aiperf or trtllm."""
    model_id: str | None
    """The model the file names (None: it names none)."""
    model: str
    gpu: str
    gpus: int
    engine: str
    time_model: str
    load: str
    requests: int
    prompt: str
    output: str
    serve_args: list[str]
    """The `llmcalc serve` arguments of the same prediction."""
    given: list[str]
    """What the options supplied that the file lacks or that they override, one line each."""


class MeasuredReport(Report):
    """Benchmark runs, each set beside `llmcalc serve`'s simulation of its own model, GPU, engine, layout and
    workload: the request lengths, count and load the file records."""

    printed_by: ClassVar[str] = "measured"

    model_config = FINITE

    rows: list[MetricRow]
    """Every figure of every run, measured beside predicted, run by run."""
    files: int
    """Result files read."""
    runs: list[MeasuredRun]
    formula: str
    notes: list[str]
