"""One table renderer per report type: renderer(report)(report, units, **view) → lines and tables.

Every value a user or a preset wrote (names, notes, formulas) is escaped before it reaches rich markup.
No arithmetic beyond unit conversion.
"""

from __future__ import annotations

from collections.abc import Callable

from llmcalc.render.scenarios import scenarios_table
from llmcalc.render.tables import styled, table
from llmcalc.render.text import (
    Verbatim,
    esc,
    nbytes_text,
    number,
    seconds,
    short,
    size,
    size_heads,
    sizes,
    weights_words,
)


TABLES: dict[str, Callable[..., list]] = {}
"""Report type name → its renderer (a list of rows renders by its row type); each renderer names its types
(`renders`)."""


def renders(*names: str) -> Callable:
    """Register the decorated function as the table renderer of the report types `names`."""
    def register(function: Callable[..., list]) -> Callable[..., list]:
        TABLES.update(dict.fromkeys(names, function))
        return function

    return register


def _footer(r) -> list[str]:
    """The formula and notes of a report, dimmed."""
    return [f"[dim]formula: {esc(r.formula)}[/dim]", *(f"[dim]note: {esc(n)}[/dim]" for n in r.notes)]


def _param_rows(rows) -> list[list[str]]:
    return [[r.component, f"{r.params:,}", f"{r.active:,}", f"{r.percent:.2f}%"] for r in rows]


@renders("ParamsReport")
def params_table(r, units: str) -> list:
    head = (f"[bold]{esc(r.model)}[/bold]: {r.total:,} parameters ({short(r.total)}); "
            f"active per token {r.active:,} ({short(r.active)}); "
            f"active excluding embedding {r.active_excluding_embedding:,} ({short(r.active_excluding_embedding)})")
    out = [head, table("Breakdown (all layers)", ["component", "params", "active", "% of total"],
                       _param_rows(r.breakdown)),
           table("Layer types", ["layer type", "layers", "params / layer", "active / layer"],
                 [[t.layer_type, str(t.layers), f"{t.params_per_layer:,}", f"{t.active_per_layer:,}"]
                  for t in r.layer_types], text=(0,))]
    if r.vision_breakdown:
        out.insert(1, f"language model {r.language:,} ({short(r.language)}) + vision tower and projector "
                      f"{r.vision:,} ({short(r.vision)})")
        out.append(table(f"Vision tower and projector: {r.vision:,} ({short(r.vision)})",
                         ["component", "params", "used per image", "% of total"], _param_rows(r.vision_breakdown)))
    if r.mtp_breakdown:
        out.append(table(f"MTP modules (not in total): {r.mtp:,} ({short(r.mtp)})",
                         ["component", "params", "active", "% of main total"], _param_rows(r.mtp_breakdown)))
    if r.checkpoint_bytes is not None:
        out.append(f"checkpoint as shipped: [bold]{nbytes_text(r.checkpoint_bytes, units)}[/bold]: "
                   f"{esc(r.checkpoint_formats or '')}")
    if r.hub_total_size_bytes is not None:
        out.append(f"safetensors index total_size: {nbytes_text(r.hub_total_size_bytes, units)}: "
                   + _difference(r.checkpoint_bytes, r.hub_total_size_bytes))
    if r.model_import == "best-effort":
        out.append("[bold]best-effort import[/bold] (--hf-generic), assumed: " + esc("; ".join(r.assumed)))
    return out + _footer(r)


def _difference(ours: int | None, published: int) -> str:
    """How llmcalc's checkpoint bytes differ from a published total_size, in bytes and as a share."""
    if ours is None:
        return "published"
    if ours == published:
        return "llmcalc's checkpoint bytes match it to the byte"
    d = ours - published
    share = f" ({d / published:+.4%})" if published else ""
    return f"llmcalc's checkpoint bytes differ by {d:+,} bytes{share}"


@renders("PresetRow")
def presets_table(rows: list, units: str) -> list:
    def context(n: int) -> str:
        return f"{n // 1024}k" if n % 1024 == 0 else f"{n:,}"

    cells = [[p.name, f"{p.layers}×{p.d_model}", context(p.max_seq_len),
              p.attention_kind + (f" +SWA {context(p.sliding_window)}" if p.sliding_window else ""), p.ffn_kind,
              short(p.total) + ("" if p.active == p.total else f"\n{short(p.active)} act.")] for p in rows]
    return [table("Presets", ["name", "L×d", "ctx", "mixers", "ffn", "params"], cells, text=(3, 4)),
            "[dim]L×d: layers × d_model; ctx: max_seq_len (k = 1024); mixers: MHA/GQA/MQA query/kv heads, MLA "
            "and DSA heads, a hybrid's mixers joined by +, (enc) an encoder, (enc-dec) an encoder-decoder, (vision) "
            "an image tower, +SWA: sliding-window layers; ffn: MoE experts/top-k(+shared); params: total, and "
            "active per token where fewer; `llmcalc presets NAME` shows one in full[/dim]"]


@renders("PresetReport")
def preset_detail_table(r, units: str) -> list:
    from llmcalc.render.formats import spec_document

    return [esc(spec_document(r).rstrip())]


