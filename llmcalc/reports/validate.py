"""Typed results: Estimates against the torch reference model (`llmcalc validate`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class ValidationRow(Report):
    """One quantity: the closed-form estimate, the reference model's measurement, and the verdict.
    rel_error = |measured − estimate| / measured; ok when it is within tolerance, or for a bound (the roofline's
    time, a lower bound) when the estimate is at most the measurement."""

    model: str
    quantity: str
    convention: str
    estimate: int | float
    """Counts and bytes are exact ints; times are seconds."""
    measured: int | float
    rel_error: float
    tolerance: float
    ok: bool
    bound: bool = False
    """The estimate is a lower bound (tolerance unused): ok when estimate ≤ measured."""


class ValidationReport(Report):
    """`llmcalc validate`: estimates against the torch reference model's measurements."""

    printed_by: ClassVar[str] = "validate"

    device: str
    gpu: str | None
    models: list[str]
    """The models measured, as built (a scaled copy names its layers and width divisor)."""
    batch: int
    seq: int
    ok: bool
    rows: list[ValidationRow]
    notes: list[str]
