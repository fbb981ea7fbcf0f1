"""The table of `llmcalc run`: one row per scenario, its name, command, model and the headline figures of its
report (the figures each command's own table leads with)."""

from __future__ import annotations

from llmcalc.render.tables import table
from llmcalc.render.text import number, seconds, short, size


def _fits(ok: bool) -> str:
    return "fits" if ok else "does not fit"


def _params(r, units: str) -> str:
    out = f"{short(r.total)} params, {short(r.active)} active per token"
    return out + (f", checkpoint {size(r.checkpoint_bytes, units)}" if r.checkpoint_bytes is not None else "")


def _kv(r, units: str) -> str:
    return (f"KV cache {size(r.total_bytes, units)} ({r.batch} × {r.seq:,} tokens, {r.kv_dtype}); "
            f"{r.bytes_per_token:,} bytes per token")


def _flops(r, units: str) -> str:
    return (f"FLOPs: prefill {short(r.prefill_flops)} · decode step {short(r.decode_flops)} · generate "
            f"{short(r.generate_flops)} · train step {short(r.train_flops)}")


def _memory(r, units: str) -> str:
    return f"{r.mode} memory {size(r.total_bytes, units)} (dominant: {r.dominant})"


def _latency(r, units: str) -> str:
    return (f"TTFT {seconds(r.ttft_s)} · TPOT {seconds(r.tpot_s)} · {r.tokens_per_s:,.1f} tokens/s on {r.gpus} × "
            f"{r.gpu}" + ("" if r.fits else " (does not fit)"))


def _fit(r, units: str) -> str:
    out = (f"{_fits(r.fits)} on {r.gpus} × {r.gpu} ({size(r.total_bytes, units)} of {size(r.usable_bytes, units)} "
           f"per GPU) · max batch {r.max_batch:,} · max seq {r.max_seq:,}")
    return out + (f" · fewest GPUs {r.smallest_fit.gpus}" if r.smallest_fit else "")


def _moe(r, units: str) -> str:
    return " · ".join(f"{x.phase}: {number(x.expected_dropped)} tokens dropped per layer, busiest expert "
                      f"{x.busiest_to_mean:.3g}× the mean" for x in r.rows)


def _train(r, units: str) -> str:
    return (f"step {seconds(r.step_s)} · {r.tokens_per_s:,.0f} tokens/s · MFU {r.mfu:.1%} on {r.gpus} × {r.gpu}")


def _mfu(r, units: str) -> str:
    return f"MFU {r.mfu:.1%} · HFU {r.hfu:.1%} · {r.tokens_per_s:,.1f} tokens/s"


def _scale(r, units: str) -> str:
    return " · ".join(f"{x.method}: N {short(x.params)}, D {short(x.tokens)}"
                      + (f", {x.days:,.1f} days" if r.gpu is not None else "") for x in r.rows)


def _explain(r, units: str) -> str:
    return f"{r.topic} worked out step by step; matches {r.topic}: {'yes' if r.matches else 'no'}"


def _compare(r, units: str) -> str:
    return " · ".join(f"{x.name}: KV {size(x.kv_cache_bytes, units)}" + (
        f", TPOT {seconds(x.tpot_s)}" if x.tpot_s is not None else "") for x in r.rows)


HEADLINES = {"ParamsReport": _params, "KVReport": _kv, "FlopsReport": _flops, "MemoryReport": _memory,
             "LatencyReport": _latency, "FitReport": _fit, "MoEReport": _moe, "TrainReport": _train,
             "MfuReport": _mfu, "ScaleReport": _scale, "ExplainReport": _explain, "CompareReport": _compare}
"""Report type name → its headline: the figures its own table leads with, in one line."""


def _model(r) -> str:
    if type(r).__name__ == "CompareReport":
        return r.base if r.mode == "attention" else "models"
    return getattr(r, "model", None) or "—"


def scenarios_table(rows: list, units: str) -> list:
    """One row per scenario: #, name, command, model, headline (a failed scenario: its error)."""
    cells = [[str(x.index), x.name, x.command, "—" if x.report is None else _model(x.report),
              f"failed: {x.error}" if x.report is None else HEADLINES[type(x.report).__name__](x.report, units)]
             for x in rows]
    return [table("Scenarios", ["#", "scenario", "command", "model", "figures"], cells, text=(1, 2, 3, 4)),
            "[dim]each scenario's full report: --format json, yaml or csv[/dim]"]
