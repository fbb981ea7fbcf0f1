"""Weight bytes: each component's parameters stored in its format. See docs/formats.md.

A component's matrices (d_in, d_out) in their format (llmcalc/model/formats.py: WeightFormat.matrix_bytes: codes,
scales, zero points, indices), its other parameters (biases, norms) in the dense dtype; a plain format stores every
parameter at its width. weights = Σ_layers Σ_components stored + the embedding, final norm and head.
"""

from __future__ import annotations

from llmcalc.costs.kv import nbytes
from llmcalc.costs.params import layer_parts, mtp_parts
from llmcalc.costs.params import params as count_params
from llmcalc.model.embedding import lm_head_params, token_embedding_params
from llmcalc.errors import UserError
from llmcalc.model.formats import COMPONENTS, WeightFormat, WeightFormats, component_of, weight_format
from llmcalc.model.spec import LayerGroup, ModelSpec, dtype_bytes


def stored_bytes(params: int, matrices: list[tuple[int, int]], fmt: WeightFormat, dense: str) -> int:
    """Bytes of one component's `params` parameters with its weight matrices (d_in, d_out) in `fmt`. A plain
    format (fp32, bf16, fp16) stores every parameter at its width; a quantised one stores each matrix as
    fmt.matrix_bytes counts it (codes, scales, zero points, indices: llmcalc/model/formats.py) and the rest of the
    component's parameters (biases, norms) in `dense`."""
    if not fmt.quantized:
        return nbytes(params, fmt.name)
    quantized = sum(d_in * d_out for d_in, d_out in matrices)
    return sum(fmt.matrix_bytes(d_in, d_out, dense) for d_in, d_out in matrices) + nbytes(params - quantized, dense)


def edge_parts(spec: ModelSpec) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    """The parameters outside the layers by component path, with their matrices: the token embedding (a row of d
    per token: d inputs, V outputs), learned positions, the final norm and the LM head (d → V; none when tied);
    an encoder's token-type table, embedding norm and pooler, kept in the dense dtype."""
    d, v = spec.d_model, spec.vocab_size
    head = lm_head_params(v, d, tied=spec.tie_embeddings, bias=spec.lm_head_bias)
    extra = spec.stack.embedding_params(d, spec.norm) | spec.stack.head_params(d) | spec.stack.extra_params(spec)
    return {"embedding/token": (token_embedding_params(spec.embedding_rows, d), [(d, spec.embedding_rows)]),
            "embedding/position": (spec.positions.params(spec.max_seq_len, d, spec.attention), []),
            "norms/final": (spec.norm.params(d) if spec.norm.final else 0, []),
            "lm_head": (head, [(d, v)] if head else [])} | {k: (n, []) for k, n in extra.items()}


def quantized_matrices(spec: ModelSpec, formats: WeightFormats) -> tuple[int, int]:
    """Over every matrix whose component `formats` quantises: their weights N_m and their bytes W_q in their
    formats (stored_bytes counts the model as W_q + dense · (N − N_m))."""
    d, weights, stored = spec.d_model, 0, 0
    comps = [(g.count, f"{g.mixer_name}/{k}", m) for g in spec.layer_groups() if g.mixer is not None
             for k, m in g.mixer.matrices(d).items()]
    comps += [(g.count, spec.ffn_prefix(g) + k, m) for g in spec.layer_groups() for k, m in g.ffn.matrices(d).items()]
    comps += [(1, k, m) for k, (_, m) in edge_parts(spec).items()]
    for count, path, mats in comps:
        fmt = formats.of(path)
        if fmt.quantized:
            weights += count * sum(i * o for i, o in mats)
            stored += count * sum(fmt.matrix_bytes(i, o, formats.dense) for i, o in mats)
    return weights, stored


