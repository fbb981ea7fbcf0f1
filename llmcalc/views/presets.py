"""The presets as `llmcalc presets` shows them: one row each, or one in full with its derived figures."""

from __future__ import annotations

from llmcalc.costs.kv import kv_cache
from llmcalc.costs.params import params
from llmcalc.reports.presets import PresetReport, PresetRow
from llmcalc.workload import Workload


def preset_row(spec):
    """One line of `llmcalc presets`: shape, families and parameter counts."""
    r = params(spec)
    return PresetRow(name=spec.name, layers=spec.n_layers, d_model=spec.d_model, max_seq_len=spec.max_seq_len,
                     attention=spec.attention.label, ffn=spec.ffn.label, attention_kind=spec.mixer_label,
                     ffn_kind=spec.ffn.kind_label, sliding_window=spec.sliding_window, total=r.total,
                     active=r.active, source=spec.source)


def preset_detail(spec):
    """`llmcalc presets NAME`: the spec as written, its source and the figures derived from it."""
    r = params(spec)
    kv = kv_cache(spec, Workload(batch=1, seq=1)) if spec.stack.sized else None  # not modelled: None
    unset = {"checkpoint"} if spec.checkpoint is None else set()  # a preset's checkpoint is bf16 unless it says
    elements = spec.n_layers * spec.attention.kv_elements() * spec.stack.decodes  # an encoder caches nothing
    return PresetReport(name=spec.name, source=spec.source, total=r.total, active=r.active,
                        kv_bytes_per_token=kv and kv.bytes_per_token,
                        kv_elements_per_token=elements if kv else None,
                        spec=spec.model_dump(mode="json", exclude={"name", "source"} | unset))
