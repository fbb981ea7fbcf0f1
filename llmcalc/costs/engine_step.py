"""Time of one step of a continuous-batching engine on one replica: the prefill chunks and decode tokens it
runs together, under a time model. See docs/serving.md.

A serving engine (vLLM, SGLang, TensorRT-LLM) runs one forward per step over every token it scheduled: some
sequences' prompt chunks (n new tokens after c cached ones) and the other sequences' next tokens. The step's
cost is latency's cost form (llmcalc/costs/latency.py: parts_form) with a "chunk" part and a "decode" part,
whose variables are sums over the step's sequences:

  T = Σ tokens, R = sequences of the part, and per layer window Σ_sequences each attention count
  (pairs, keys, …: the variant's chunk_counts(n, c, W) or counts(1, c, W)),

so the weights are read once per step while attention costs what each sequence's context costs. The time is
StepTime's: Σ_ops max(c, m) + overlap·min(c, m) + fixed + step_s. A step of decode tokens alone is exactly
`llmcalc latency`'s decode step at those contexts; a step of one whole prompt, its prefill.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llmcalc.costs.form import Lin, value
from llmcalc.costs.latency import Cost, StepTime, parts_form
from llmcalc.costs.step_source import time_source
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import TimeModel
from llmcalc.workload import Workload

MIXED = {"chunk": ":p", "decode": ":d"}
"""The variable suffixes of a step that runs prefill chunks and decode tokens together."""


class EngineStep:
    """Seconds of an engine step on one replica of the workload's layout: `time(chunks, contexts)` for
    prefill chunks (new, context) and decode sequences at their contexts. Build once per (model, GPU,
    workload, time model); a decode sequence's counts are kept per context."""

    def __init__(self, spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel):
        self.spec, self.attn = spec, spec.attention
        self.windows = list(dict.fromkeys(g.window for g in spec.layer_groups()))
        self.forms = {"chunk": parts_form(spec, w, {"chunk": ""}), "decode": parts_form(spec, w, {"decode": ""}),
                      "mixed": parts_form(spec, w, MIXED)}
        chunk, decode = StepTime(spec, gpu, w, tm, prefill=True), StepTime(spec, gpu, w, tm, prefill=False)
        # a mixed step launches the chunk's kernels (a decode part's own, MLA's absorbed matmuls, are not added)
        clocks = {"chunk": chunk, "decode": decode, "mixed": chunk}
        layers = [g.count for g in spec.layer_groups()]
        self.clocks = {kind: _compiled(spec.name, form, clocks[kind], layers) for kind, form in self.forms.items()}
        self._decode: list[dict[int, dict[str, int]]] = [{} for _ in self.windows]

    def chunk_vars(self, chunks: Sequence[tuple[int, int]], tag: str = "") -> dict[str, int]:
        """Variables of the chunk part: T, R and Σ chunk_counts per window."""
        env = {"T" + tag: sum(n for n, _ in chunks), "R" + tag: len(chunks)}
        for w in self.windows:
            for n, c in chunks:
                for k, v in self.attn.chunk_counts(n, c, w).items():
                    name = f"{k}@{w}{tag}"
                    env[name] = env.get(name, 0) + v
        return env

    def decode_vars(self, contexts: Sequence[int], tag: str = "") -> dict[str, int]:
        """Variables of the decode part: T = R = sequences, and Σ counts(1, c, W) per window."""
        env = {"T" + tag: len(contexts), "R" + tag: len(contexts)}
        for w, seen in zip(self.windows, self._decode):
            sums: dict[str, int] = {}
            for c in contexts:
                counts = seen.get(c)
                if counts is None:
                    counts = seen[c] = self.attn.counts(1, c, w)
                for k, v in counts.items():
                    sums[k] = sums.get(k, 0) + v
            env |= {f"{k}@{w}{tag}": v for k, v in sums.items()}
        return env

    def vars(self, chunks: Sequence[tuple[int, int]], contexts: Sequence[int]) -> tuple[str, dict[str, int]]:
        """Which form the step is ("chunk", "decode" or "mixed") and its variables."""
        if chunks and contexts:
            env = self.chunk_vars(chunks, MIXED["chunk"]) | self.decode_vars(contexts, MIXED["decode"])
            env["T"] = env["T:p"] + env["T:d"]
            return "mixed", env
        return ("chunk", self.chunk_vars(chunks)) if chunks else ("decode", self.decode_vars(contexts))

    def costs(self, chunks: Sequence[tuple[int, int]], contexts: Sequence[int]) -> tuple[str, dict[tuple, Cost]]:
        """Which form the step is and its per-GPU [FLOPs, bytes, row FLOPs] by entry."""
        kind, env = self.vars(chunks, contexts)
        return kind, {k: [value(c, env) for c in cost] for k, cost in self.forms[kind].items()}

    def time(self, chunks: Sequence[tuple[int, int]], contexts: Sequence[int]) -> float:
        """Seconds of one step: Σ over its entries of StepTime.time, plus step_s (compiled: step_source)."""
        if not chunks and not contexts:
            return 0.0
        kind, env = self.vars(chunks, contexts)
        return self.clocks[kind](env)


def _compiled(name: str, form: dict[tuple, Cost], st: StepTime, layers: list[int]) -> Callable[[dict], float]:
    """The step's time under `st` as a function of its variables (a dict), compiled once (time_source)."""
    namespace: dict[str, Any] = {}
    variables = set().union(*(c.variables for cost in form.values() for c in cost if isinstance(c, Lin)))
    names = {v: f"env[{v!r}]" for v in variables}
    lines = ["def step(env):", *time_source("t", form, st, names, layers, namespace), "    return t"]
    exec(compile("\n".join(lines) + "\n", f"<engine step of {name}>", "exec"), namespace)  # noqa: S102 - built above
    return namespace["step"]