@renders("KVReport")
def kv_table(r, units: str) -> list:
    rows = [[t.layer_type, str(t.layers), f"{t.tokens_cached:,}", f"{t.elements_per_token:,}",
             size(t.bytes_per_layer, units), *sizes(t.bytes, units)] for t in r.per_layer]
    return [
        f"[bold]{esc(r.model)}[/bold] KV cache, {r.batch:,} × {r.seq:,} tokens in {r.kv_dtype}: "
        f"[bold]{nbytes_text(r.total_bytes, units)}[/bold]",
        f"per token (one sequence, all layers): {r.bytes_per_token:,} bytes; "
        + (f"fixed per sequence (recurrent states, cross-attention caches): {r.state_bytes_per_sequence:,} bytes; "
           if r.state_bytes_per_sequence else "")
        + f"per layer: {' + '.join(nbytes_text(t.bytes_per_layer, units) for t in r.per_layer)}",
        *([f"image tokens: {r.image_tokens:,} per sequence hold {nbytes_text(r.image_bytes, units)} "
           f"({100 * r.image_bytes / r.total_bytes:.1f}% of the cache; images first in the prompt)"]
          if r.image_tokens else []),
        table("Per layer type", ["layer type", "layers", "tokens", "elem/token", "one layer",
                                 *size_heads(units, "all")], rows),
        *_footer(r),
    ]


@renders("FlopsReport")
def flops_table(r, units: str) -> list:
    rows = [[x.component, short(x.prefill), short(x.decode), short(x.generate), short(x.train), short(x.train_hardware)]
            for x in r.breakdown]
    rows.append(["total", short(r.prefill_flops), short(r.decode_flops), short(r.generate_flops), short(r.train_flops),
                 short(r.train_hardware_flops)])
    mla = f", MLA decode {r.mla_decode}" if r.mla_decode != "n/a" else ""
    return [
        f"[bold]{esc(r.model)}[/bold] FLOPs, batch {r.batch:,}, prompt {r.seq:,}, generate {r.gen:,} "
        f"(attention {r.attention}, logits {r.logits}{mla}, recompute {r.recompute})",
        f"prefill {r.prefill_flops:,} · decode step {r.decode_flops:,} · generate {r.generate_flops:,} · "
        f"train step {r.train_flops:,} (hardware {r.train_hardware_flops:,}: {r.attention_kernel} attention "
        f"kernel, recompute {r.recompute})",
        f"per token: prefill {short(r.prefill_flops_per_token)} · decode {short(r.decode_flops_per_token)} · "
        f"train {short(r.train_flops_per_token)} · train hardware {short(r.train_hardware_flops_per_token)}",
        table("Breakdown (all layers, whole batch; FLOPs)", ["component", "prefill", "decode step",
                                                             f"generate {r.gen:,}", "train step", "train hardware"],
              rows),
        *([f"position encoding ({r.positions.kind}, element-wise, not in the totals): prefill "
           f"{short(r.positions.prefill)} · decode step {short(r.positions.decode)} · generate "
           f"{short(r.positions.generate)} · train step {short(r.positions.train)}"]
          if r.positions and r.positions.kind != "none"
          and not any(x.component == "elementwise/positions" for x in r.breakdown) else []),
        *(vision_lines(r.vision) if r.vision else []),
        *_footer(r),
    ]


def vision_lines(v) -> list:
    """A vision-language model's images: one image through the tower, the images' share of the prompt."""
    return [
        f"images: {v.images} per sequence of {v.image_height}×{v.image_width} px → {v.grid_height}×{v.grid_width} "
        f"patches, {v.encoder_tokens:,} encoder tokens, {v.tokens_per_image:,} image tokens each; "
        f"{v.image_tokens:,} image tokens per sequence = {100 * v.image_share:.1f}% of the prompt "
        "(and of its KV cache)",
        f"vision tower + projector: {v.flops_per_image:,} FLOPs ({short(v.flops_per_image)}) per image, "
        f"{short(v.flops)} for the batch; prefill with the images encoded {short(v.prefill_flops_with_images)}",
        table("Vision tower and projector, one image (FLOPs)", ["component", "FLOPs"],
              [[x.component, short(x.flops_per_image)] for x in v.breakdown]),
        f"[dim]vision formula: {esc(v.formula)}[/dim]",
    ]


@renders("MemoryReport")
def memory_table(r, units: str) -> list:
    rows = [[x.component, f"{x.bytes:,}", *sizes(x.bytes, units), x.note] for x in r.breakdown]
    rows.append(["total", f"{r.total_bytes:,}", *sizes(r.total_bytes, units), f"dominant: {r.dominant}"])
    if r.mode == "train" and r.tp * r.pp * r.cp == 1:
        who = (f"global batch {r.batch:,} over {r.dp} GPU(s): {r.per_gpu_batch:,} per GPU, {r.micro_batch:,} at a time, "
               f"× {r.seq:,} tokens; per GPU")
    elif r.mode == "train":
        who = (f"global batch {r.batch:,} over {r.dp} replica(s) of {r.tp * r.pp * r.cp} GPUs: {r.per_gpu_batch:,} "
               f"per replica, {r.micro_batch:,} at a time, × {r.seq:,} tokens; per GPU of stage {r.stage}, the "
               "most loaded")
    else:
        who = f"batch {r.batch:,} × {r.seq:,} tokens"
    return [
        f"[bold]{esc(r.model)}[/bold] {r.mode} memory, {who}: [bold]{nbytes_text(r.total_bytes, units)}[/bold] "
        f"(dominant: {r.dominant})",
        table("Breakdown", ["component", "bytes", *size_heads(units), "how"], rows, text=(len(rows[0]) - 1,)),
        *_footer(r),
    ]


def _price(usd_per_hour: float | None) -> str:
    """USD per GPU-hour to the cent (a10g's 1.006 as 1.01; the JSON keeps the exact price); — when unknown."""
    if usd_per_hour is None:
        return "—"
    return f"{usd_per_hour:,.2f}"


