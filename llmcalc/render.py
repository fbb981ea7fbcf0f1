"""Rendering of reports: rich tables for people, JSON / YAML for scripts. No arithmetic here."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .report import ParamRow, ParamsReport

Format = Literal["table", "json", "yaml"]


def emit(report: BaseModel | Sequence[BaseModel], fmt: Format) -> None:
    """Write `report` to stdout in `fmt`; tables go through the renderer for the report's type."""
    if fmt == "table":
        _print(*TABLES[type(report[0] if isinstance(report, list) else report).__name__](report))
        return
    data = [r.model_dump(mode="json") for r in report] if isinstance(report, list) else report.model_dump(mode="json")
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, width=120))


def short(n: int | float, unit: str = "") -> str:
    """6738415616 → '6.74 B' (SI prefixes for counts: K, M, B, T)."""
    for div, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= div:
            return f"{n / div:.2f} {suffix}{unit}"
    return f"{n:,} {unit}".rstrip()


def _print(*items) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    for item in items:
        console.print(item)


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], text: Sequence[int] = (0,)):
    """Columns listed in `text` are left-aligned and may wrap; numbers are right-aligned, never cut."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", title_style="bold")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i in text else "right", no_wrap=i not in text,
                     overflow="fold", min_width=len(c) if i == 0 else None)
    for r in rows:
        t.add_row(*r)
    return t


def _param_rows(rows: list[ParamRow]) -> list[list[str]]:
    return [[r.component, f"{r.params:,}", f"{r.active:,}", f"{r.percent:.2f}%"] for r in rows]


def params_table(r: ParamsReport) -> list:
    head = (
        f"[bold]{r.model}[/bold]: {r.total:,} parameters ({short(r.total)}); "
        f"active per token {r.active:,} ({short(r.active)}); "
        f"active excluding embedding {r.active_excluding_embedding:,} ({short(r.active_excluding_embedding)})"
    )
    out = [head, _table("Breakdown (all layers)", ["component", "params", "active", "% of total"], _param_rows(r.breakdown))]
    out.append(
        _table(
            "Layer types",
            ["layer type", "layers", "params / layer", "active / layer"],
            [[t.layer_type, str(t.layers), f"{t.params_per_layer:,}", f"{t.active_per_layer:,}"] for t in r.layer_types],
        )
    )
    if r.mtp_breakdown:
        out.append(
            _table(
                f"MTP modules (not in total): {r.mtp:,} ({short(r.mtp)})",
                ["component", "params", "active", "% of main total"],
                _param_rows(r.mtp_breakdown),
            )
        )
    out += [f"[dim]formula: {r.formula}[/dim]", *(f"[dim]note: {n}[/dim]" for n in r.notes)]
    return out


def presets_table(rows: list) -> list:
    return [
        _table(
            "Presets",
            ["name", "total", "active", "attention", "ffn"],
            [[p.name, short(p.total), short(p.active), p.attention, p.ffn] for p in rows],
            text=(0, 3, 4),
        )
    ]


def nbytes_text(n: int) -> str:
    """1099511627776 → '1,099,511,627,776 bytes (1.10 TB, 1.00 TiB)': decimal and binary, labelled."""
    for si, iec, exp in (("TB", "TiB", 4), ("GB", "GiB", 3), ("MB", "MiB", 2), ("KB", "KiB", 1)):
        if n >= 1000**exp:
            return f"{n:,} bytes ({n / 1000**exp:.2f} {si}, {n / 1024**exp:.2f} {iec})"
    return f"{n:,} bytes"


def size(n: int, iec: bool = False) -> str:
    """Compact size for table cells: '34.36 GB' (decimal) or '32.00 GiB' (binary)."""
    parts = nbytes_text(n).partition("(")[2].rstrip(")").split(", ")
    return parts[iec] if parts[0] else f"{n} bytes"


def kv_table(r) -> list:
    rows = [[t.layer_type, str(t.layers), f"{t.tokens_cached:,}", f"{t.elements_per_token:,}",
             size(t.bytes_per_layer), size(t.bytes), size(t.bytes, iec=True)] for t in r.per_layer]
    return [
        f"[bold]{r.model}[/bold] KV cache, {r.batch} × {r.seq:,} tokens in {r.kv_dtype}: "
        f"[bold]{nbytes_text(r.total_bytes)}[/bold]",
        f"per token (one sequence, all layers): {r.bytes_per_token:,} bytes; "
        f"per layer: {' + '.join(nbytes_text(t.bytes_per_layer) for t in r.per_layer)}",
        _table("Per layer type", ["layer type", "layers", "tokens", "elem/token", "one layer", "all", "all (GiB)"],
               rows),
        f"[dim]formula: {r.formula}[/dim]", *(f"[dim]note: {n}[/dim]" for n in r.notes),
    ]


def flops_table(r) -> list:
    rows = [[x.component, short(x.prefill), short(x.decode), short(x.generate), short(x.train)] for x in r.breakdown]
    rows.append(["total", short(r.prefill_flops), short(r.decode_flops), short(r.generate_flops), short(r.train_flops)])
    return [
        f"[bold]{r.model}[/bold] FLOPs, batch {r.batch}, prompt {r.seq:,}, generate {r.gen:,} "
        f"(attention {r.attention}, logits {r.logits}, MLA decode {r.mla_decode}, recompute {r.recompute})",
        f"prefill {r.prefill_flops:,} · decode step {r.decode_flops:,} · generate {r.generate_flops:,} · "
        f"train step {r.train_flops:,}",
        f"per token: prefill {short(r.prefill_flops_per_token)} · decode {short(r.decode_flops_per_token)} · "
        f"train {short(r.train_flops_per_token)}",
        _table("Breakdown (all layers, whole batch; FLOPs)", ["component", "prefill", "decode step",
                                                             f"generate {r.gen}", "train step"], rows),
        f"[dim]formula: {r.formula}[/dim]", *(f"[dim]note: {n}[/dim]" for n in r.notes),
    ]


def memory_table(r) -> list:
    rows = [[x.component, f"{x.bytes:,}", size(x.bytes), size(x.bytes, iec=True), x.note] for x in r.breakdown]
    rows.append(["total", f"{r.total_bytes:,}", size(r.total_bytes), size(r.total_bytes, iec=True),
                 f"dominant: {r.dominant}"])
    return [
        f"[bold]{r.model}[/bold] {r.mode} memory, batch {r.batch} × {r.seq:,} tokens: "
        f"[bold]{nbytes_text(r.total_bytes)}[/bold] (dominant: {r.dominant})",
        _table("Breakdown", ["component", "bytes", "GB", "GiB", "how"], rows, text=(0, 4)),
        f"[dim]formula: {r.formula}[/dim]", *(f"[dim]note: {n}[/dim]" for n in r.notes),
    ]


TABLES = {"ParamsReport": params_table, "PresetRow": presets_table, "KVReport": kv_table,
          "FlopsReport": flops_table, "MemoryReport": memory_table}
