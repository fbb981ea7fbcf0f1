"""Time of one step of a continuous-batching engine on one replica: the prefill chunks, decode tokens and
speculative verify tokens it runs together, under a time model. See docs/serving.md.

A serving engine (vLLM, SGLang, TensorRT-LLM) runs one forward per step over every token it scheduled: some
sequences' prompt chunks (n new tokens after c cached ones), the others' next tokens, or under speculative
decoding their 1 + k draft tokens to verify. The step's cost is latency's cost form (llmcalc/costs/step.py:
parts_form) with one part per kind present, whose variables are sums over the step's sequences:

  T = Σ tokens (all parts), and per part: its tokens, its sequences R and per layer window Σ_sequences each
  attention count (pairs, keys, …: the variant's chunk_counts(n, c, W), or counts(n, c, W)),

so the weights are read once per step while attention costs what each sequence's context costs. The time is
StepTime's: Σ_ops max(c, m) + overlap·min(c, m) + fixed (at least the host's launches without CUDA graphs)
+ step_s, compiled once per set of parts
(llmcalc/costs/step_source.py). A step of decode tokens alone is exactly `llmcalc latency`'s decode step at
those contexts; a step of whole prompts, its prefill.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from llmcalc.costs.form import Lin, per
from llmcalc.costs.step import Cost, Form, count_scopes, distances, parts_form
from llmcalc.costs.step_time import StepTime
from llmcalc.costs.step_source import time_source
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import TimeModel
from llmcalc.workload import Workload

TAGS = {"chunk": ":p", "decode": ":d", "verify": ":v"}
"""The suffix of each part's variables."""


class EngineStep:
    """Seconds of an engine step on one replica of the workload's layout: `time(chunks, contexts, verifies)` for
    prefill chunks (new, context), decode sequences at their contexts and verify steps (new, context). Build once
    per (model, GPU, workload, time model); a decode sequence's counts are kept per context. `mtp`: the step of
    one multi-token-prediction module instead (DeepSeek-V3): one layer of the model's last kind, the embedding
    and the head (its 2d → d projection is left out: 2·d² weights against a layer's)."""

    def __init__(self, spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, mtp: bool = False):
        self.spec, self.w, self.mtp = spec, w, mtp
        self.request_s = tm.request_s  # the host's seconds per request before its first step (TimeModel)
        self.scopes = list(count_scopes(spec).items())  # (scope, (mixer, window)) of each mixer and window
        self.relative = bool(spec.positions.matmul_names)  # a relative encoding's D per scope (step.distances)
        self.step_times = {prefill: StepTime(spec, gpu, w, tm, prefill=prefill) for prefill in (True, False)}
        self.layers = [g.count for g in spec.layer_groups()]
        if mtp:
            last = len(self.layers) - 1
            for st in self.step_times.values():  # one layer's kernels
                st.fixed = {k: v / self.layers[last] if k.group == last else v for k, v in st.fixed.items()}
                st.launches = {k: n / self.layers[last] if k.group == last else n for k, n in st.launches.items()
                               if k.group in (None, last) and not k.collective}
        self.clocks: dict[tuple[str, ...], Callable[[dict], float]] = {}
        self._decode: list[dict[int, dict[str, int]]] = [{} for _ in self.scopes]

    def form(self, parts: tuple[str, ...]) -> Form:
        """The step's cost form with these parts (parts_form), for mtp one module's entries."""
        form = parts_form(self.spec, self.w, {p: TAGS[p] for p in parts})
        if not self.mtp:
            return form
        last = len(self.layers) - 1
        return {k: c if k.group is None else Cost(*(per(x, self.layers[last]) for x in c)) for k, c in form.items()
                if k.group in (None, last) and not k.collective}

    def clock(self, parts: tuple[str, ...]) -> Callable[[dict], float]:
        """The compiled time of a step with these parts (built on first use). A step with a chunk launches the
        chunk's kernels (MLA's absorbed decode matmuls are not added to them)."""
        fn = self.clocks.get(parts)
        if fn is None:
            layers = list(self.layers)
            if self.mtp:
                layers[-1] = 1
            st = self.step_times["chunk" in parts]
            # a prompt chunk beside decode or verify tokens runs both paths' kernels (MLA's absorbed decode beside
            # its prefill): the host launches at least the more numerous
            host = max(t.host_s for t in self.step_times.values()) if "chunk" in parts and len(parts) > 1 else None
            fn = self.clocks[parts] = _compiled(self.spec.name, self.form(parts), st, layers, host)
        return fn

    def part_vars(self, part: str, seqs: Sequence[tuple[int, int]]) -> dict[str, int]:
        """Variables of a chunk or verify part over (new, context) sequences: its T, R and Σ counts per window."""
        tag = TAGS[part]
        env = {"T" + tag: sum(n for n, _ in seqs), "R" + tag: len(seqs)}
        for scope, (attn, w) in self.scopes:
            counts = attn.chunk_counts if part == "chunk" else attn.counts
            for n, c in seqs:
                for k, v in counts(n, c, w).items():
                    name = f"{k}@{scope}{tag}"
                    env[name] = env.get(name, 0) + v
            if self.relative:
                env[f"D@{scope}{tag}"] = max(distances(attn, n, c, w) for n, c in seqs)
        return env

    def decode_vars(self, contexts: Sequence[int]) -> dict[str, int]:
        """Variables of the decode part: T = R = sequences, and Σ counts(1, c, W) per window."""
        tag = TAGS["decode"]
        env = {"T" + tag: len(contexts), "R" + tag: len(contexts)}
        for (scope, (attn, w)), seen in zip(self.scopes, self._decode):
            sums: dict[str, int] = {}
            for c in contexts:
                counts = seen.get(c)
                if counts is None:
                    counts = seen[c] = attn.counts(1, c, w)
                for k, v in counts.items():
                    sums[k] = sums.get(k, 0) + v
            env |= {f"{k}@{scope}{tag}": v for k, v in sums.items()}
            if self.relative:
                env[f"D@{scope}{tag}"] = distances(attn, 1, max(contexts), w)
        return env

    def decode_time(self, batch: int, context: int, chunk: int = 0) -> float:
        """Seconds of a decode step of `batch` sequences all at `context`, with a first prompt chunk of `chunk`
        tokens beside them when given (O(1) in the batch; latency's decode step when chunk is 0)."""
        tag = TAGS["decode"]
        env = {"T": batch + chunk, "T" + tag: batch, "R" + tag: batch}
        for scope, (attn, w) in self.scopes:
            env |= {f"{k}@{scope}{tag}": batch * v for k, v in attn.counts(1, context, w).items()}
            if self.relative:
                env[f"D@{scope}{tag}"] = distances(attn, 1, context, w)
        if not chunk:
            return self.clock(("decode",))(env)
        return self.clock(("chunk", "decode"))(env | self.part_vars("chunk", [(chunk, 0)]))

    def vars(self, chunks: Sequence[tuple[int, int]], contexts: Sequence[int],
             verifies: Sequence[tuple[int, int]] = ()) -> tuple[tuple[str, ...], dict[str, int]]:
        """The step's parts and its variables (T: every token)."""
        parts = tuple(p for p, present in (("chunk", chunks), ("decode", contexts), ("verify", verifies)) if present)
        env: dict[str, int] = {}
        if chunks:
            env |= self.part_vars("chunk", chunks)
        if contexts:
            env |= self.decode_vars(contexts)
        if verifies:
            env |= self.part_vars("verify", verifies)
        env["T"] = sum(env["T" + TAGS[p]] for p in parts)
        return parts, env

    def costs(self, chunks: Sequence[tuple[int, int]], contexts: Sequence[int],
              verifies: Sequence[tuple[int, int]] = ()) -> Form:
        """The step's per-GPU cost by entry."""
        parts, env = self.vars(chunks, contexts, verifies)
        return {k: cost.at(env) for k, cost in self.form(parts).items()}

    def time(self, chunks: Sequence[tuple[int, int]], contexts: Sequence[int],
             verifies: Sequence[tuple[int, int]] = (), pad: int = 0) -> float:
        """Seconds of one step: Σ over its entries of StepTime.time, plus step_s. `pad`: rows a decode step's
        CUDA graph runs beyond its sequences (the captured batch size's), which pass through every matmul but
        attend to nothing and are not sampled."""
        if not chunks and not contexts and not verifies:
            return 0.0
        parts, env = self.vars(chunks, contexts, verifies)
        if pad:
            tag = TAGS["decode"]
            env["T"] += pad
            env["T" + tag] += pad
        return self.clock(parts)(env)