@renders("GPURow")
def gpus_table(rows: list, units: str) -> list:
    return [
        table("GPUs (dense peaks, no sparsity)",
              ["name", "bf16 TFLOP/s", "fp8 TFLOP/s", "GiB", "TB/s", "ridge", "link GB/s", "USD/h"],
              [[g.name, f"{g.bf16_flops / 1e12:,.1f}", f"{g.fp8_flops / 1e12:,.1f}" if g.fp8_flops else "—",
                f"{g.memory_bytes / 2**30:g}", f"{g.bandwidth_bytes_per_s / 1e12:.2f}", f"{g.ridge_point:.0f}",
                f"{g.interconnect_bytes_per_s / 1e9:,.1f}", _price(g.price_per_hour)] for g in rows]),
        "[dim]GiB: memory; TB/s: memory bandwidth; ridge: bf16 FLOPs per byte where a kernel turns "
        "compute-bound; link: GPU-to-GPU, both directions together; USD/h: on-demand rental per GPU (source "
        "and date in the preset; — none known); `llmcalc gpus NAME` shows one in full[/dim]",
    ]


def _latency(seconds_: float | None) -> str:
    """', a small collective N µs' where the latency is stated."""
    return f", a small collective {seconds_ * 1e6:g} µs" if seconds_ else ""


@renders("GPUReport")
def gpu_detail_table(g, units: str) -> list:
    peaks = [[dtype, "—" if v is None else f"{v / 1e12:,.1f}"] for dtype, v in g.peak_flops.items()]
    return [
        f"[bold]{esc(g.name)}[/bold]: {esc(g.description)}",
        f"memory {nbytes_text(g.memory_bytes, units)} · bandwidth {g.bandwidth_bytes_per_s / 1e12:.2f} TB/s · "
        f"ridge {g.ridge_point:.0f} bf16 FLOPs per byte",
        f"interconnect: {esc(g.interconnect)}, {g.interconnect_bytes_per_s / 1e9:,.1f} GB/s both directions"
        + _latency(g.interconnect_latency_s) + (f", {g.gpus_per_node} GPUs per node" if g.gpus_per_node else ""),
        "network: " + (f"{g.network_bytes_per_s / 1e9:,.1f} GB/s per GPU both directions" + _latency(g.network_latency_s)
                       if g.network_bytes_per_s else "not stated (collectives beyond a node are costed on the "
                       "interconnect)"),
        "price: " + (f"{_price(g.price_per_hour)} USD per GPU-hour, on-demand rental (source and date in the preset)"
                     if g.price_per_hour else "no public on-demand price known"),
        table("Dense peak (no sparsity)", ["dtype", "TFLOP/s (int8: TOPS)"], peaks),
        f"[dim]source: {esc(g.source)}[/dim]", *([f"[dim]note: {esc(g.notes)}[/dim]"] if g.notes else []),
    ]


def _per_replica(r) -> str:
    """' (4 per replica)' when the batch is shared out over dp replicas."""
    return f" ({r.batch // r.dp:,} per replica)" if r.dp > 1 else ""


@renders("LatencyReport")
def latency_table(r, units: str) -> list:
    layout = f"{r.gpus} × {esc(r.gpu)} (tp {r.tp}, pp {r.pp}, dp {r.dp}, ep {r.ep})"
    comm = any(p.comm_s for p in r.phases)
    phases = [[p.phase, short(p.flops), size(p.bytes, units), f"{p.intensity:,.1f}", p.bound,
               *([seconds(p.comm_s) if p.comm_s else "—"] if comm else []), seconds(p.time_s)] for p in r.phases]
    bound = {"interconnect": "link"}

    def ops(phase: str) -> list[list[str]]:
        return [[o.op, short(o.flops), size(o.bytes, units), "—" if o.intensity is None else f"{o.intensity:,.1f}",
                 bound.get(o.bound, o.bound), seconds(o.time_s)] for o in r.ops if o.phase == phase]

    op_columns = ["op", "FLOPs", "bytes", "FLOP/B", "bound", "time"]
    return [
        f"[bold]{esc(r.model)}[/bold] on {layout}: batch {r.batch:,}{_per_replica(r)}, prompt {r.seq:,}, "
        f"generate {r.gen:,} "
        f"({esc(weights_words(r.weights_dtype))}, {r.kv_dtype} KV, {r.compute_dtype} matmuls)",
        f"time to first token [bold]{seconds(r.ttft_s)}[/bold] · per output token [bold]{seconds(r.tpot_s)}"
        f"[/bold] (first) → {seconds(r.tpot_end_s)} (last) · total {seconds(r.total_s)}",
        *([f"one image through the vision tower and projector: {seconds(r.image_s)} (in the time to first token "
           "for each image of the prompt)"] if r.image_s is not None else []),
        f"tokens/s: {r.tokens_per_s:,.1f} overall · {r.tokens_per_s_per_seq:,.1f} per sequence · "
        f"{r.decode_tokens_per_s:,.1f} while decoding",
        f"{r.time_model} time model: peak {r.peak_flops / 1e12:,.1f} TFLOP/s × {r.compute_efficiency} · "
        f"{r.bandwidth_bytes_per_s / 1e12:.2f} TB/s × {r.memory_efficiency} · ridge {r.ridge_point:.0f} FLOP/B "
        f"(effective {r.effective_ridge_point:.0f})"
        + (f" · experts read per MoE layer per step: {r.experts_hit_per_step:.1f}" if r.experts_hit_per_step else "")
        + (f" · busiest expert-parallel rank ×{r.busiest_rank:.2f}" if r.busiest_rank else ""),
        f"per GPU: weights {size(r.weights_bytes_per_gpu, units)}, KV at the end {size(r.kv_bytes_per_gpu, units)}"
        + ("" if r.fits else " — [bold red]does not fit[/bold red]"),
        table("Phases (one GPU)", ["phase", "FLOPs", "bytes", "FLOP/B", "bound", *(["comm"] if comm else []), "time"],
              phases),
        table("Prefill ops (one GPU, all layers)", op_columns, ops("prefill")),
        table("First decode step ops (one GPU, all layers)", op_columns, ops(r.phases[1].phase)),
        *_footer(r),
    ]


