"""Attention kernels by name (`presets/kernels/attention.yaml`, data with the source of every figure), and a time
model with a named kernel's figures in place of its own attention figures."""

from __future__ import annotations

import difflib
from functools import cache

from llmcalc.errors import UserError
from llmcalc.inputs.files import PRESETS, read_yaml, validated
from llmcalc.model.gpu import GPU
from llmcalc.model.kernel import AttentionKernel
from llmcalc.model.time_model import TimeModel

KERNELS_FILE = PRESETS / "kernels" / "attention.yaml"
PROFILE = "profile"
"""The --attention-impl value that keeps the time model's own attention figures."""
DEFAULT_TRAINING_KERNEL = "cudnn"
"""The kernel `train` times by default: what Transformer Engine (Megatron-LM, NeMo) runs on Hopper and newer."""


@cache
def attention_kernels() -> dict[str, AttentionKernel]:
    """Every named attention kernel, by name."""
    data = read_yaml(KERNELS_FILE, "kernel file")
    return {name: validated(AttentionKernel, {"name": name, **entry}, f"kernel {name}", str(KERNELS_FILE))
            for name, entry in data["kernels"].items()}


def attention_impl_names() -> list[str]:
    return [*attention_kernels(), PROFILE]


def with_attention_kernel(tm: TimeModel, name: str, gpu: GPU) -> TimeModel:
    """`tm` with the attention figures of kernel `name` on `gpu`'s architecture (attention_kernel names it);
    `profile`, the roofline (a bound, no kernel's), or a kernel with no figure on the architecture leave them
    (the last says so in sources["attention_kernel"])."""
    kernels = attention_kernels()
    if name == PROFILE or tm.name == "roofline":
        if name not in (*kernels, PROFILE):
            _unknown(name)
        return tm
    if name not in kernels:
        _unknown(name)
    figures = kernels[name].on(gpu.architecture)
    if figures is None:
        arch = gpu.architecture or "an unnamed architecture"
        why = f"{name} has no published figure on {arch}: the time model's own figures"
        return tm.model_copy(update={"sources": {**tm.sources, "attention_kernel": why}})
    where = f"{kernels[name].label} on {gpu.architecture} (presets/kernels/attention.yaml)"
    sources = {**tm.sources, "attention_efficiency": f"{where}: its causal forward's share of the peak",
               "attention_backward": f"{where}: its backward's throughput over its forward's"}
    return tm.model_copy(update={"attention_efficiency": figures.forward, "attention_backward": figures.backward,
                                 "attention_kernel": name, "sources": sources})


def _unknown(name: str) -> None:
    names = attention_impl_names()
    near = difflib.get_close_matches(name.lower(), names, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise UserError(f"`attention_impl`: unknown attention kernel {name!r}; {hint}use one of {', '.join(names)}")
