"""The raw-timings file `llmcalc calibrate --raw` writes (llmcalc/reference/calibrate.py), checked before a fit
reads it: every field the fit reads present, of its type and in range (a time positive, a size at least 1, a
collective over at least 2 GPUs), with one-line errors naming the field. Fields the fit does not read pass as
they are; the kernel curves (`curves`) are checked where their fit reads them."""

from typing import Annotated, Literal

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


class RawTimings(_Part):
    """The fields the fit reads (llmcalc/costs/calibration.py: fit)."""

    device_name: str
    date: str
    torch: str
    cuda: str | None
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