@renders("FitReport")
def fit_table(r, units: str) -> list:
    verdict = "[bold green]fits[/bold green]" if r.fits else "[bold red]does not fit[/bold red]"
    usable = (f"usable by {r.engine} (weights, workspace, KV pool)" if r.engine else
              f"usable ({r.capacity_bytes / 2**30:g} GiB × (1 − {r.reserve}))")
    cells = [(usable, r.usable_bytes),
             (f"weights ({r.weights_dtype})", r.weights_bytes),
             ("activation workspace (one prefill chunk)", r.activation_bytes),
             ("KV budget (usable − the two above)", r.kv_budget_bytes),
             (f"KV cache ({r.batch:,} × {r.seq:,} tokens, {r.kv_dtype})", r.kv_bytes)]
    rows = [[name, f"{n:,}", *sizes(n, units)] for name, n in cells]
    limit = "memory" if r.max_seq_limited_by == "memory" else "the model's max_seq_len"
    out = [
        f"[bold]{esc(r.model)}[/bold] on {r.gpus} × {esc(r.gpu)} (tp {r.tp}, pp {r.pp}, dp {r.dp}, ep {r.ep}): "
        f"batch {r.batch:,}{_per_replica(r)} × {r.seq:,} tokens {verdict} ({size(r.total_bytes, units)} of "
        f"{size(r.usable_bytes, units)} per GPU)",
        f"largest batch at {r.seq:,} tokens: [bold]{r.max_batch:,}[/bold] · longest context at batch {r.batch:,}: "
        f"[bold]{r.max_seq:,}[/bold] (limited by {limit}"
        + (f"; memory alone allows {r.max_seq_memory:,})" if r.max_seq_memory and r.max_seq_memory != r.max_seq
           else ")"),
    ]
    if r.kv_pool_tokens is not None:
        out.append(f"KV cache: {r.kv_pool_tokens:,} tokens per engine ({esc(r.engine)}); its log says "
                   f"“{esc(r.kv_log)}”")
    if r.smallest_fit:
        s = r.smallest_fit
        out.append(f"fewest GPUs that hold it: [bold]{s.gpus}[/bold] (tp {s.tp}, pp {s.pp}, dp {s.dp}, ep {s.ep})")
    speed = [f"time to first token {seconds(r.ttft_s)} · per output token {seconds(r.tpot_s)} · "
             f"{r.decode_tokens_per_s:,.0f} tokens/s decoding"] if r.ttft_s is not None else []
    if r.max_batch_tokens_per_s is not None:
        speed.append(f"at batch {r.max_batch:,}: {r.max_batch_tokens_per_s:,.0f} tokens/s decoding")
    if speed:
        out.append(" · ".join(speed) + f" ({r.time_model} time model)")
    return out + [table("Per GPU", ["", "bytes", *size_heads(units)], rows, text=(0,)), *_footer(r)]


@renders("ValidationReport")
def validation_table(r, units: str, detail: bool = False) -> list:
    """One row per quantity; several models: one line per model (its rows, how many fail, the largest relative
    error of the rows that are not bounds), every row with `detail`."""
    def num(x: int | float) -> str:
        return f"{x:,}" if isinstance(x, int) else f"{x:.4g}"

    def err(x: float) -> str:
        return "0" if x == 0 else f"{x:.1e}"

    several = len(r.models) > 1
    verdict = {True: "pass", False: styled("FAIL", "bold red")}
    if several and not detail:
        by_model = {m: [x for x in r.rows if x.model == m] for m in r.models}
        head, rows = ["model", "rows", "failed", "largest error", ""], [
            [m, str(len(xs)), str(sum(not x.ok for x in xs)),
             err(max((x.rel_error for x in xs if not x.bound), default=0.0)), verdict[all(x.ok for x in xs)]]
            for m, xs in by_model.items()]
    else:
        head = (["model"] if several else []) + ["quantity", "estimate", "measured", "rel. error", ""]
        rows = [([x.model] if several else []) + [x.quantity, num(x.estimate), num(x.measured), err(x.rel_error),
                                                  verdict[x.ok]] for x in r.rows]
    tolerances = sorted({(x.quantity, x.tolerance) for x in r.rows if x.tolerance}, key=lambda t: t[0])
    failed = sum(not x.ok for x in r.rows)
    what = f"{len(r.models)} models" if several else esc(r.models[0])
    return [
        f"validate [bold]{what}[/bold] on {r.device}" + (f" ({esc(r.gpu)})" if r.gpu else "")
        + f", batch {r.batch:,} × {r.seq:,} tokens: "
        + ("[bold green]all rows pass[/bold green]" if r.ok else f"[bold red]{failed} row(s) fail[/bold red]"),
        table("Estimate vs measurement", head, rows, text=(0, 1) if several and detail else (0,)),
        "[dim]tolerance: exact for counts and bytes" + "".join(f"; {q} {t:.0%}" for q, t in tolerances)
        + ("; times: at most the measurement (a lower bound)" if any(x.bound for x in r.rows) else "") + "[/dim]",
        *(f"[dim]note: {esc(n)}[/dim]" for n in r.notes),
        *(["[dim]one line per model: --detail shows every row[/dim]"] if several and not detail else []),
    ]


def _wide_table(columns: list[str], rows: list[list[str]]):
    """Labels down the first column (whole); value columns right-aligned, wrapping between words if narrow."""
    return table("", columns, rows, wrap=range(1, len(columns)))


