"""Attention kernels (`presets/kernels/attention.yaml`): the share of a GPU's dense peak a named kernel's forward
reaches, and its backward's throughput relative to that forward, per GPU architecture, each figure with its source.
A time model takes them in place of its own attention figures (llmcalc/model/time_model.py: attention_efficiency,
attention_backward)."""

from pydantic import Field

from llmcalc.model.base import Frozen

class KernelFigures(Frozen):
    """One kernel on one architecture."""

    forward: float = Field(gt=0, le=1)
    """Share of the dense bf16/fp16 peak its causal forward reaches at long sequences (head dim 128)."""
    backward: float = Field(gt=0, le=1)
    """Its backward's throughput (2.5 × the forward's FLOPs: flash recomputes the scores) over its forward's."""


class AttentionKernel(Frozen):
    """A named attention kernel and its figures per GPU architecture (hopper, ampere, ...)."""

    name: str
    label: str
    used_by: str
    """The frameworks and engines that run it, as their documentation states."""
    hopper: KernelFigures | None = None
    ampere: KernelFigures | None = None
    ada: KernelFigures | None = None
    blackwell: KernelFigures | None = None

    def on(self, architecture: str | None) -> KernelFigures | None:
        """The kernel's figures on `architecture`; None where none is published (or the GPU names none)."""
        return getattr(self, architecture, None) if architecture in ARCHITECTURES else None


ARCHITECTURES = ("ampere", "ada", "hopper", "blackwell")
"""The architectures a kernel can carry figures for; a GPU preset's `architecture` names one (or cdna3, which no
kernel here covers)."""
