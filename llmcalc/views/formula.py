"""Formulas as text that is also evaluated, for `llmcalc explain` (see llmcalc/views/explain.py).

Each step's value is its formula evaluated over its symbols (`evaluate`: integers, · × + − / //,
parentheses, min, max), so the arithmetic shown is the arithmetic done. Symbols take their values
from the spec and workload; a few come from another estimator and the legend says which. The variants
write their own terms (llmcalc/model/terms.py) and give their own symbols (explain_symbols, explain_legend).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping

from llmcalc.model.attention import Attention
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.explain import ExplainStep, ExplainTotal

Number = int | float
LEGEND = {
    "L": "layers the row covers (next to L_w: the full-attention ones)", "L_w": "sliding-window layers",
    "W": "attention window (tokens)", "d": "d_model", "V": "vocabulary", "H": "query heads",
    "H_kv": "key/value heads", "h": "head dim", "S_max": "max_seq_len (learned positions)",
    "n_norm": "norms per layer", "r_q": "MLA q_lora_rank", "r_kv": "MLA kv_lora_rank (the cached latent)",
    "d_n": "MLA qk_nope_head_dim", "d_r": "MLA qk_rope_head_dim", "d_v": "MLA v_head_dim",
    "f": "FFN width (MoE: one routed expert's)", "E": "routed experts", "k": "experts per token (top_k)",
    "Z": "zero-computation experts in the router's pool (LongCat-Flash)",
    "n_s": "shared experts", "f_s": "shared expert width", "B": "batch (sequences)",
    "S": "tokens per sequence (prompt / context)", "bytes": "bytes per element", "bits": "bits per element",
    "a": "activation bytes per element", "N": "parameters (`llmcalc params` total)",
    "N_m": "weights of the matrices stored quantized",
    "W_q": "their bytes in their formats: codes, scales, zero points, indices (docs/formats.md)",
    "m": "bytes per token of the largest layer stage beyond the residual and the normed input "
         "(docs/formulas.md#inference-peak)",
    "d_rot": "features RoPE rotates per head (0 without RoPE)",
    "master": "fp32 master copy, bytes per parameter", "states": "optimizer state bytes per parameter",
    "F": "the op's FLOPs on one GPU (`llmcalc latency` ops)", "M": "the op's bytes on one GPU (`llmcalc latency` ops)",
    "F_i": "FLOPs of the op in layer type i (`llmcalc params` layer types)", "M_i": "bytes of the op in layer type i",
    "P": "peak FLOP/s", "BW": "memory bytes/s", "link": "one-way link bytes/s", "e_c": "compute efficiency",
    "e_m": "memory efficiency", "e_x": "communication efficiency", "ttft": "time to first token (Σ prefill/*)",
    "P_a": "peak FLOP/s at the attention core's dtype", "e_a": "attention-core efficiency",
    "e_o": "share of the smaller of an op's compute and memory time it does not overlap (the time model's overlap)",
    "O": "the op's fixed cost: its kernels (or collective calls) × their cost in the time model",
    "t_step": "the host's cost per forward step (the time model's step_s)",
    "b": "the busiest expert-parallel rank's routed tokens over the mean rank's (docs/moe.md#expert-parallel-load)",
    "t_decode": "the G − 1 decode steps (contexts S … S+G−2) summed in closed form (`llmcalc latency` decode_s)",
}
"""Symbols of the spec, the workload and the estimators, and those the GQA, MLA and FFN families share; a
variant's own are its explain_legend."""


# ---- formulas ---------------------------------------------------------------------------------

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv}
_FUNCS = {"min": min, "max": max}
_NAME = re.compile(r"[A-Za-z_]\w*")


def evaluate(formula: str, symbols: Mapping[str, Number]) -> Number:
    """The value of `formula` with `symbols` substituted; anything but arithmetic is refused."""

    def ev(node: ast.AST) -> Number:
        match node:
            case ast.BinOp(left=left, op=op, right=right) if type(op) in _OPS:
                return _OPS[type(op)](ev(left), ev(right))
            case ast.Constant(value=v) if type(v) in (int, float):
                return v
            case ast.Name(id=name):
                return symbols[name]
            case ast.Call(func=ast.Name(id=fn), args=args, keywords=[]) if fn in _FUNCS:
                return _FUNCS[fn](*map(ev, args))
        raise ValueError(f"not arithmetic: {ast.unparse(node)}")

    text = formula.replace("·", "*").replace("×", "*").replace("−", "-")
    return ev(ast.parse(text, mode="eval").body)


def _num(v: Number) -> str:
    return str(v) if isinstance(v, int) else f"{v:.6g}"