@renders("CompareReport")
def compare_table(r, units: str) -> list:
    """Metrics down, models across; each cell is the value and its ratio to the reference."""
    def cell(row, field: str, text) -> str:
        ratio = row.ratios.get(field)
        return text if ratio is None or row.name == r.reference else f"{text} ×{ratio:.3g}"

    def sz(n: int) -> str:
        return size(n, units)

    metrics = [("attention params", "attention_params", short), ("total params", "total_params", short),
               ("active params", "active_params", short),
               ("KV elements/token", "kv_elements_per_token", lambda n: f"{n:,}"),
               ("KV bytes/token", "kv_bytes_per_token", lambda n: f"{n:,}"),
               ("state bytes/seq", "state_bytes_per_sequence", lambda n: f"{n:,}"),
               (f"KV cache {r.batch:,}×{r.seq:,}", "kv_cache_bytes", sz),
               ("prefill FLOPs", "prefill_flops", short), ("decode FLOPs/step", "decode_flops", short),
               ("decode bytes/step", "decode_bytes", sz),
               ("decode FLOPs/ctx token", "decode_flops_per_context", short),
               ("decode bytes/ctx token", "decode_bytes_per_context", lambda n: f"{n:,}"),
               ("memory (inference)", "memory_bytes", sz)]
    if r.gpu:
        metrics += [("time to first token", "ttft_s", seconds), ("time per output token", "tpot_s", seconds),
                    ("tokens/s", "tokens_per_s", lambda x: f"{x:,.1f}")]
    rows = [[label, *("—" if getattr(x, f) is None else cell(x, f, fmt(getattr(x, f))) for x in r.rows)]
            for label, f, fmt in metrics]
    if r.gpu:
        rows.append(["fits", *("yes" if x.fits else "no" for x in r.rows)])
    where = f"{esc(r.base)}: attention variants" if r.mode == "attention" else "models"
    return [
        f"[bold]compare {where}[/bold], batch {r.batch:,} × {r.seq:,} tokens ({r.weights_dtype} weights, "
        f"{r.kv_dtype} KV{', ' + esc(r.gpu) if r.gpu else ''}); ratios to {esc(r.reference)}",
        _wide_table(["", *(x.name for x in r.rows)], rows),
        *(esc(f"{x.name}: {x.attention}" + (f", {x.ffn}" if r.mode == "models" else "") + f"; KV/token {x.kv_formula}")
          for x in r.rows),
        f"[dim]rule: {esc(r.rule)}[/dim]",
        "[dim]state bytes/seq: a recurrent layer's fixed state per sequence; /ctx token: what one more token of "
        "context adds to a decode step[/dim]",
        "[dim]conventions: " + esc(", ".join(f"{k} {v}" for k, v in r.conventions.items())) + "[/dim]",
        *_footer(r),
    ]


@renders("ExplainReport")
def explain_table(r, units: str) -> list:
    """A block per step (`component: formula`, `= substituted`, `= value`), a blank line between
    sections, then the totals and whether they match the plain command."""
    def amount(v, unit: str) -> str:
        if unit == "bytes":
            return nbytes_text(v, units)
        if unit == "s":
            return seconds(v)
        return f"{v:,} {unit}" + (f" ({short(v)})" if v >= 1000 else "")

    work = ([f"batch {r.batch:,} × {r.seq:,} tokens"] if r.batch else []) + ([f"generate {r.gen:,}"] if r.gen else [])
    work += [f"{k} {v}" for k, v in r.conventions.items()]
    out = [f"[bold]{esc(r.model)}[/bold]: `llmcalc {r.topic}` worked out" + (f" ({esc(', '.join(work))})" if work else "")]
    section = None
    for s in r.steps:
        if section is not None and s.component.split("/")[0] != section:
            out.append("")
        section = s.component.split("/")[0]
        out += [f"[bold]{esc(s.component)}[/bold]: {esc(s.formula)}", f"  = {esc(s.substituted)}",
                f"  = {amount(s.value, s.unit)}"]
    out.append("")
    for t in r.totals:  # the sum's terms with thousands separators, as its result
        shown = f" = {grouped(t.substituted)}" if len(t.substituted) <= 60 and any(c in t.substituted for c in "+−") \
            else ""
        out.append(f"[bold]{esc(t.component)}[/bold] = {esc(t.formula + shown)} = {amount(t.value, t.unit)}")
    off = [f"{t.source} is {t.check:,}" if isinstance(t.check, int) else f"{t.source} is {seconds(t.check)}"
           for t in r.totals if not t.matches]
    fields = ", ".join(t.source.partition(": ")[2] for t in r.totals)
    out.append(f"matches `llmcalc {r.topic}`: " + (f"[bold green]yes[/bold green] ({esc(fields)})" if r.matches else
                                                  "[bold red]no[/bold red] (" + esc("; ".join(off)) + ")"))
    out.append("[dim]symbols: " + esc("; ".join(f"{k}: {v}" for k, v in r.legend.items())) + "[/dim]")
    return out + [f"[dim]note: {esc(n)}[/dim]" for n in r.notes]


def grouped(expression: str) -> str:
    """'11274289152 + 5635768320' → '11,274,289,152 + 5,635,768,320': every whole number in thousands."""
    import re

    return re.sub(r"(?<![\w.])\d{4,}(?![\w.])", lambda m: f"{int(m[0]):,}", expression)


def bar(value: int, largest: int, width: int = 12) -> str:
    """A bar of value / largest · width cells, to an eighth of a cell (▏ … █), padded to width."""
    full, part = divmod(round(8 * width * value / largest), 8)
    return ("█" * full + " ▏▎▍▌▋▊▉"[part].strip()).ljust(width)


