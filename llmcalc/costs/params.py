"""Parameter counts: total, active per token, and a per-component breakdown.

total = language + vision; language = V·d (token embedding) + positions + Σ_layers [attention (with a
position encoding's per-layer parameters) + FFN + norms] + final norm + LM head; an encoder adds its token-type
table, embedding norm and pooler (llmcalc/model/encoders.py) and has no LM head; vision = the image encoder and its
projector (llmcalc/model/vision.py, docs/vision.md).
Active per token subtracts, in every MoE layer, the (E − k) routed experts a token skips (the vision tower has none).
See docs/formulas.md#parameters.
"""

from __future__ import annotations

from collections import defaultdict

from llmcalc.model.embedding import lm_head_params, token_embedding_params
from llmcalc.model.spec import LayerGroup, ModelSpec
from llmcalc.reports.params import LayerTypeRow, ParamRow, ParamsReport

FORMULA = (
    "total = V·d + positions + Σ_layers(attention + ffn + norms) + final norm + LM head (0 if tied); "
    "active = total − Σ_MoE layers (E − top_k)·P_expert"
)


def layer_parts(spec: ModelSpec, group: LayerGroup) -> tuple[dict[str, int], dict[str, int]]:
    """Parameters of one layer of `group` by component path, and how many of them one token uses."""
    d, norm, attn = spec.d_model, spec.norm, group.mixer
    parts = {f"{group.mixer_name}/{k}": v for k, v in attn.params(d).items()} if attn else {}
    prefix = spec.ffn_prefix(group)
    parts |= {prefix + k: v for k, v in group.ffn.params(d).items()}
    parts |= {f"attention/{k}": v for k, v in spec.positions.layer_params(d, attn).items()}
    parts |= spec.stack.layer_params(spec)  # an encoder-decoder's cross-attention
    parts["norms/layer"] = norm.per_layer * norm.params(d)
    if attn and (qk := norm.qk_params(*attn.qk_norm_widths())):  # another mixer's apart, as explain writes them
        parts["norms/qk" if group.mixer_name == "attention" else f"norms/{group.mixer_name}_qk"] = qk
    active = dict(parts)
    for k, idle in group.ffn.inactive_parts(d).items():
        active[prefix + k] -= idle
    return parts, active


def mtp_parts(spec: ModelSpec) -> tuple[dict[str, int], dict[str, int]]:
    """One DeepSeek-V3 MTP module per `mtp_modules`: a decoder layer shaped like the last layer,
    two input norms, the 2d→d projection and an output norm; embedding and head are shared."""
    if not spec.mtp_modules:
        return {}, {}
    layer, layer_active = layer_parts(spec, spec.layer_groups()[-1])
    n, d = spec.mtp_modules, spec.d_model
    extra = {"mtp/projection": n * 2 * d * d, "mtp/norms": n * 3 * spec.norm.params(d)}
    parts = {f"mtp/layer/{k}": n * v for k, v in layer.items()} | extra
    active = {f"mtp/layer/{k}": n * v for k, v in layer_active.items()} | extra
    return parts, active


def params(spec: ModelSpec) -> ParamsReport:
    """Exact parameter counts of `spec` (ints), with the breakdown and layer types."""
    d, v = spec.d_model, spec.vocab_size
    emb = {"embedding/token": token_embedding_params(spec.embedding_rows, d)}
    if pos := spec.positions.params(spec.max_seq_len, d, spec.attention):
        emb["embedding/position"] = pos
    emb |= {k: n for k, n in spec.stack.embedding_params(d, spec.norm).items() if n}
    totals: dict[str, int] = defaultdict(int, emb)
    actives: dict[str, int] = defaultdict(int, emb)
    layer_rows = []
    for group in spec.layer_groups():
        parts, active = layer_parts(spec, group)
        for k in parts:
            totals[k] += group.count * parts[k]
            actives[k] += group.count * active[k]
        layer_rows.append(
            LayerTypeRow(
                layer_type=group.name,
                layers=group.count,
                params_per_layer=sum(parts.values()),
                active_per_layer=sum(active.values()),
            )
        )
    tail = {"norms/final": spec.norm.params(d) if spec.norm.final else 0}
    tail["lm_head"] = lm_head_params(v, d, tied=spec.tie_embeddings, bias=spec.lm_head_bias)
    tail |= spec.stack.head_params(d) | spec.stack.extra_params(spec)
    for k, n in tail.items():
        totals[k] += n
        actives[k] += n
    language = sum(totals.values())
    vision = spec.vision.params(d) if spec.vision else {}
    total, active = language + sum(vision.values()), sum(actives.values()) + sum(vision.values())
    mtp, mtp_active = mtp_parts(spec)
    embedding = sum(v for k, v in (emb | tail).items() if k.startswith("embedding/"))  # Gemma 3n's per-layer table
    return ParamsReport(
        model=spec.name,
        total=total,
        language=language,
        vision=sum(vision.values()),
        vision_breakdown=_rows(vision, vision, total),
        active=active,
        active_excluding_embedding=active - embedding,
        embedding=embedding,
        mtp=sum(mtp.values()),
        breakdown=_rows(totals, actives, total),
        mtp_breakdown=_rows(mtp, mtp_active, total),
        layer_types=layer_rows,
        formula=FORMULA + ("; + vision tower and projector (docs/vision.md)" if spec.vision else ""),
        notes=_notes(spec) + [f"total without {k} (a table beside the token embedding, looked up per token): "
                              f"{total - n:,}" for k, n in tail.items() if k.startswith("embedding/") and n],
    )


_ORDER = ("embedding", "attention", "cross_attention", "ffn", "norms", "lm_head", "encoder")


def _rows(totals: dict[str, int], actives: dict[str, int], total: int) -> list[ParamRow]:
    """Rows grouped embedding → attention → ffn → norms → head (first-seen order within a group)."""

    def group(key: str) -> int:
        head = key.removeprefix("mtp/layer/").split("/")[0]
        return _ORDER.index(head) if head in _ORDER else len(_ORDER)

    keys = sorted(totals, key=group)
    return [
        ParamRow(component=k, params=totals[k], active=actives[k], percent=round(100 * totals[k] / total, 4))
        for k in keys
        if totals[k] or k == "lm_head"
    ]


def _notes(spec: ModelSpec) -> list[str]:
    notes = [n for n in (spec.stack.params_note(),) if n]
    if spec.tie_embeddings and spec.stack.lm_head:
        notes.append("LM head tied to the token embedding: its matrix is counted once, under embedding/token.")
    if spec.mtp_modules:
        notes.append(
            "MTP modules are excluded from total and active; they share the embedding and LM head "
            "(a checkpoint that stores copies of both adds 2·V·d per module)."
        )
    if spec.vision:
        notes.append(f"vision tower ({spec.vision.label}) and projector: {spec.vision.n_layers} encoder layers run "
                     "once per image; all of them are active (no routing)")
    return notes
