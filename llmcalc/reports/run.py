"""Typed results: the scenarios of a scenario file, each with its command's own report (`llmcalc run`)."""

from typing import ClassVar, Optional, Union

from llmcalc.reports.base import Report
from llmcalc.reports.compare import CompareReport
from llmcalc.reports.explain import ExplainReport
from llmcalc.reports.fit import FitReport
from llmcalc.reports.flops import FlopsReport
from llmcalc.reports.kv import KVReport
from llmcalc.reports.latency import LatencyReport
from llmcalc.reports.memory import MemoryReport
from llmcalc.reports.mfu import MfuReport
from llmcalc.reports.moe import MoEReport
from llmcalc.reports.params import ParamsReport
from llmcalc.reports.scaling import ScaleReport
from llmcalc.reports.training import TrainReport

SCENARIO_REPORTS: dict[str, type[Report]] = {
    "params": ParamsReport, "kv": KVReport, "flops": FlopsReport, "memory": MemoryReport,
    "latency": LatencyReport, "fit": FitReport, "moe": MoEReport, "train": TrainReport, "mfu": MfuReport,
    "scale": ScaleReport, "explain": ExplainReport, "compare": CompareReport,
}
"""The commands a scenario may name, each with the report its --format json prints: the closed-form commands.
Left out: those that write files, simulate or search at length (sweep, serve, plan), need torch (validate,
calibrate), or list what is bundled (gpus, presets, schema)."""

AnyScenarioReport = Union[ParamsReport, KVReport, FlopsReport, MemoryReport, LatencyReport, FitReport, MoEReport,
                          TrainReport, MfuReport, ScaleReport, ExplainReport, CompareReport]


class ScenarioResult(Report):
    """One scenario of a scenario file: its name, its command, and what that command's --format json prints
    with the scenario's options."""

    printed_by: ClassVar[str] = "run"
    printed_as_list: ClassVar[bool] = True

    index: int
    """The scenario's place in the file, from 1."""
    name: str
    """The scenario's name, as the file gives it."""
    command: str
    """The command it ran: params, kv, flops, memory, latency, fit, moe, train, mfu, scale, explain or compare."""
    report: Optional[AnyScenarioReport] = None
    """The command's own JSON output for the scenario's options (its schema: `llmcalc schema COMMAND`); null for a
    scenario that failed under --keep-going."""
    error: Optional[str] = None
    """Why the scenario failed under --keep-going (one line); null when it ran."""