def _axis(values: list[int]) -> str:
    """'1, 8, 64', or '1,024 … 131,072 (8)' for a longer axis."""
    if len(values) <= 4:
        return ", ".join(f"{v:,}" for v in values)
    return f"{values[0]:,} … {values[-1]:,} ({len(values)})"


@renders("SweepReport")
def sweep_table(r, units: str, bars: bool = False) -> list:
    """Per model: memory per point (bars: a bar scaled to the largest memory), then FLOPs and, with a GPU,
    time per token and fit."""
    largest, timed = max(x.memory_bytes for x in r.rows), r.gpu is not None
    where = f"; time and fit on {r.gpus} × {esc(r.gpu)}" if timed else "; no --gpu: no time or fit"
    out = [f"[bold]sweep[/bold] {esc(', '.join(r.models))}: batch {_axis(r.grid.batch)} × seq {_axis(r.grid.seq)}"
           + where]
    for model in r.models:
        rows = [x for x in r.rows if x.model == model]
        memory = [[f"{x.batch:,}", f"{x.seq:,}", size(x.kv_bytes, units), size(x.activation_bytes, units),
                   size(x.memory_bytes, units), *(["yes" if x.fits else "no"] if timed else []),
                   *([bar(x.memory_bytes, largest)] if bars else [])] for x in rows]
        timing = [[f"{x.batch:,}", f"{x.seq:,}", short(x.prefill_flops), short(x.decode_flops),
                   *([] if not timed else ["—"] * 3 if x.tpot_s is None else
                     [seconds(x.ttft_s), seconds(x.tpot_s), f"{x.tokens_per_s:,.0f}"])] for x in rows]
        heads = ["batch", "seq", "KV", "activations", "memory", *(["fits"] if timed else [])]
        out += [table(f"{model}: memory (weights {size(rows[0].weights_bytes, units)})",
                      heads + ([""] if bars else []), memory, text=(len(heads),) if bars else ()),
                table(f"{model}: FLOPs" + (" and time" if timed else ""),
                      ["batch", "seq", "prefill", "decode", *(["TTFT", "TPOT", "tokens/s"] if timed else [])], timing)]
    return out + _footer(r)


@renders("MoEReport")
def moe_table(r, units: str) -> list:
    """Phases across (prefill, one decode step), quantities down; FLOPs over all MoE layers."""
    def opt(x, fmt) -> str:
        return "—" if x is None else fmt(x)

    def share(x: float) -> str:
        return number(x)

    cf = "dropless (no capacity factor)" if r.capacity_factor is None else \
        f"capacity factor {r.capacity_factor:g} (from the {r.capacity_source})"
    first = r.rows[0]
    rows = [["tokens routed per layer (T)", *(f"{x.tokens:,}" for x in r.rows)],
            ["assignments T·k", *(f"{x.assignments:,}" for x in r.rows)],
            ["capacity C per expert", *(opt(x.capacity, lambda c: f"{c:,}") for x in r.rows)],
            ["E[tokens per expert]", *(number(x.expected_tokens_per_expert) for x in r.rows)],
            ["busiest expert (E[max])", *(f"{number(x.expected_busiest_load)} ({x.busiest_to_mean:.3g}× mean)"
                                          for x in r.rows)],
            ["E[dropped] per layer", *(number(x.expected_dropped) for x in r.rows)],
            ["dropped fraction", *(share(x.dropped_fraction) for x in r.rows)],
            ["padding (empty rows)", *(opt(x.padding_fraction, lambda f: f"{f:.1%}") for x in r.rows)],
            ["router FLOPs", *(short(x.router_flops) for x in r.rows)],
            ["expert FLOPs dropless", *(short(x.expert_flops_dropless) for x in r.rows)],
            ["expert FLOPs padded to C", *(opt(x.expert_flops_padded, short) for x in r.rows)],
            ["expert FLOPs processed", *(short(x.expert_flops_processed) for x in r.rows)]]
    shared = f" + {first.shared_experts} shared" if first.shared_experts else ""
    return [
        f"[bold]{esc(r.model)}[/bold] MoE: {first.layers} MoE layers × {first.experts} experts, top-{first.top_k}"
        f"{shared}; batch {r.batch:,} × {r.seq:,} tokens; {cf}",
        _wide_table(["", "prefill (T = B·S)", "decode step (T = B)"], rows),
        table(f"Expert parallel: the busiest rank at expert skew {r.expert_skew:g}", ["ep", "experts a rank",
              "busiest rank"], [[f"{x.ep:,}", f"{x.experts_per_rank:,}", f"×{x.busiest_rank:.2f}"]
                                for x in r.expert_parallel]),
        *_footer(r),
    ]


