"""An engine profile: what one engine's kernels reach on one GPU, kernel class by kernel class (docs/roofline.md#the-
reference-engine). The bundled reference model is such an engine (presets/calibration/reference/<gpu>.yaml, written
by `llmcalc calibrate --engine reference`); llmcalc/costs/engine_time.py turns a profile into step times.

A kernel of class k moving `bytes` and computing `flops` (plus `pad` more rows, keys or expert rows of its kind)
takes

  c = (flops + pad · row flops) / (peak · compute_efficiency),  m = bytes / (bandwidth · memory_efficiency)
  t = max(c, m) + overlap · min(c, m) + fixed_s                       (memory-bound classes: m + fixed_s)

Figures belong to the GPU and the engine, never to a model.
"""

from dataclasses import dataclass
from typing import Annotated, NamedTuple

from pydantic import Field, model_validator

from llmcalc.errors import UserError
from llmcalc.model.base import SHARE_MIN, Frozen

Share = Annotated[float, Field(ge=SHARE_MIN, le=2.0)]
"""A share of a datasheet figure, at least a millionth; above 1 only where a cache serves part of the traffic."""
Seconds = Annotated[float, Field(ge=0, lt=1.0)]
"""A fixed cost, under a second. Every float of a profile is finite: Frozen refuses NaN and ±inf."""

KERNEL_CLASSES = {
    "matmul": "weight matmuls (cuBLAS through F.linear, torch.bmm): rows padded by `pad`",
    "grouped_matmul": "the routed experts' grouped GEMM (torch._grouped_mm): `pad` rows per active expert",
    "attention_prefill": "causal SDPA over a prompt: `pad` keys per query",
    "attention_backward": "SDPA's backward (training), at its own rate: 2.5 × the forward's FLOPs",
    "attention_decode": "one query per sequence over its K/V cache (SDPA)",
    "latent_decode": "MLA's absorbed decode step over the latent cache, the keys a multiple of 8",
    "latent_decode_unaligned": "the same with the keys not a multiple of 8 (cuBLAS's unaligned kernels)",
    "scan_prefill": "a recurrent mixer's scan over a prompt (everything between its projections)",
    "scan_decode": "a recurrent mixer's step (everything between its projections)",
    "elementwise": "element-wise kernels over contiguous operands of one shape",
    "strided": "element-wise kernels that broadcast an operand or walk one by strides",
    "scatter": "kernels adding rows into a larger tensor (index_add_: the routed experts' combine)",
    "reduction": "reductions along a dimension (norms, softmax, top-k, sort, sums)",
}
"""Every kernel class an engine profile gives, and what it covers."""
REQUIRED = ("matmul", "attention_prefill", "attention_decode", "elementwise", "strided", "reduction")
"""The classes every engine profile has; the others fall back to their nearest (EngineProfile.curve)."""


@dataclass(frozen=True)
class EngineKernels:
    """The kernels an engine launches in one forward beyond what llmcalc's step form costs as ops, counted from the
    engine itself (llmcalc/reference/kernel_count.py counts the reference's): every dispatched call, the kernels
    launched, and the element-wise, strided, scatter and reduction kernels with the bytes they read and write."""

    calls: int  # aten calls dispatched (views and allocations included): the host's work in an eager forward
    launches: int  # kernels launched (matmuls and attention included)
    elementwise: int  # element-wise, copy and gather kernels over contiguous operands of one shape
    elementwise_bytes: int  # bytes they read and write
    strided: int  # element-wise kernels that broadcast an operand or walk one by strides
    strided_bytes: int
    scatters: int  # kernels that add rows into a larger tensor (index_add_: the routed experts' combine)
    scatter_bytes: int
    reductions: int  # reduction kernels (norms, softmax, top-k, sort, sums)
    reduction_bytes: int
    matmuls: int  # matmul kernels (the step form's weight matmuls and batched products)
    attention: int  # attention cores (SDPA, MLA's absorbed step)

    def own(self) -> dict[str, tuple[int, int]]:
        """(kernels, bytes) of each kernel class the engine runs beyond the step form's ops."""
        return {"elementwise": (self.elementwise, self.elementwise_bytes), "strided": (self.strided, self.strided_bytes),
                "scatter": (self.scatters, self.scatter_bytes), "reduction": (self.reductions, self.reduction_bytes)}


