"""`--plot FILE.png|svg`. sweep: memory vs context (one line per model and batch) beside time per output
token vs batch (one line per model, at the grid's longest context). serve: each request's TTFT, TPOT and
end-to-end latency against its arrival, or p50 / p99 against the arrival rate. matplotlib is the optional
extra `plot`, imported only here.
"""

from __future__ import annotations

from pathlib import Path

from llmcalc.errors import UserError
from llmcalc.reports.serve import ServeReport
from llmcalc.reports.sweep import SweepReport

INSTALL = "install it with `pip install matplotlib`"
STYLES = ("-", "--", ":", "-.")


def check_target(path: Path) -> None:
    """Before any work: a .png or .svg, and matplotlib importable (where the file may go: the CLI's
    check_outputs)."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"`plot`: {path} is neither .png nor .svg; name a FILE.png or FILE.svg")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(f"`plot`: matplotlib is not installed; {INSTALL}") from None


def plot_sweep(r: SweepReport, path: Path, units: str) -> None:
    """Write the two panels to `path` (format from its suffix); log axes; GiB under --units iec, else GB."""
    from matplotlib.figure import Figure

    scale, unit = (2**30, "GiB") if units == "iec" else (10**9, "GB")
    longest = r.grid.seq[-1]
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    memory, tpot = fig.subplots(1, 2)
    for i, model in enumerate(r.models):  # a colour per model, a line style per batch
        rows = [x for x in r.rows if x.model == model]
        for j, b in enumerate(r.grid.batch):
            line = [(x.seq, x.memory_bytes / scale) for x in rows if x.batch == b]
            memory.plot(*zip(*line), f"C{i % 10}", linestyle=STYLES[j % len(STYLES)], marker=".",
                        label=f"{model}, batch {b:,}")
        line = [(x.batch, x.tpot_s * 1e3) for x in rows if x.seq == longest and x.tpot_s is not None]
        if line:
            tpot.plot(*zip(*line), f"C{i % 10}", marker=".", label=model)
    memory.set(xlabel="context (tokens)", ylabel=f"inference memory ({unit})",
               title="memory: weights + KV cache + activations")
    memory.set_xscale("log", base=2)
    memory.set_yscale("log")
    where = f", {r.gpus} × {r.gpu}" if r.gpu else ""
    tpot.set(xlabel="batch", ylabel="time per output token (ms)", title=f"time per output token at {longest:,} tokens{where}")
    tpot.set_xscale("log", base=2)
    if not tpot.lines:
        why = "no --gpu given" if r.gpu is None else "the weights do not fit"
        tpot.text(0.5, 0.5, f"no latency: {why}", ha="center", transform=tpot.transAxes)
    _finish(fig, (memory, tpot), path)


def plot_serve_time(r: ServeReport, path: Path) -> None:
    """Each request's TTFT and end-to-end latency (left) and TPOT (right) against its arrival time."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    t = [x.arrival_s for x in r.timeline]
    left.plot(t, [x.e2e_s for x in r.timeline], "C0.", markersize=3, label="end to end")
    left.plot(t, [x.ttft_s for x in r.timeline], "C1.", markersize=3, label="time to first token")
    tpot = [(x.arrival_s, x.tpot_s * 1e3) for x in r.timeline if x.tpot_s is not None]
    if tpot:
        right.plot(*zip(*tpot), "C2.", markersize=3, label="time per output token")
    left.set(xlabel="arrival (s)", ylabel="latency (s)", title=f"{r.model} on {r.gpus} × {r.gpu}: {r.load}")
    right.set(xlabel="arrival (s)", ylabel="time per output token (ms)", title=f"{r.requests:,} requests")
    if r.slo_ttft_s is not None:
        left.axhline(r.slo_ttft_s, color="C1", linestyle="--", label="TTFT target")
    if r.slo_tpot_s is not None:
        right.axhline(r.slo_tpot_s * 1e3, color="C2", linestyle="--", label="TPOT target")
    _finish(fig, (left, right), path)


def plot_serve_load(reports: list[ServeReport], path: Path) -> None:
    """p50 and p99 TTFT (left) and TPOT (right) against the arrival rate, and the throughput reached."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    rates = [r.rate for r in reports]
    for ax, field, scale, unit in ((left, "ttft_s", 1.0, "s"), (right, "tpot_s", 1e3, "ms")):
        for q, style in (("p50", "-"), ("p99", "--")):
            ax.plot(rates, [getattr(getattr(r, field), q) * scale for r in reports], f"C0{style}", marker=".",
                    label=q)
        ax.set(xlabel="arrival rate (requests/s)", ylabel=f"{field[:-2].upper()} ({unit})")
    done = right.twinx()
    done.plot(rates, [r.requests_per_s for r in reports], "C3:", marker="x", label="throughput (right axis)")
    done.set(ylabel="throughput (requests/s)")
    done.legend(loc="lower right", fontsize="small")
    r = reports[0]
    if r.slo_ttft_s is not None:
        left.axhline(r.slo_ttft_s, color="C1", linestyle="--", label="TTFT target")
    if r.slo_tpot_s is not None:
        right.axhline(r.slo_tpot_s * 1e3, color="C1", linestyle="--", label="TPOT target")
    left.set(title=f"{r.model} on {r.gpus} × {r.gpu}")
    _finish(fig, (left, right), path)


def _finish(fig, axes, path: Path) -> None:
    """Grid, legends, and the file."""
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    fig.savefig(path)