@renders("TrainReport")
def train_table(r, units: str) -> list:
    extra = "".join(f", {k} {v}" for k, v in (("cp", r.cp), ("vpp", r.vpp)) if v > 1)
    layout = f"{r.gpus} × {esc(r.gpu)} (tp {r.tp}, pp {r.pp}, dp {r.dp}, ep {r.ep}{extra})"
    if r.lora_rank:
        layout += f", LoRA rank {r.lora_rank}"
    parts = [("forward", r.forward_s), ("backward", r.backward_s), ("recompute", r.recompute_s),
             ("tp / ep communication", r.tp_comm_s), ("cp ring exchange, exposed", r.cp_comm_s),
             ("pipeline sends", r.pp_comm_s),
             (f"pipeline bubble ({r.bubble_fraction:.1%} of the work)", r.pp_bubble_s),
             (f"dp gradient reduction, exposed (of {seconds(r.dp_comm_total_s)})", r.dp_comm_s),
             ("optimizer update", r.optimizer_s), ("host overhead", r.overhead_s)]
    rows = [[name, seconds(t), f"{t / r.step_s:.1%}"] for name, t in parts if t]
    return [
        f"[bold]{esc(r.model)}[/bold] on {layout}: global batch {r.batch:,} × {r.seq:,} tokens, {r.micro_batches:,} "
        f"micro-batch(es) of {r.micro_batch} per replica ({r.compute_dtype} matmuls, recompute {r.recompute}, "
        f"{r.optimizer}, ZeRO-{r.zero}, time model {r.time_model})",
        f"step [bold]{seconds(r.step_s)}[/bold] · {r.tokens_per_s:,.0f} tokens/s ({r.tokens_per_s_per_gpu:,.0f} per "
        f"GPU) · {r.model_tflops_per_gpu:,.1f} model TFLOP/s per GPU",
        f"MFU [bold]{r.mfu:.1%}[/bold] · HFU {r.hfu:.1%} of {r.peak_flops / 1e12:,.1f} TFLOP/s · model FLOPs "
        f"{short(r.model_flops)} · hardware FLOPs {short(r.hardware_flops)} (attention {r.attention})",
        table("Step (one GPU)", ["part", "time", "share"], rows, text=(0,)),
        *_footer(r),
    ]


@renders("MfuReport")
def mfu_table(r, units: str) -> list:
    peak = f"{r.gpus:,} × {esc(r.gpu) if r.gpu else 'accelerator'} at {r.peak_flops_per_gpu / 1e12:,.1f} TFLOP/s"
    rows = [["model", f"{r.model_flops_per_token:,}", f"{r.model_flops_per_step:,}", f"{r.mfu:.2%}"],
            ["hardware", f"{r.hardware_flops_per_token:,}", f"{r.hardware_flops_per_step:,}", f"{r.hfu:.2%}"]]
    return [
        f"[bold]{esc(r.model)}[/bold] training, batch {r.batch:,} × {r.seq:,} tokens on {peak} ({r.compute_dtype})",
        f"{number(r.tokens_per_s)} tokens/s · step {seconds(r.step_s)} · {number(r.model_tflops_per_gpu)} model "
        f"TFLOP/s per GPU",
        f"MFU [bold]{r.mfu:.1%}[/bold] · HFU {r.hfu:.1%} (attention {r.attention}, {r.attention_kernel} kernel, "
        f"recompute {r.recompute})",
        table("FLOPs (a multiply-add is 2)", ["count", "per token", "per step", "utilisation"], rows, text=(0,)),
        f"[dim]convention: {esc(r.convention)}[/dim]",
        *_footer(r),
    ]


@renders("ServeReport")
def serve_table(r, units: str) -> list:
    layout = f"{r.gpus} × {esc(r.gpu)} (tp {r.tp}, pp {r.pp}, dp {r.dp}, ep {r.ep})"
    spreads = [("time to first token", r.ttft_s), ("time per output token", r.tpot_s), ("end to end", r.e2e_s),
               ("queueing", r.queue_s)]
    rows = [[name, seconds(x.mean), seconds(x.p50), seconds(x.p90), seconds(x.p99)] for name, x in spreads]
    good = ""
    if r.goodput_requests_per_s is not None:
        slo = " and ".join(f"{k} ≤ {seconds(v)}" for k, v in (("TTFT", r.slo_ttft_s), ("TPOT", r.slo_tpot_s))
                           if v is not None)
        good = f" · goodput [bold]{r.goodput_requests_per_s:,.2f}[/bold] requests/s ({slo})"
    return [
        f"[bold]{esc(r.model)}[/bold] on {layout}: {r.requests:,} requests, {esc(r.load)}, prompt {esc(r.prompt)}, "
        f"output {esc(r.output)} ({r.time_model} time model)",
        f"engine: {esc(r.engine)}, {r.engine_policy}, max {r.max_seqs} sequences and {r.max_batched_tokens:,} "
        f"tokens per step, {f'CUDA graphs up to {r.graph_max}' if r.graph_max else 'no CUDA graphs'}, "
        f"{r.kv_blocks:,} KV blocks of {r.block_size} tokens "
        f"({size(r.kv_bytes_per_block, units)} each per GPU), memory utilization {r.gpu_memory_utilization:g}, "
        f"prefix hit {r.prefix_hit:g}" + (f", speculative: {esc(r.speculative)}" if r.speculative else ""),
        f"KV cache: {r.kv_tokens:,} tokens per engine; its log says “{esc(r.kv_log)}”",
        f"throughput [bold]{r.requests_per_s:,.2f}[/bold] requests/s · [bold]{r.output_tokens_per_s:,.0f}[/bold] "
        f"output tokens/s ({r.output_tokens_per_s_per_gpu:,.0f} per GPU){good}",
        f"over {seconds(r.duration_s)} and {r.steps:,} steps: {r.mean_concurrency:,.1f} requests in the system on "
        f"average (Little: {r.little_concurrency:,.1f}), {r.mean_running:,.1f} running · KV blocks "
        f"{r.kv_utilization:.0%} used on average, {r.kv_peak_utilization:.0%} at peak · {r.preemptions:,} "
        "preemption(s)" + (f" · {r.tokens_per_step:.2f} tokens per decode step" if r.tokens_per_step else ""),
        table("Latency", ["", "mean", "p50", "p90", "p99"], rows, text=(0,)),
        *_footer(r),
    ]


