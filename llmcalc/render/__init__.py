"""Rendering: the same report as a rich table for people, or JSON, YAML or CSV for scripts. No arithmetic here,
and nothing here imports the estimators: a renderer reads a report and formats it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

Format = Literal["table", "json", "yaml", "csv"]
Units = Literal["both", "si", "iec"]
"""Byte labels in tables: both GB (10^9) and GiB (2^30), or only one. JSON/YAML/CSV carry exact bytes."""


def emit(report: BaseModel | Sequence[BaseModel], fmt: Format, units: Units = "both", **view) -> None:
    """Write `report` to stdout in `fmt`. Tables go through the report type's renderer, fitted to the
    terminal's width; `view` holds renderer switches (sweep's bars)."""
    if fmt == "table":
        from llmcalc.render.console import print_report
        from llmcalc.render.formats import report_data, require_finite

        require_finite(report_data(report))  # a table shows what JSON would: no inf or NaN with exit 0
        print_report(report, units, **view)
    elif fmt == "csv":
        from llmcalc.render.formats import write_csv

        write_csv(report)
    else:
        from llmcalc.render.formats import write_data

        write_data(report, fmt)
