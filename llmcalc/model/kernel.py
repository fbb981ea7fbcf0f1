"""Attention kernels (`presets/kernels/attention.yaml`): the share of a GPU's dense peak a named kernel's forward
reaches, and its backward's throughput relative to that forward, per GPU architecture, each figure with its source.
A time model takes them in place of its own attention figures (llmcalc/model/time_model.py: attention_efficiency,
attention_backward)."""

from pydantic import Field

from llmcalc.model.base import Frozen
from llmcalc.model.gpu import Architecture


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
    figures: dict[Architecture, KernelFigures]
    """Its figures on each architecture they are published for."""

    def on(self, architecture: Architecture | None) -> KernelFigures | None:
        """The kernel's figures on `architecture`; None where none is published (or the GPU names none)."""
        return self.figures.get(architecture) if architecture else None
