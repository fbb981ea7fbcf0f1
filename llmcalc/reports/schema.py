"""Which report each command prints as JSON, and its published JSON Schema (`llmcalc schema`)."""

from llmcalc.reports.base import Report
from llmcalc.reports.compare import CompareReport
from llmcalc.reports.explain import ExplainReport
from llmcalc.reports.fit import FitReport
from llmcalc.reports.flops import FlopsReport
from llmcalc.reports.gpus import GPUReport, GPURow
from llmcalc.reports.kv import KVReport
from llmcalc.reports.latency import LatencyReport
from llmcalc.reports.memory import MemoryReport
from llmcalc.reports.mfu import MfuReport
from llmcalc.reports.moe import MoEReport
from llmcalc.reports.params import ParamsReport
from llmcalc.reports.plan import PlanReport
from llmcalc.reports.presets import PresetReport, PresetRow
from llmcalc.reports.run import ScenarioResult
from llmcalc.reports.scaling import ScaleReport
from llmcalc.reports.serve import ServeReport
from llmcalc.reports.sweep import SweepReport
from llmcalc.reports.training import TrainReport
from llmcalc.reports.validate import ValidationReport

COMMAND_REPORTS: dict[str, tuple[type[Report], bool, type[Report] | None]] = {
    "params": (ParamsReport, False, None), "kv": (KVReport, False, None), "flops": (FlopsReport, False, None),
    "memory": (MemoryReport, False, None), "gpus": (GPURow, True, GPUReport),
    "latency": (LatencyReport, False, None), "fit": (FitReport, False, None),
    "validate": (ValidationReport, False, None), "presets": (PresetRow, True, PresetReport),
    "compare": (CompareReport, False, None),
    "explain": (ExplainReport, False, None),
    "sweep": (SweepReport, False, None),
    "moe": (MoEReport, False, None),
    "train": (TrainReport, False, None),
    "mfu": (MfuReport, False, None),
    "serve": (ServeReport, False, None),
    "plan": (PlanReport, False, None),
    "scale": (ScaleReport, False, None),
    "run": (ScenarioResult, True, None),
}
"""What each command's --format json prints: a report model, or a list of rows (True); and the report of
its one-item form where it has one (`llmcalc presets NAME`, `llmcalc gpus NAME`)."""


def command_schema(command: str) -> dict:
    """The JSON Schema (draft 2020-12, as Pydantic writes it) of `command`'s JSON output."""
    from pydantic import TypeAdapter

    model, many, one = COMMAND_REPORTS[command]
    out = list[model] if many else model
    return TypeAdapter(out if one is None else out | one).json_schema(mode="serialization")
