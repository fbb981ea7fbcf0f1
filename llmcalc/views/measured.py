"""Measured against predicted: a benchmark run's figures beside those of `serve`'s simulation of the same
workload (`llmcalc measured`). Pure: the run and the simulation's report in, rows out."""

from __future__ import annotations

from llmcalc.reports.measured import MetricRow
from llmcalc.reports.serve import ServeReport

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