class TrainingKernels(NamedTuple):
    """An engine's own kernels in each part of a training step: the forward (every position's logits and the
    loss), its backward and the optimizer's update."""

    forward: EngineKernels
    backward: EngineKernels
    optimizer: EngineKernels


class KernelCurve(Frozen):
    """One kernel class's figures, fitted to what `llmcalc calibrate` measured of it."""

    compute_efficiency: Share | None = None
    """Share of the dense peak at the kernel's dtype its FLOPs reach; None: a memory-bound class."""
    pad: Annotated[float, Field(ge=0, le=65536)] = 0.0
    """Rows (matmuls: per matmul, grouped: per active expert) or keys per query (attention) the kernel pays for
    beyond its work: tiles it fills only partly."""
    memory_efficiency: Share
    """Share of the datasheet bandwidth its bytes reach."""
    overlap: Annotated[float, Field(ge=0, le=1)] = 0.0
    """How much of the smaller of its compute and memory time is not hidden under the larger."""
    fixed_s: Seconds = 0.0
    """Seconds each call adds beyond its work (launch, ramp, tail), inside a CUDA graph."""


class EngineHost(Frozen):
    """The host's part: what an eager forward costs per dispatched call, and a graph's per-step cost."""

    call_s: Seconds
    """Host seconds per aten call an eager forward dispatches (Python, dispatcher, launch), on the machine that
    measured it: host speed differs between machines of one GPU kind."""
    eager_kernel_s: Seconds
    """GPU seconds each kernel launched eagerly adds beyond its time inside a CUDA graph."""
    replay_s: Seconds
    """Seconds one CUDA graph replay adds beyond its kernels (a decode step captured once, replayed)."""


class EngineProfile(Frozen):
    """An engine's kernel classes on one GPU, with the environment that measured them and every figure's source."""

    name: str
    gpu: str
    """The GPU preset whose peaks and bandwidth the shares divide."""
    measured_on: dict[str, str]
    """device (as torch names it), driver, CUDA, torch, date."""
    kernels: dict[str, KernelCurve]
    host: EngineHost
    curves: dict[str, list[list[float]]] = {}
    """Measured points the kernel classes were fitted to, each a row of numbers (curve_columns names them)."""
    curve_columns: dict[str, list[str]] = {}
    sources: dict[str, str] = {}

    @model_validator(mode="after")
    def _classes(self) -> "EngineProfile":
        unknown = sorted(set(self.kernels) - set(KERNEL_CLASSES))
        if unknown:
            raise UserError(f"`kernels`: unknown kernel class {unknown[0]!r}; use one of {', '.join(KERNEL_CLASSES)}")
        missing = [k for k in REQUIRED if k not in self.kernels]
        if missing:
            raise UserError(f"`kernels`: no {missing[0]!r} class; an engine profile gives at least "
                            f"{', '.join(REQUIRED)}")
        return self

    def curve(self, kind: str) -> KernelCurve:
        """The kernel class `kind`; the nearest class the profile has where it lacks one (an unaligned latent step:
        the aligned one; a backward: the prefill's)."""
        fallback = {"latent_decode_unaligned": "latent_decode", "attention_backward": "attention_prefill",
                    "latent_decode": "attention_decode", "scan_decode": "attention_decode",
                    "scan_prefill": "attention_prefill", "grouped_matmul": "matmul", "scatter": "strided"}
        while kind not in self.kernels:
            if kind not in fallback:
                raise UserError(f"engine profile {self.name} ({self.gpu}) has no {kind!r} kernel class")
            kind = fallback[kind]
        return self.kernels[kind]
