"""GPU specs (`presets/gpus/*.yaml`, or a user's YAML): dense peak FLOP/s per dtype, memory
bandwidth and capacity, interconnect. See docs/roofline.md.

Units: vendors quote TFLOP/s and GB/s in powers of ten and memory in "GB" that is binary-sized
(80 GB of HBM is 80 GiB), so capacity is read as GiB. Interconnect figures are both directions
together, as vendors quote them; one direction carries half.
"""

from __future__ import annotations

import difflib
from decimal import Decimal
from pathlib import Path

from pydantic import Field

from .blocks.base import Frozen
from .errors import UserError

GPU_DIR = Path(__file__).parent / "presets" / "gpus"


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
            raise UserError(f"--compute-dtype: {self.name} has no {dtype} peak; use one of {', '.join(have)}")
        return tflops * 1e12


    def detail(self):
        """This GPU in full, as `llmcalc gpus NAME` shows it."""
        from .report import GPUReport

        return GPUReport(name=self.name, description=self.description,
                         peak_flops={k: v * 1e12 if v else None for k, v in self.peak_tflops.model_dump().items()},
                         memory_bytes=self.memory_bytes, bandwidth_bytes_per_s=self.bandwidth,
                         ridge_point=self.peak("bf16") / self.bandwidth, interconnect=self.interconnect,
                         interconnect_bytes_per_s=self.interconnect_gbs * 1e9, source=self.source, notes=self.notes)

    def row(self):
        """This GPU as a `llmcalc gpus` row: FLOP/s, bytes, bytes/s, and the bf16 ridge point."""
        from .report import GPURow

        fp8 = self.peak_tflops.fp8
        return GPURow(name=self.name, description=self.description, bf16_flops=self.peak("bf16"),
                      fp8_flops=fp8 * 1e12 if fp8 else None, memory_bytes=self.memory_bytes,
                      bandwidth_bytes_per_s=self.bandwidth, ridge_point=self.peak("bf16") / self.bandwidth,
                      interconnect=self.interconnect, interconnect_bytes_per_s=self.interconnect_gbs * 1e9,
                      source=self.source)


def gpu_names() -> list[str]:
    return sorted(p.stem for p in GPU_DIR.glob("*.yaml"))


def load_gpu(name: str) -> GPU:
    """A GPU preset by name, or a user's GPU YAML by path (anything ending .yaml/.yml/.json)."""
    from .presets import read_yaml, validated

    if name.endswith((".yaml", ".yml", ".json")):
        path, where = Path(name), f"gpu file {name}"
    else:
        names = gpu_names()
        if name not in names:
            near = [n for n in names if n.startswith(name.lower())] or difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
            raise UserError(f"--gpu: unknown GPU {name!r}; {hint}valid GPUs: {', '.join(names)} (or a YAML file)")
        path, where = GPU_DIR / f"{name}.yaml", f"gpu {name}"
    return validated(GPU, read_yaml(path, "gpu file"), where, "presets/gpus/h100-sxm.yaml")
