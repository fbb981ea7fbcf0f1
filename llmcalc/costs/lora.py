"""LoRA adapters of a workload on a model: which matrices they go on, their parameters and their forward FLOPs.
See docs/formulas.md#lora; the target mapping is llmcalc/model/lora.py's.

  trainable = Σ_layers Σ_adapted stored · r · (d_in + d_out)
  forward   = Σ_layers Σ_adapted 2 · tokens · used · r · (d_in + d_out)      (llmcalc/costs/flops.py)
"""

from __future__ import annotations

from collections import defaultdict

from llmcalc.errors import UserError
from llmcalc.model.lora import TARGETS, Adaptable
from llmcalc.model.spec import LayerGroup, ModelSpec
from llmcalc.workload import Workload


def layer_adapters(spec: ModelSpec, group: LayerGroup, targets: frozenset[str]) -> list[tuple[str, Adaptable]]:
    """The adapted matrices of one layer of `group`, each with its component path (attention/q, ffn/experts)."""
    d = spec.d_model
    out = [(f"attention/{a.component}", a) for a in spec.attention.adaptable(d) if a.adapted(targets)]
    prefix = spec.ffn_prefix(group)
    return out + [(prefix + a.component, a) for a in group.ffn.adaptable(d) if a.adapted(targets)]


def adapters(spec: ModelSpec, w: Workload) -> list[tuple[int, str, Adaptable]]:
    """Every adapted matrix kind of the model under the workload's LoRA, with its layer count and path; a
    UserError when LoRA is on and no target names a matrix of the model."""
    targets = w.lora
    if targets is None:
        return []
    spec.check_uniform("LoRA")  # the adapters sit on spec.attention's matrices
    out = [(g.count, path, a) for g in spec.layer_groups() for path, a in layer_adapters(spec, g, targets)]
    if not out:
        raise UserError(f"`lora_targets`: {','.join(w.lora_targets)} adapt no matrix of {spec.name}; use some of "
                        f"{', '.join(TARGETS)}")
    full = max(max(a.d_in, a.d_out) for _, _, a in out)
    if w.lora_rank > full:  # past every adapted matrix's full rank: more parameters, nothing more it can express
        raise UserError(f"`lora_rank`: {w.lora_rank:,} is above the rank of every adapted matrix of {spec.name} "
                        f"(at most {full:,}); give a rank such as 16")
    return out


def adapter_params(spec: ModelSpec, w: Workload) -> dict[str, int]:
    """Adapter parameters by component path, all layers: r · (d_in + d_out) per adapted matrix."""
    out: dict[str, int] = defaultdict(int)
    for count, path, a in adapters(spec, w):
        out[path] += count * a.params(w.lora_rank)
    return dict(out)


def stage_adapter_params(spec: ModelSpec, w: Workload, ranges: list[tuple[int, int]]) -> int:
    """Adapter parameters of the layers in `ranges` ([start, stop) of one pipeline stage's model chunks), all of
    each adapted matrix, before any tensor-parallel split."""
    return sum(g.count * sum(a.params(w.lora_rank) for _, a in layer_adapters(spec, g, w.lora))
               for start, stop in ranges for g in spec.layer_groups(start, stop))


def adapter_saved_elements(spec: ModelSpec, group: LayerGroup, w: Workload) -> int:
    """Per token, the r-wide intermediates (x·A) one layer's adapters keep for B's weight gradient: r per
    adapted matrix a token passes through."""
    return sum(a.used * w.lora_rank for _, a in layer_adapters(spec, group, w.lora or frozenset()))