def decode_ceiling(step: EngineStep, batch: int, context: int, engines: int = 1) -> float:
    """Output tokens/s of `engines` engines that each run `batch` sequences at `context` in decode steps alone:
    engines · batch / t_decode(batch, context), `llmcalc latency`'s decode_tokens_per_s for that batch and context.
    Prompts are not counted: a colocated engine's prompt chunks lengthen its steps, so it is an upper bound."""
    return engines * batch / step.decode_time(batch, context)


def prefill_ceiling(step: EngineStep, prompt: int, engines: int = 1) -> float:
    """Requests/s `engines` engines prefill running one `prompt`-token prompt per step, alone: engines / t_prefill
    (the step of a prefill pool as `llmcalc plan`'s closed form times it)."""
    return engines / step.time([(prompt, 0)], [])


def _compiled(name: str, form: Form, st: StepTime, layers: list[int],
              host: float | None = None) -> Callable[[dict], float]:
    """The step's time under `st` as a function of its variables (a dict), compiled once (time_source; `host`: its
    floor without CUDA graphs where not st.host_s)."""
    namespace: dict[str, Any] = {"inf": math.inf, "nan": math.nan}  # a constant that overflowed reads inf
    variables = set().union(*(c.variables for cost in form.values() for c in cost if isinstance(c, Lin)))
    names = {v: f"env[{v!r}]" for v in variables}
    lines = ["def step(env):", *time_source("t", form, st, names, layers, namespace, host), "    return t"]
    exec(compile("\n".join(lines) + "\n", f"<engine step of {name}>", "exec"), namespace)  # noqa: S102 - built above
    return namespace["step"]
