"""Sweeps over (batch, seq): the figures of kv_cache, memory, flops and latency at many points, fast.

Every figure comes from the estimators' own cost form, not a second derivation. latency's step_form
gives each op's FLOPs and bytes of one forward as exact forms (llmcalc/costs/form.py) in T (tokens),
R (sequences) and, per layer window, R × each attention count (pairs, keys, …); the KV cache is
Σ_windows layers · cache_bytes over R × the tokens kept, run the same way. `Sweeper` builds these once
per model and layout and compiles them into one Python function of (batch, seq), so a point costs the
variant's counts at that point (its own `counts`) and a few int operations:

  kv       = Σ_w layers_w · cache_bytes(B · kept_w)                       (as `llmcalc kv`)
  memory   = weights + kv + PrefillPeak(B, S)                             (as `llmcalc memory`)
  prefill, decode FLOPs = Σ_ops FLOPs of step_form on one GPU (tp = 1) at R = B   (as `llmcalc flops`)
  ttft, tpot = Σ_ops StepTime: max(c, m) + overlap·min(c, m) + fixed, comm bytes / link (as `llmcalc latency`)
  fits     = weights + workspace + ⌈kv of B/dp / kv_split⌉ ≤ usable, per GPU (as `llmcalc fit`)

The layer peak of the activations depends on seq only through `peak_key` (whether the prompt outruns
each window's cache, for GQA and MLA), so it is computed once per key.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from llmcalc.costs.capacity import (
    activation_workspace,
    holds,
    require_weights_fit,
    usable_bytes,
)
from llmcalc.costs.form import Lin, source, var
from llmcalc.costs.kv import mixer_layers
from llmcalc.costs.step import count_scope, count_scopes, step_form
from llmcalc.costs.step_time import StepTime
from llmcalc.costs.memory import PrefillPeak, encoder_decoder_activations, layer_peak_per_token, peak_key
from llmcalc.costs.shard import kv_split
from llmcalc.costs.step_source import time_source
from llmcalc.costs.weights import weights_bytes
from llmcalc.errors import UserError
from llmcalc.model.attention import Attention
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import DTYPE_BITS, LayerGroup, ModelSpec
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.model.units import ceil_div
from llmcalc.reports.sweep import SweepGrid, SweepReport, SweepRow
from llmcalc.workload import Layout, Workload

FORMULA = ("kv = B·Σ_w c_w·(min(S+1, w) − 1); memory = weights + kv + activations (as `llmcalc memory`); "
           "prefill/decode FLOPs as `llmcalc flops`; ttft, tpot as `llmcalc latency` (one decode step at "
           "context S); tokens_per_s = B / tpot; fits: weights + KV + workspace ≤ usable per GPU")


SEQ_LIMIT = 1 << 16
"""Most seqs whose seq-only terms a sweeper keeps (then it starts afresh): a few MB."""

SweepPoint = NamedTuple("SweepPoint", [(k, f.annotation) for k, f in SweepRow.model_fields.items() if k != "model"])
"""One (batch, seq) point: a SweepRow's fields but the model's name, as a plain tuple (fast to build)."""


def cache_groups(spec: ModelSpec) -> list[tuple[LayerGroup, Attention, int]]:
    """Per mixer and window (kv's mixer_layers): a layer group of it, the mixer and its layer count."""
    first = {(g.mixer_name, g.window): g for g in reversed(spec.layer_groups())}
    return [(first[key], attn, n) for key, (attn, n) in mixer_layers(spec).items()]


class Sweeper:
    """A model's (batch, seq) evaluator under a workload (all but its batch and seq, which are the point's):
    build once, then point() per point.

    Inputs of point() are not re-validated: batch and seq positive ints, batch a multiple of dp
    (grid() checks its axes once)."""

    def __init__(self, spec: ModelSpec, gpu: GPU | None, work: Workload = Workload(), tm: TimeModel = ROOFLINE):
        work.layout.check(spec, work.layout.dp)
        self.spec, self.gpu, self.work, self.tm, self.notes = spec, gpu, work, tm, []
        self.weights = weights_bytes(spec, work.formats(spec))[0]
        self.weights_per_gpu = None  # None: no time and no fit (no GPU, or the weights do not fit it)
        if gpu is not None:
            try:
                self.weights_per_gpu = require_weights_fit(spec, gpu, work)
            except UserError as e:
                self.notes.append(f"{spec.name}: no latency: {e}")
        self.workspace = activation_workspace(spec, work)
        self.usable = usable_bytes(gpu, work.reserve) if gpu else 0
        self.peaks: dict[Any, int] = {}  # layer peak bytes per token, by peak_key
        self.namespace: dict[str, Any] = {"inf": math.inf, "nan": math.nan}  # a constant that overflowed reads inf
        self.source = self._source()
        exec(compile(self.source, f"<sweep of {spec.name}>", "exec"), self.namespace)  # noqa: S102 - built above
        self.point = self.namespace["point"]

    def _source(self) -> str:
        """The body of point(batch, seq) as Python source: the model's forms written out."""
        spec, work = self.spec, self.work
        ns = self.namespace
        scopes = count_scopes(spec)  # each mixer and window whose counts the forms name
        # what depends on seq alone (each mixer's counts per window, the activation peak): computed once per
        # seq and kept (a grid repeats every seq across its batches)
        lines = ["def point(batch, seq):", "    rep = batch // DP", "    s = SEQ.get(seq)", "    if s is None:"]
        per_seq: list[tuple[str, str]] = []  # (name, its expression)
        pre_names: dict[str, dict[str, str]] = {"batch": {}, "rep": {}}
        dec_names: dict[str, dict[str, str]] = {"batch": {}, "rep": {}}
        kept_names: dict[str, dict[str, str]] = {"batch": {}, "rep": {}}
        for i, (scope, (attn, w)) in enumerate(scopes.items()):
            ns[f"counts{i}"], ns[f"W{i}"] = attn.counts, w
            lines.append(f"        pre{i} = counts{i}(seq, 0, W{i})")
            knee = attn.knee(w)
            if knee is None or attn.affine_after_knee:
                lines.append(f"        dec{i} = counts{i}(1, seq, W{i})")
            else:  # a decode step's costs stop growing at the knee (as latency's decode sum uses): its counts there
                ns[f"DEC{i}"] = attn.counts(1, knee, w)
                lines.append(f"        dec{i} = DEC{i} if seq >= {knee} else counts{i}(1, seq, W{i})")
            for phase, names, sample in (("pre", pre_names, (1, 0)), ("dec", dec_names, (1, 1))):
                for k in attn.counts(*sample, w):  # the names a phase's counts give at every point
                    local = f"{phase}{i}_{k.replace('.', '__')}"  # a part's count (Parallel's mamba.keys)
                    per_seq.append((local, f"{phase}{i}[{k!r}]"))
                    for scale in ("batch", "rep"):
                        names[scale][f"{k}@{scope}"] = f"{scale} * {local}"
            # the tokens one sequence keeps in one layer after seq tokens, as kv counts them (Attention.cached_tokens)
            ns[f"KEPT{i}"] = attn.cached_tokens
            lines.append(f"        kept{i} = KEPT{i}(seq, W{i})")
            per_seq.append((f"kept{i}", f"kept{i}"))
            for scale in ("batch", "rep"):
                kept_names[scale][f"kept@{scope}"] = f"{scale} * kept{i}"
                # a relative encoding's distances, shared by the batch (step.distances): S, or min(S, W − 1) + 1
                pre_names[scale][f"D@{scope}"], dec_names[scale][f"D@{scope}"] = "seq", f"(kept{i} + 1)"
        # an encoder-decoder's encoder length: the workload's, else the prompt's (Stack.encoder_length); its
        # variables (Stack.encoder_vars) per GPU: E = R·S_e, E2 = R·S_e², X = T·S_e
        follows = work.encoder_seq is None and spec.stack.encoder_length(None, 2) == 2  # S_e = seq
        se = "seq" if follows else str(spec.stack.encoder_length(work.encoder_seq, 1))
        for scale, t in (("batch", "batch * seq"), ("rep", "rep * seq")):
            pre_names[scale] |= {"T": t, "R": scale}
            dec_names[scale] |= {"T": scale, "R": scale}
            for names, x in ((pre_names, f"{t} * {se}"), (dec_names, f"{scale} * {se}")):
                names[scale] |= {"E": f"{scale} * {se}", "E2": f"{scale} * {se} * {se}", "X": x}
            kept_names[scale] |= {"E": f"{scale} * {se}", "R": scale}
        # one GPU's values, used by several ops: computed once, into locals
        shared = []
        for phase, names in (("pre", pre_names), ("dec", dec_names)):
            local = {}
            for v, expr in names["rep"].items():
                if expr != "rep":
                    local[v] = f"{phase}_{len(local)}"
                    shared.append(f"    {local[v]} = {expr}")
            names["rep"] |= local

        bits = DTYPE_BITS[work.kv_dtype]
        # kv's layer_cache_bytes as a form (its tokens kept and its sequences); an encoder's stack keeps nothing
        kv = sum((n * attn.held_bytes(var(f"kept@{count_scope(g)}"), var("R"), bits)
                  for g, attn, n in cache_groups(spec)), Lin()) if spec.stack.decodes else Lin()
        kv = kv + spec.stack.cross_cache_bytes(spec, var("E"), 1, bits)  # an encoder-decoder's cross cache
        lines += ["        key = peak_key(seq)",
                  "        peak = PEAKS.get(key)",
                  "        if peak is None:",
                  "            peak = PEAKS[key] = layer_peak(SPEC, seq, WORK)[0]",
                  "        if len(SEQ) >= SEQ_LIMIT:",
                  "            SEQ.clear()",
                  f"        s = SEQ[seq] = ({', '.join(e for _, e in per_seq)}, peak)",
                  f"    {', '.join(n for n, _ in per_seq)}, peak = s",
                  *shared,
                  f"    kv = {source(kv, kept_names['batch'], ns)}",
                  "    act = activations(batch, seq, peak)[0]"]
        # whole-model FLOPs: the step forms on one GPU
        one_gpu = work.model_copy(update={"layout": Layout()})
        for phase, prefill, names in (("prefill", True, pre_names), ("decode", False, dec_names)):
            total = sum((c[0] for c in step_form(spec, one_gpu, prefill).values()), Lin())
            lines.append(f"    {phase}_flops = {source(total, names['batch'], ns)}")
        ns |= {"DP": work.layout.dp,
               "SPEC": spec, "WORK": work, "PEAKS": self.peaks, "SEQ": {}, "SEQ_LIMIT": SEQ_LIMIT,
               "peak_key": peak_key(spec, work),
               "layer_peak": layer_peak_per_token, "activations": self._activations(),
               "Point": SweepPoint, "WEIGHTS": self.weights}
        if self.weights_per_gpu is None:
            fits = "None" if self.gpu is None else "False"
            lines.append(f"    return Point(batch, seq, kv, WEIGHTS, act, WEIGHTS + kv + act, prefill_flops, "
                         f"decode_flops, None, None, None, {fits})")
        else:
            for phase, prefill, names in (("ttft", True, pre_names), ("tpot", False, dec_names)):
                form = step_form(spec, work, prefill)
                if not prefill:  # one new token per sequence: T = R
                    form = {k: [c.substitute({"R": var("T")}) if isinstance(c, Lin) else c for c in cost]
                            for k, cost in form.items()}
                lines += time_source(phase, form, StepTime(spec, self.gpu, work, self.tm, prefill), names["rep"],
                                     [g.count for g in spec.layer_groups()], self.namespace)
            lines += [f"    kv_rep = {'kv' if work.layout.dp == 1 else source(kv, kept_names['rep'], ns)}",
                      "    fits = holds(WEIGHTS_PER_GPU, WORKSPACE, ceil_div(kv_rep, KV_SPLIT), USABLE)",
                      "    return Point(batch, seq, kv, WEIGHTS, act, WEIGHTS + kv + act, prefill_flops, "
                      "decode_flops, ttft, tpot, batch / tpot, fits)"]
            ns |= {"holds": holds, "ceil_div": ceil_div, "KV_SPLIT": kv_split(spec, work.layout), "USABLE": self.usable,
                   "WEIGHTS_PER_GPU": self.weights_per_gpu, "WORKSPACE": self.workspace}
        return "\n".join(lines) + "\n"

    def _activations(self):
        """(batch, seq, layer peak) → memory's inference activations: the decoder's prefill peak (PrefillPeak), and
        for an encoder-decoder the larger of it (with the encoder output held) and the encoder's forward peak
        (memory's encoder_decoder_activations)."""
        spec, work, peak = self.spec, self.work, PrefillPeak(self.spec, self.work)
        if not spec.stack.encoder_length(work.encoder_seq, 1):
            return peak

        def activations(batch: int, seq: int, per_token: int) -> tuple[int, bool]:
            enc = spec.stack.encoder_length(work.encoder_seq, seq)
            return encoder_decoder_activations(spec, batch, enc, work, peak(batch, seq, per_token)[0], "")[0], False

        return activations

    def grid(self, batches: list[int], seqs: list[int]) -> list[SweepPoint]:
        """Every (batch, seq) point, batch-major."""
        for b in batches:
            self.work.layout.check(self.spec, b)
        point = self.point
        return [point(b, s) for b in batches for s in seqs]


def sweep(specs: list[ModelSpec], gpu: GPU | None, batches: list[int], seqs: list[int],
          work: Workload = Workload(), tm: TimeModel = ROOFLINE) -> SweepReport:
    """Every model over the batch × seq grid, one row per (model, batch, seq), under the workload's dtypes and
    layout (its own batch and seq are the grid's); time (under the time model `tm`) and fit on `gpu` (None:
    neither)."""
    rows, notes = [], []
    for spec in specs:
        spec.stack.check_timed("model", work.layout)
        sweeper = Sweeper(spec, gpu, work, tm)
        rows += [SweepRow(model=spec.name, **p._asdict()) for p in sweeper.grid(batches, seqs)]
        notes += sweeper.notes
        if seqs[-1] > spec.max_seq_len:
            notes.append(f"{spec.name}: seq beyond its max_seq_len {spec.max_seq_len:,} is an extrapolation")
    L = work.layout
    if gpu is None:
        notes.append("no `gpu`: time per token and fit are left out (no GPU is assumed)")
    else:
        notes += [f"latency on {L.gpus} × {gpu.name} (tp={L.tp} pp={L.pp} dp={L.dp} ep={L.ep}); fits is per GPU",
                  "memory counts one unchunked prefill's activations (as `llmcalc memory`); fits assumes a chunked "
                  "prefill's workspace (as `llmcalc fit`), so a point can fit while its memory exceeds the GPUs",
                  "tpot is one decode step at context seq; tokens_per_s = batch / tpot (decode throughput)"]
    usable = usable_bytes(gpu, work.reserve) if gpu else None
    return SweepReport(models=[s.name for s in specs], gpu=gpu.name if gpu else None, gpus=L.gpus,
                       usable_bytes=usable, usable_bytes_all=None if usable is None else usable * L.gpus,
                       grid=SweepGrid(batch=batches, seq=seqs), rows=rows, formula=FORMULA, notes=notes)
