"""The raw-timings file `llmcalc calibrate --raw` writes (llmcalc/reference/calibrate.py), checked before a fit
reads it: every field the fit reads present, of its type and in range (a time positive, a size at least 1, a
collective over at least 2 GPUs), with one-line errors naming the field. Fields the fit does not read pass as
they are; the kernel curves (`curves`) are checked point by point (check_curves) before the reference engine's fit
reads them."""

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Seconds = Annotated[float, Field(gt=1e-12, lt=1e6)]
"""A measured time: above a picosecond (a time divides a size) and below a million seconds."""
Size = Annotated[int, Field(ge=1, le=2**50, strict=True)]


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, frozen=True)


class Copy(_Part):
    bytes: Size
    seconds: Seconds


class Tiny(_Part):
    elements: Size
    seconds: Seconds


class Gemm(_Part):
    dtype: str
    m: Size
    n: Size
    k: Size
    seconds: Seconds


class AttentionTime(_Part):
    phase: Literal["prefill", "decode"]
    length: Size
    heads: Size
    kv_heads: Size
    head_dim: Size
    seconds: Seconds


class Collective(_Part):
    op: str
    bytes: Size
    world: Annotated[int, Field(ge=2, le=2**20, strict=True)]
    seconds: Seconds


class GraphTiny(_Part):
    elements: Size
    kernels: Size
    seconds_per_kernel: Seconds


class RunEnvironment(_Part):
    """One run's environment in a curves file merged from several runs."""

    device_name: str
    date: str
    torch: str
    cuda: str | None


class RawTimings(RunEnvironment):
    """The fields the fit reads (llmcalc/costs/calibration.py: fit): the run's environment and its timings."""

    model: str
    smoke: bool
    copy_: Copy = Field(alias="copy")
    tiny: Tiny
    gemm: Annotated[list[Gemm], Field(min_length=1)]
    attention: list[AttentionTime]
    attention_backend: str | None = None
    collectives: list[Collective] = []
    comm: str | None = None
    graph_tiny: GraphTiny | None = None
    curves: dict[str, list[dict] | dict[str, float]] = {}
    """Each curve's points, and `seconds`: the wall time each curve took to measure."""

    notes: list[str] = []


CURVE_LABELS = frozenset({"call", "counted", "dtype", "how", "name", "op", "phase", "preset", "series"})
"""The fields of a curve point (llmcalc/reference/kernel_curves.py) that name what was timed. Every other field holds
a size or a time, each a finite number above 0 (a time divides a size): a field a new curve adds is checked unless it
is listed here."""
CURVE_MAX = 2.0**50
"""The largest size or time a curve point may hold."""
MAX_CURVE_POINTS = 20_000
"""Most curve points a file holds, all curves together: a GPU campaign's file holds about 1,300 (230 KB); the fit's
time grows with them (1.2 M points in 18 MB took 35 s)."""


def check_curves(curves: Any) -> None:
    """Every point of every kernel curve (llmcalc/reference/kernel_curves.py measure's output) a mapping whose sizes
    and times (every field but CURVE_LABELS) are finite numbers above 0 and at most CURVE_MAX (a bool, a string or
    null is none), whose labels are strings and whose kernel counts (`counted`) are whole numbers from 0; `seconds`,
    each curve's wall time, a time the same. One line naming the curve, the point and the field otherwise."""
    from llmcalc.errors import UserError, clip

    def refuse(at: str, value: Any, what: str) -> None:
        raise UserError(f"`from_raw`: curves.{at} is {clip(repr(value))}, not {what}; give the file as the "
                        "calibration wrote it")

    if not isinstance(curves, dict):
        raise UserError("`from_raw`: `curves` is not a mapping of each curve to its points; give the file a "
                        "calibration with `engine` reference wrote")
    points = sum(len(v) if isinstance(v, (list, dict)) else 1 for v in curves.values())
    if points > MAX_CURVE_POINTS:
        raise UserError(f"`from_raw`: its curves hold {points:,} points, more than the {MAX_CURVE_POINTS:,} a fit reads "
                        "(a calibration writes about 1,300); give the file as the calibration wrote it")
    for name, points in curves.items():
        listed = points if isinstance(points, list) else [None]
        items = points.items() if isinstance(points, dict) else enumerate(listed)
        for at, point in items:
            fields = {"seconds": point} if isinstance(points, dict) else point
            if not isinstance(fields, dict):
                raise UserError(f"`from_raw`: curves.{name}[{at}] is not a point (a mapping of its fields); give the "
                                "file as the calibration wrote it")
            for key, value in fields.items():
                where = f"{name}[{at}].{key}"
                if key == "counted":
                    if not isinstance(value, dict):
                        refuse(where, value, "the kernels counted by class")
                    for kind, count in value.items():
                        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= CURVE_MAX:
                            refuse(f"{where}.{kind}", count, "a count of kernels from 0")
                elif key in CURVE_LABELS:
                    if not isinstance(value, str):
                        refuse(where, value, "a name")
                elif (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                      or not 0 < value <= CURVE_MAX):
                    refuse(where, value, "a size or time above 0")
