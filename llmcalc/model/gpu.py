"""GPU specs (`presets/gpus/*.yaml`, or a user's YAML): dense peak FLOP/s per dtype, memory
bandwidth and capacity, interconnect. See docs/roofline.md.

Units: vendors quote TFLOP/s and GB/s in powers of ten and memory in "GB" that is binary-sized
(80 GB of HBM is 80 GiB), so capacity is read as GiB. Interconnect figures are both directions
together, as vendors quote them; one direction carries half.
"""

from decimal import Decimal

from pydantic import Field

from llmcalc.errors import UserError
from llmcalc.model.base import Frozen


class PeakTflops(Frozen):
    """Dense peak per dtype in TFLOP/s (int8: TOPS); null when the GPU has no such unit."""

    fp32: float = Field(gt=0)
    tf32: float | None = Field(default=None, gt=0)
    bf16: float | None = Field(default=None, gt=0)
    fp16: float = Field(gt=0)
    fp8: float | None = Field(default=None, gt=0)
    int8: float | None = Field(default=None, gt=0)


class GPU(Frozen):
    name: str
    description: str
    source: str
    peak_tflops: PeakTflops
    memory_gib: float = Field(gt=0)
    memory_bandwidth_gbs: float = Field(gt=0)
    interconnect: str
    interconnect_gbs: float = Field(gt=0)
    notes: str = ""

    @property
    def memory_bytes(self) -> int:
        return int(Decimal(str(self.memory_gib)) * 2**30)

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes/s."""
        return self.memory_bandwidth_gbs * 1e9

    @property
    def link_one_way(self) -> float:
        """GPU-to-GPU bytes/s in one direction: half the quoted bidirectional figure."""
        return self.interconnect_gbs * 1e9 / 2

    def peak(self, dtype: str) -> float:
        """Dense FLOP/s for matmuls in `dtype`; a dtype the GPU lacks is a user error."""
        tflops = getattr(self.peak_tflops, dtype, None)
        if tflops is None:
            have = [k for k, v in self.peak_tflops.model_dump().items() if v]
            raise UserError(f"`compute_dtype`: {self.name} has no {dtype} peak; use one of {', '.join(have)}")
        return tflops * 1e12
