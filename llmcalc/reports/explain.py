"""Typed results: A command's figures worked out (`llmcalc explain`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class ExplainStep(Report):
    """One figure worked out: `value` = `formula` evaluated over `symbols` (the text `substituted`).

    component: the plain command's path (`attention/q`, `kv/full`, `prefill/attention/core_scores`).
    value: an int count (params, bytes, FLOPs) or seconds (float, unit "s").
    """

    component: str
    formula: str
    symbols: dict[str, int | float]
    substituted: str
    value: int | float
    unit: str


class ExplainTotal(ExplainStep):
    """A total over steps, with the plain command's own figure for it: `source` names the command
    and field (`llmcalc kv: total_bytes`); matches: exact for counts, within 1e-9 for seconds."""

    check: int | float
    source: str
    matches: bool


class ExplainReport(Report):
    """`llmcalc explain TOPIC`: the steps behind a command's figures and its totals checked against it.

    total, check and unit: the headline total (params total, kv and memory total_bytes, flops
    prefill_flops, latency total_s); matches: every total agrees with its plain figure.
    conventions: the counting conventions and settings used; legend: each symbol's meaning.
    """

    printed_by: ClassVar[str] = "explain"

    topic: str
    model: str
    batch: int | None
    seq: int | None
    gen: int | None
    conventions: dict[str, str]
    steps: list[ExplainStep]
    totals: list[ExplainTotal]
    total: int | float
    check: int | float
    unit: str
    matches: bool
    legend: dict[str, str]
    notes: list[str]
