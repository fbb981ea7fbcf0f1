"""A time-model profile refitted to real serving-benchmark runs (`llmcalc calibrate --from-runs`): pure Python, the
runs' predictions made by a function the caller gives (the serve simulation), so nothing here knows how.

What a run's figures can identify, and so the only terms refitted (the rest stay as the base profile has them):

  step_s              from the runs' mean time per output token (TPOT, or ITL where the client records that):
                      every decode step carries it once, so at a steady batch the TPOT moves one for one with it.
                      At concurrency 1 a decode step reads the weights once (memory-bound) and runs a fixed set of
                      kernels, so memory_efficiency, kernel_s and step_s move the TPOT of one model together; the
                      runs of one model cannot split them, and the per-step fixed cost takes what they share.
  compute_efficiency  from the runs' mean time to first token (TTFT), with step_s as fitted: a prompt's step adds
                      its compute (FLOPs over the peak times the efficiency) to what a decode step costs. Only where
                      the prompt steps are compute-bound under the base profile: the TTFT must move at least
                      MIN_ELASTICITY % per 1 % of the efficiency's reciprocal. Below that the prompts are memory-bound
                      and their TTFT gap is not the efficiency's (a per-request host cost, say: tokenising, the
                      server's own path); fitting it there would make a memory-bound step look compute-bound, so it
                      is left as it was and the fit says so.
  request_s           from the same mean TTFT where the prompt steps are memory-bound (the case above): the host's
                      seconds per request before its first step, which every TTFT carries once. One TTFT identifies
                      one of the two, by that rule, never both.

  Left as they were: memory_efficiency, kernel_s and overlap (not separable from step_s by these runs, above);
  matmul_pad_rows (small-M waste, one batch shape per run); attention_efficiency, fp8_efficiency and
  block_fp8_efficiency (no separate attention or fp8 timing in a client's figures); comm_efficiency and
  collective_s (identified only by runs of several layouts of one model).

The terms are solved together (each moves both metrics: step_s every step, compute_efficiency a decode's small
compute too) by Newton's method on each term's mean log ratio predicted / measured over the runs that record its
metric, compute_efficiency through its reciprocal (which a compute-bound time is linear in), within the terms'
bounds (llmcalc/model/time_model.py: BOUNDS). A leave-one-out refits on all runs but one and
predicts that one: the error a new run of the same GPU and engine would see.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from llmcalc.model.time_model import BOUNDS, TimeModel

TERMS = (("step_s", ("tpot", "itl")), ("compute_efficiency", ("ttft",)), ("request_s", ("ttft",)))
"""The terms refitted, in the order they are solved, each with the metrics (means) that identify it; the TTFT
identifies compute_efficiency or request_s (the module's docstring), not both."""
LEFT = {"memory_efficiency": "moves a concurrency-1 TPOT together with step_s; one model's runs cannot split them",
        "kernel_s": "a fixed number of kernels per step: moves with step_s",
        "overlap": "needs steps near the ridge point, which a client's figures do not isolate",
        "matmul_pad_rows": "needs matmuls of several batch sizes timed apart",
        "attention_efficiency": "no separate attention timing in a client's figures",
        "fp8_efficiency": "no separate fp8 timing in a client's figures",
        "block_fp8_efficiency": "no separate timing of block-scaled fp8 matmuls in a client's figures",
        "comm_efficiency": "needs runs of several layouts of one model",
        "collective_s": "needs runs of several layouts of one model"}
"""The terms left as they were, and why."""
ITERATIONS = 8
TOLERANCE = 1e-3
"""Newton steps at most, and the largest |mean log ratio| at which the solve stops."""
MIN_EFFICIENCY = 0.01
MIN_ELASTICITY = 0.5
"""The least d log TTFT / d log(1 / compute_efficiency), at the base profile, at which the runs identify
compute_efficiency: half the prompt steps' time in their compute."""
ELASTICITY_STEP = 0.05
"""The relative step of the efficiency's reciprocal over which that slope is taken."""


@dataclass(frozen=True)
class RunFigures:
    """A run's measured means (seconds) by metric: ttft, tpot, itl."""

    name: str
    measured: dict[str, float]


@dataclass(frozen=True)
class TermFit:
    name: str
    before: float
    after: float
    runs: int
    """Runs whose figures it was solved on; 0: left as it was (no run records its metric, or no effect)."""
    note: str


@dataclass(frozen=True)
class HeldOut:
    """One run predicted by the profile fitted on the others: predicted / measured per metric, under the base
    profile and under the refit."""

    name: str
    before: dict[str, float]
    after: dict[str, float]


Predict = Callable[[TimeModel, RunFigures], dict[str, float]]
"""The predicted means (ttft, tpot: seconds) of a run under a time model."""


def _with(tm: TimeModel, name: str, value: float) -> TimeModel:
    return TimeModel.model_validate(tm.model_dump() | {name: value})


def _gaps(tm: TimeModel, runs: list[RunFigures], predict: Predict) -> dict[str, float]:
    """Each term's mean log(predicted / measured) of its metrics over the runs that record one (a run's first
    metric found); a term no run informs is absent."""
    logs: dict[str, list[float]] = {}
    for run in runs:
        p = None
        for name, metrics in TERMS:
            metric = next((m for m in metrics if run.measured.get(m, 0) > 0), None)
            if metric is not None:
                p = p or predict(tm, run)
                predicted = p["tpot" if metric == "itl" else metric]
                if predicted > 0:  # a run of one output token has no time per output token to predict
                    logs.setdefault(name, []).append(math.log(predicted / run.measured[metric]))
    return {name: sum(v) / len(v) for name, v in logs.items()}


def _to_x(name: str, value: float) -> float:
    """A term as the variable it is solved in: compute_efficiency as its reciprocal."""
    return 1 / value if name == "compute_efficiency" else value


def _bounds(name: str) -> tuple[float, float]:
    if name == "compute_efficiency":
        return 1 / BOUNDS[name][1], 1 / MIN_EFFICIENCY
    return BOUNDS[name][0], BOUNDS[name][1] * 0.999


def _at(base: TimeModel, x: dict[str, float]) -> TimeModel:
    return TimeModel.model_validate(base.model_dump() | {n: 1 / v if n == "compute_efficiency" else v
                                                         for n, v in x.items()})


def _step(name: str, x: float) -> float:
    return max(1e-4, 0.05 * x) if name in ("step_s", "request_s") else 0.05 * x


def fit_runs(runs: list[RunFigures], base: TimeModel, predict: Predict) -> tuple[TimeModel, list[TermFit]]:
    """`base` with the terms the runs identify (TERMS) refitted to them, solved together (Newton's method with a
    forward-difference Jacobian, each step held within the terms' bounds); each term's value before and after."""
    g = _gaps(base, runs, predict)
    names = [n for n, _ in TERMS if n in g]
    x = {n: _to_x(n, getattr(base, n)) for n in names}
    flat: set[str] = set()
    other: dict[str, str] = {}  # a term the TTFT does not identify here, and why
    if "compute_efficiency" in g:  # compute-bound prompt steps: the efficiency; memory-bound: the host's request_s
        n, up = "compute_efficiency", x["compute_efficiency"] * (1 + ELASTICITY_STEP)
        slope = (_gaps(_at(base, x | {n: up}), runs, predict)[n] - g[n]) / math.log1p(ELASTICITY_STEP)
        if slope < MIN_ELASTICITY:
            other[n] = (f"left as it was: the runs' prompt steps are not compute-bound (their TTFT moves {slope:.2f} % "
                        f"per 1 % of its reciprocal, under {MIN_ELASTICITY}); their TTFT fits request_s")
        else:
            other["request_s"] = (f"left as it was: the runs' prompt steps are compute-bound (their TTFT moves "
                                  f"{slope:.2f} % per 1 % of compute_efficiency's reciprocal); their TTFT fits that")
        flat |= set(other)
    for _ in range(ITERATIONS):
        live = [n for n in names if n not in flat]
        if not live or max(abs(g[n]) for n in live) < TOLERANCE:
            break
        cols = {}
        for n in live:  # forward differences, stepping inward from an upper bound
            lo, hi = _bounds(n)
            h = _step(n, x[n]) * (-1 if x[n] + _step(n, x[n]) > hi else 1)
            moved = _gaps(_at(base, x | {n: x[n] + h}), runs, predict)
            cols[n] = {m: (moved[m] - g[m]) / h for m in live}
            if all(v == 0 for v in cols[n].values()):
                flat.add(n)  # the figures do not depend on it
        live = [n for n in live if n not in flat]
        if not live:
            break
        dx = _newton([[cols[c][r] for c in live] for r in live], [-g[r] for r in live])
        if dx is None:
            break
        for n, d in zip(live, dx):
            lo, hi = _bounds(n)
            x[n] = min(hi, max(lo, x[n] + d))
        g = _gaps(_at(base, x), runs, predict)
    tm = _at(base, {n: v for n, v in x.items() if n not in flat})
    fits = []
    for name, metrics in TERMS:
        n = sum(1 for r in runs if any(r.measured.get(m, 0) > 0 for m in metrics))
        if not n:
            note = f"left as it was: no run records {' or '.join(m.upper() for m in metrics)}"
        elif name not in x:
            note, n = (f"left as it was: the runs record {' or '.join(m.upper() for m in metrics)} but their requests "
                       "predict none (one output token each: no time per output token)"), 0
        elif name in other:
            note, n = other[name], 0
        elif name in flat:
            note, n = "left as it was: the runs' figures do not depend on it", 0
        else:
            lo, hi = _bounds(name)
            edge = " (held at its bound)" if x[name] in (lo, hi) else ""
            note = f"fitted to the mean {' / '.join(m.upper() for m in metrics)} of {n} run(s){edge}"
        fits.append(TermFit(name, getattr(base, name), getattr(tm, name), n, note))
    return tm, fits


def _newton(a: list[list[float]], b: list[float]) -> list[float] | None:
    """x of a·x = b for a 1×1 or 2×2 `a`; None where it is singular."""
    if len(b) == 1:
        return [b[0] / a[0][0]] if a[0][0] else None
    det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
    if not det:
        return None
    return [(b[0] * a[1][1] - a[0][1] * b[1]) / det, (a[0][0] * b[1] - b[0] * a[1][0]) / det]


MAX_FOLDS = 10
"""The refits the check of a fit makes: leave-one-out up to this many runs; past it the runs are dealt into this
many folds (run i into fold i mod MAX_FOLDS), so that the check's work grows with the runs, not with their square
(200 runs took 46 s one by one)."""


def held_out(runs: list[RunFigures], base: TimeModel, predict: Predict) -> list[HeldOut]:
    """Each run predicted by the refit on the runs of the other folds (fold_name: leave-one-out up to MAX_FOLDS
    runs); none for fewer than 2 runs."""
    if len(runs) < 2:
        return []
    folds = min(len(runs), MAX_FOLDS)
    refits = [fit_runs([r for j, r in enumerate(runs) if j % folds != k], base, predict)[0] for k in range(folds)]
    out = []
    for i, run in enumerate(runs):
        tm = refits[i % folds]
        ratios = {}
        for label, model in (("before", base), ("after", tm)):
            p = predict(model, run)
            ratios[label] = {m: p["tpot" if m == "itl" else m] / v for m, v in run.measured.items() if v > 0}
        out.append(HeldOut(run.name, ratios["before"], ratios["after"]))
    return out


def fold_name(runs: int) -> str:
    """How held_out holds runs out: leave-one-out, or k-fold past MAX_FOLDS runs."""
    return "leave-one-out" if runs <= MAX_FOLDS else f"{MAX_FOLDS}-fold"
