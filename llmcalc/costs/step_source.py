"""A step's time as Python source: a cost form (llmcalc/costs/step.py: step_form, parts_form) under a
StepTime, written out once and compiled, so that evaluating it at a point costs a few float operations.

time = step_s + Σ_entries fixed + max(c, m) + overlap·min(c, m), c = (FLOPs + pad·row FLOPs) / rate and
m = bytes / bandwidth (comm entries: bytes / link); without CUDA graphs the sum is at least the host's launches
(StepTime.bounded). Entries linear in one variable alone sum to a convex
piecewise-linear function of it (each max switches sides once, where its two lines cross), kept as
breakpoints; the rest are written out term by term. sweep and the serving engine's step compile with it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Any

from llmcalc.costs.form import Lin, Whole, per, source
from llmcalc.costs.step import Cost, Form
from llmcalc.costs.step_time import StepTime
from llmcalc.model.time_model import overlap_split


def _alone(*costs: Lin | int) -> str | None:
    """The one variable an entry's FLOPs, bytes and row FLOPs are plain linear in ("1": none), or None."""
    forms = [x for x in costs if isinstance(x, Lin)]
    if not all(x.linear() for x in forms):
        return None
    variables = set().union(*(x.variables for x in forms))
    return "1" if not variables else variables.pop() if len(variables) == 1 else None


def _affine(x: Lin | int, variable: str) -> tuple[int, int]:
    """(intercept, slope) of a form linear in `variable` alone."""
    return (x.const, x.terms.get(variable, 0)) if isinstance(x, Lin) else (x, 0)


def _piecewise(lines: list[tuple]) -> tuple[list[float], list[tuple[float, float]]]:
    """Σ_lines max(c0 + c·x, m0 + m·x) (a comm line: m0 + m·x alone) for x ≥ 0 as sorted breakpoints and,
    per interval, the sum's (intercept, slope): each max switches sides at most once, where its lines cross."""
    cross = {(m0 - c0) / (c - m) for c0, c, m0, m, comm in lines if not comm and c != m}
    points = sorted(x for x in cross if x > 0)
    samples = [p / 2 if i == 0 else (points[i - 1] + p) / 2 for i, p in enumerate(points)]
    samples.append(points[-1] + 1 if points else 1.0)
    pieces = []
    for x in samples:
        a = b = 0.0
        for c0, c, m0, m, comm in lines:
            if not comm and c0 + c * x > m0 + m * x:
                a, b = a + c0, b + c
            else:
                a, b = a + m0, b + m
        pieces.append((a, b))
    return points, pieces


def time_source(label: str, form: Form, st: StepTime, names: dict[str, str], counts: list[int],
            namespace: dict[str, Any], host: float | None = None) -> list[str]:
    """Lines computing `label` = Σ over the form's entries of StepTime.time (max(c, m) + overlap·min(c, m) + the
    entry's fixed cost; comm entries: bytes / link + fixed), at least the host's launches without CUDA graphs,
    + the step's host cost (StepTime.bounded), c and m computed once.
    Entries of layer groups with equal per-layer costs merge (their times add); those linear in one variable
    alone (T, or R) sum to a convex piecewise-linear function of it, kept as breakpoints and looked up; the
    rest are written out, the whole costs they share (the experts hit) computed once. `names` writes each
    variable as an expression; `counts` are the layers of each layer group; `namespace` receives the objects
    the lines use (compile them with it); `host`: the host's floor in place of st.host_s (a step that runs two
    paths' kernels)."""
    namespace["bisect_right"] = bisect_right
    layers: dict[tuple, int] = defaultdict(int)
    host = st.host_s if host is None else host  # without CUDA graphs: at least the host's launches (bounded)
    fixed = 0.0 if host else st.step_s
    for key, (f, b, r) in form.items():
        n = 1 if key.group is None else counts[key.group]
        comm = key.collective
        rate = 0.0 if comm else st.rate(key)
        busiest = st.busiest.get(key, 1.0)
        layers[(key.name if comm else None, rate, busiest, per(f, n), per(b, n), per(r, n) if st.pad else 0)] += n
        fixed += st.times(key, Cost(0, 0, 0))[3]
    k = st.overlap
    by_variable: dict[str, list] = defaultdict(list)
    terms, lines = [repr(fixed)] if fixed else [], []
    names = dict(names)  # whole costs (experts hit) that several entries share: computed once, into locals
    shared = (a for key in layers for x in key[3:] if isinstance(x, Lin) for a in x.terms if isinstance(a, Whole))
    for x in dict.fromkeys(shared):
        names[x] = f"{label}_w{len(lines)}"
        lines.append(f"    {names[x]} = {x.source(names, namespace)}")
    for (op, rate, busiest, f, b, r), n in layers.items():
        comm = op is not None
        fc, bc = (0.0, n / st.link(op)) if comm else (n / rate, n / st.bytes)
        ff = fc * busiest  # the FLOPs are the busiest expert-parallel rank's (StepTime.times); its pad rows are not
        alone = _alone(f, b, r)
        if alone is not None:
            (f0, f1), (b0, b1), (r0, r1) = (_affine(x, alone) for x in (f, b, r))
            if comm:
                by_variable[alone].append((0.0, 0.0, b0 * bc, b1 * bc, True))
                continue
            c0, c1, m0, m1 = f0 * ff + st.pad * r0 * fc, f1 * ff + st.pad * r1 * fc, b0 * bc, b1 * bc
            on_max, on_sum = overlap_split(k)
            by_variable[alone].append((on_max * c0, on_max * c1, on_max * m0, on_max * m1, False))
            if on_sum:
                by_variable[alone].append((0.0, 0.0, on_sum * (c0 + m0), on_sum * (c1 + m1), True))
            continue
        m = _scaled(b, bc, names, namespace)
        if comm:
            terms.append(m)
            continue
        c = _scaled(f, ff, names, namespace)
        if r:
            c = f"{c} + {_scaled(r, st.pad * fc, names, namespace)}"
        c_, m_ = f"{label}_c{len(terms)}", f"{label}_m{len(terms)}"
        lines += [f"    {c_} = {c}", f"    {m_} = {m}"]  # time_model.overlapped written out, each term once
        terms.append(f"({c_} + {k!r}*{m_} if {c_} > {m_} else {m_} + {k!r}*{c_})" if k else
                     f"({c_} if {c_} > {m_} else {m_})")
    parts = []
    for variable, group in by_variable.items():
        i = len(namespace)
        namespace[f"_points{i}"], namespace[f"_pieces{i}"] = _piecewise(group)
        lines += [f"    x = {names[variable] if variable != '1' else 0}",
                  f"    a, b = _pieces{i}[bisect_right(_points{i}, x)]", f"    {label}{i} = a + b * x"]
        parts.append(f"{label}{i}")
    total = ' + '.join(parts + terms) or '0.0'
    if host:
        return lines + [f"    {label} = max({total}, {host!r}) + {st.step_s!r}"]
    return lines + [f"    {label} = {total}"]


def _scaled(x: Lin | int, scale: float, names: dict[str, str], namespace: dict[str, Any]) -> str:
    """x · scale as an expression: a plain linear form with its coefficients scaled (floats), else the
    exact int expression times scale."""
    if isinstance(x, Lin) and x.linear():
        parts = [f"{k * scale!r}*{names[a]}" for a, k in x.terms.items()]
        return " + ".join(parts + ([repr(x.const * scale)] if x.const else [])) or "0.0"
    return f"{source(x, names, namespace)} * {scale!r}"