def step(component: str, formula: str, env: Mapping[str, Number], unit: str) -> ExplainStep:
    """One row: the symbols `formula` names (values from `env`), substituted and evaluated."""
    symbols = {n: env[n] for n in dict.fromkeys(_NAME.findall(formula)) if n not in _FUNCS}
    shown = _NAME.sub(lambda m: m[0] if m[0] in _FUNCS else _num(symbols[m[0]]), formula)
    return ExplainStep(component=component, formula=formula, symbols=symbols, substituted=shown,
                       value=evaluate(formula, symbols), unit=unit)


def sum_total(name: str, steps: list[ExplainStep], prefix: str, check: Number, source: str) -> ExplainTotal:
    """Σ of the steps under `prefix` ('' for all), against the plain command's `source` figure."""
    values = [s.value for s in steps if s.component.startswith(prefix)]
    return checked(ExplainStep(component=name, formula=f"Σ {prefix}*" if prefix else "Σ steps", symbols={},
                               substituted=" + ".join(map(_num, values)), value=sum(values), unit=steps[0].unit),
                   check, source)


def checked(s: ExplainStep, check: Number, source: str) -> ExplainTotal:
    """`s` with the plain command's figure for it (`source`) and whether the two agree."""
    ok = s.value == check if isinstance(check, int) else math.isclose(s.value, check, rel_tol=1e-9)
    return ExplainTotal(**s.model_dump(), check=check, source=source, matches=ok)


# ---- symbols and layer groups ---------------------------------------------------------------------

def env_of(spec: ModelSpec, ffn=None) -> dict[str, Number]:
    """The spec's symbols, its attention's and its FFN's; `ffn` (a layer group's) sets the FFN ones."""
    ffn = ffn or spec.ffn
    env = {"d": spec.d_model, "V": spec.vocab_size, "S_max": spec.max_seq_len, "n_norm": spec.norm.per_layer}
    return env | spec.attention.explain_symbols() | ffn.explain_symbols() | spec.positions.explain_symbols()


def legend(spec: ModelSpec) -> dict[str, str]:
    """Every symbol's meaning: LEGEND, then the spec's variants' own."""
    mixers = {k: v for a, _ in mixer_groups(spec).values() for k, v in a.explain_legend.items()}
    return LEGEND | spec.attention.explain_legend | mixers | spec.ffn.explain_legend | spec.positions.explain_legend | (
        spec.vision.explain_legend if spec.vision else {}) | spec.stack.explain_legend


def ffn_groups(spec: ModelSpec) -> dict[str, tuple[int, object]]:
    """Component prefix → (layers, FFN): the MoE layers and an MoE model's dense layers apart (a hybrid's layers
    without an FFN in none)."""
    out: dict[str, tuple[int, object]] = {}
    for g in spec.layer_groups():
        if not g.ffn.explain_parts():  # no FFN (a hybrid's mixer-only layer, a Mamba-2 model): no rows
            continue
        prefix = spec.ffn_prefix(g)
        out[prefix] = (out.get(prefix, (0, g.ffn))[0] + g.count, g.ffn)
    return out


def mixer_groups(spec: ModelSpec) -> dict[str, tuple[Attention, dict[int | None, int]]]:
    """Component path → (mixer, its layers by window): every layer's attention in a uniform model; a hybrid's
    attention layers and each of its other mixers' (Mamba-2, Gated DeltaNet) apart, layers without a mixer in none."""
    out: dict[str, tuple[Attention, dict[int | None, int]]] = {}
    for g in spec.layer_groups():
        if g.mixer is not None:
            layers = out.setdefault(g.mixer_name, (g.mixer, {}))[1]
            layers[g.window] = layers.get(g.window, 0) + g.count
    return out


def mixer_env(spec: ModelSpec, mixer: Attention, layers: dict[int | None, int], kv_bits: int | None = None) -> dict:
    """The symbols of a mixer's rows: the spec's, the mixer's own (over any other mixer's of the same name) and
    L, its layers."""
    return env_of(spec) | mixer.explain_symbols(kv_bits) | {"L": sum(layers.values())}


def windows(spec: ModelSpec) -> dict[int | None, int]:
    """Attention window (None: full) → layers."""
    out: dict[int | None, int] = {}
    for g in spec.layer_groups():
        out[g.window] = out.get(g.window, 0) + g.count
    return out


def per_window(spec: ModelSpec, term: Callable[[str, bool], str], env: dict,
               layers: dict[int | None, int] | None = None) -> tuple[str, dict]:
    """Σ over window kinds of term(layers symbol, sliding): L for full layers, L_w and W for sliding (`layers`:
    one mixer's layers by window; default every layer's)."""
    terms, env = [], dict(env)
    for w, n in (windows(spec) if layers is None else layers).items():
        env |= {"L_w": n, "W": w} if w else {"L": n}
        terms.append(term("L_w" if w else "L", bool(w)))
    return " + ".join(terms), env