def layer_weight_bytes(spec: ModelSpec, group: LayerGroup, formats: WeightFormats) -> dict[str, int]:
    """Stored bytes of one layer of `group` by component (all GPUs together): its mixer's (attention, or a
    hybrid's Mamba-2 layer) and FFN matrices in their components' formats (see stored_bytes), its norms as every
    non-matrix parameter. A format given for a component the model lacks is refused here, where every size of
    weights (the whole model's, a GPU's share) is read."""
    if formats.components:
        check_components(spec, formats)
    parts, _ = layer_parts(spec, group)
    d = spec.d_model
    mats = {f"{group.mixer_name}/{k}": v for k, v in group.mixer.matrices(d).items()} if group.mixer else {}
    mats |= {spec.ffn_prefix(group) + k: v for k, v in group.ffn.matrices(d).items()}
    return {k: stored_bytes(n, mats.get(k, []), formats.of(k), formats.dense) for k, n in parts.items()}


def tower_params(spec: ModelSpec) -> int:
    """Parameters of a vision-language model's image encoder and projector (`llmcalc params`' vision); 0 without."""
    return sum(spec.vision.params(spec.d_model).values()) if spec.vision else 0


def weights_bytes(spec: ModelSpec, formats: WeightFormats) -> tuple[int, str]:
    """Bytes of the model's weights (as `llmcalc params` counts them) stored in `formats`, and how. A vision tower
    and its projector are stored in the plain format, or, when the language model is quantised, in the dense dtype
    (quantisers of vision-language checkpoints leave the tower as it was)."""
    layers = sum(g.count * sum(layer_weight_bytes(spec, g, formats).values()) for g in spec.layer_groups())
    edges = sum(stored_bytes(n, m, formats.of(k), formats.dense) for k, (n, m) in edge_parts(spec).items())
    vision = tower_params(spec)
    if not formats.quantized:
        return (layers + edges + nbytes(vision, formats.default),
                f"{count_params(spec).total:,} params × {dtype_bytes(formats.default)} B")
    label = formats_label(spec, formats)
    label = label if formats.dense in label else f"{label}; other parameters {formats.dense}"
    return layers + edges + nbytes(vision, formats.dense), label + (f"; vision tower {formats.dense}" if vision else "")


def components(spec: ModelSpec) -> list[str]:
    """The components (COMPONENTS) `spec` has parameters in, in that order: those a per-component format can set."""
    paths = [k for g in spec.layer_groups() for k in layer_parts(spec, g)[0]]
    have = {component_of(p) for p in (*paths, *edge_parts(spec), *mtp_parts(spec)[0])}
    return [c for c in COMPONENTS if c in have]


def formats_label(spec: ModelSpec, formats: WeightFormats) -> str:
    """`formats` as the reports word them (WeightFormats.label), naming only the components `spec` has: a dense
    model's label lists no `mtp` or `router` that a checkpoint's formats set."""
    return formats.label_for(components(spec))


def quantised_label(spec: ModelSpec, formats: WeightFormats) -> str:
    """The formats of `formats` that quantise, in short: the default where it does (`fp8-block`,
    `gptq-int4-g128`), else the components of `spec` kept in one (`experts mxfp4`)."""
    if weight_format(formats.default).quantized:
        return formats.default
    by_format: dict[str, list[str]] = {}
    for comp in components(spec):
        name = formats.components.get(comp, formats.default)
        if weight_format(name).quantized:
            by_format.setdefault(name, []).append(comp)
    return "; ".join(f"{', '.join(c)} {n}" for n, c in by_format.items()) or formats.default


def check_components(spec: ModelSpec, formats: WeightFormats) -> None:
    """A format given for a component `spec` does not have (experts of a dense model) is refused: it would be shown
    and size nothing. One that keeps the dense dtype changes nothing and passes (a checkpoint's formats name
    every component a family may have: `mtp` bf16 on a model without MTP)."""
    have = components(spec)
    if missing := [c for c, name in formats.components.items() if c not in have and name != formats.dense]:
        raise UserError(f"`weights_format`: {spec.name} has no {missing[0]}; its components are {', '.join(have)} "
                        f"(drop {missing[0]}={formats.components[missing[0]]})")