@renders("PlanReport")
def plan_table(r, units: str) -> list:
    targets = " and ".join(f"p99 {k} ≤ {seconds(v)}" for k, v in (("TTFT", r.slo_ttft_s), ("TPOT", r.slo_tpot_s))
                           if v is not None)
    rows = []
    for i, c in enumerate(r.candidates, 1):
        layout = ", ".join(f"{k} {v}" for k, v in (("tp", c.tp), ("pp", c.pp), ("ep", c.ep), ("dp", c.dp))
                           if v > 1 or k == "tp")
        if c.prefill:
            layout = f"prefill tp {c.prefill.tp}" + (f", dp {c.prefill.dp}" if c.prefill.dp > 1 else "") + \
                f"; decode {layout}"
        cost = "—" if c.usd_per_million_tokens is None else f"${c.usd_per_million_tokens:,.3f}"
        rows.append([str(i), c.gpu, str(c.gpus), layout, c.weights_dtype, str(c.max_seqs), f"{c.kv_tokens / 1e6:.2f}M",
                     f"×{c.headroom:,.1f}",
                     f"{c.output_tokens_per_s_per_gpu:,.0f}", cost, seconds(c.ttft_p99_s), seconds(c.tpot_p99_s)])
    return [
        f"[bold]{esc(r.model)}[/bold] at {r.rate:g} requests/s (prompt {esc(r.prompt)}, output {esc(r.output)}), "
        f"{targets}, on up to {r.max_gpus} × {esc(', '.join(r.gpus))}",
        table("Deployments that meet the targets, best first (simulated)",
              ["#", "GPU", "GPUs", "layout", "dtype", "max\nseqs", "KV\ntokens", "head-\nroom", "tok/s\n/GPU", "$/M\ntok",
               "TTFT\np99", "TPOT\np99"],
              rows, text=(1, 3), names=(4,)),
        *_footer(r),
        *(_emitted(r.emit) if r.emit else []),
    ]


def shell_lines(argv: list[str]) -> list[str]:
    """A command as shell lines (rich markup, Verbatim: printed whole, never wrapped): the program and its model
    on the first, each flag with its values on a line of its own, continued with a backslash."""
    import shlex

    groups: list[list[str]] = [[]]
    for i, word in enumerate(argv):
        if word.startswith("--") and i:
            groups.append([])
        groups[-1].append(shlex.quote(word))
    lines = [esc(" ".join(g)) for g in groups]  # the backslash after the escaped text, where rich leaves it be
    return [Verbatim(("  " if i else "") + line + (" \\" if i < len(lines) - 1 else ""))
            for i, line in enumerate(lines)]


def _emitted(e) -> list[str]:
    """The engine's commands for one deployment (plan --emit), ready to paste, or why there are none."""
    head = f"{e.engine} for deployment {e.candidate}"
    if e.unsupported:
        return [f"[bold]--emit {head}[/bold]: not expressible: {esc(e.unsupported)}",
                *(f"[dim]note: {esc(n)}[/dim]" for n in e.notes)]
    return [f"[bold]launch[/bold] ({head}):", *shell_lines(e.launch.argv),
            f"[bold]benchmark[/bold] (writes {esc(e.result_file)}):", *shell_lines(e.benchmark.argv),
            *(f"[dim]note: {esc(n)}[/dim]" for n in e.notes)]


@renders("ScaleReport")
def scale_table(r, units: str) -> list:
    given = {"flops": f"a budget of {r.value:.3g} FLOPs", "params": f"{short(r.value)} parameters",
             "tokens": f"{short(r.value)} training tokens"}[r.given]
    timed = r.gpu is not None
    rows = [[x.method, short(x.params), short(x.tokens), f"{x.flops:.2e}", f"{x.tokens_per_param:.1f}",
             f"{x.loss:.3f}", *([short(round(x.gpu_hours)), f"{x.days:,.1f}",
                                 "—" if x.cost_usd is None else f"${short(round(x.cost_usd))}"] if timed else
                                [f"{x.exponent:.4g}"])] for x in r.rows]
    heads = ["method", "params N", "tokens D", "FLOPs C", "D/N", "loss",
             *(["GPU-hours", "days", "USD"] if timed else ["a"])]
    lines = [f"Compute-optimal training for {given} (C = 6·N·D; N_opt ∝ C^a)"]
    if timed:
        lines.append(f"days on {r.gpus} × {esc(r.gpu)}: {r.compute_dtype} peak {r.peak_flops / 1e12:,.1f} TFLOP/s "
                     f"at MFU {r.mfu:.1%} ({esc(r.mfu_source)})"
                     + (f", {_price(r.price_per_hour)} USD per GPU-hour" if r.price_per_hour else ""))
    return [*lines, table("Compute-optimal points", heads, rows), *_footer(r)]


@renders("MeasuredReport")
def measured_table(r, units: str) -> list:
    def value(x: float, unit: str) -> str:
        return seconds(x) if unit == "s" else f"{x:,.3g} {unit}"

    out = []
    for run in r.runs:
        out.append(f"[bold]{esc(run.file)}[/bold] ({esc(run.kind)}): {esc(run.model)} on {run.gpus} × {esc(run.gpu)}, "
                   f"{esc(run.engine)}, {run.requests:,} requests, {esc(run.load)}, prompt {esc(run.prompt)}, output "
                   f"{esc(run.output)} ({esc(run.time_model)} time model)")
        out += [f"  {esc(g)}" for g in run.given]
        rows = [[row.metric, row.statistic, value(row.measured, row.unit), value(row.predicted, row.unit),
                 f"{row.ratio:.2f}"] for row in r.rows if row.file == run.file]
        out.append(table("Measured and predicted", ["metric", "", "measured", "predicted", "ratio"], rows,
                         text=(0, 1)))
    return [*out, *_footer(r)]


renders("ScenarioResult")(scenarios_table)


def renderer(report):
    """The table renderer of `report` (a report, or a list of rows)."""
    return TABLES[type(report[0] if isinstance(report, list) else report).__name__]
