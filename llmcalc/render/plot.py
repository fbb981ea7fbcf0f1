"""`--plot FILE.png|svg`. sweep: memory vs context (one line per model and batch, the GPUs' usable memory
dashed) beside time per output token vs batch (one line per model, at the grid's longest context); points that do
not fit hollow. serve: each request's TTFT, TPOT and
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
    if path.name in ("", ".", ".."):  # an empty --plot '' reaches here as '.'
        raise UserError(f"`plot`: {str(path)!r} names no file (an empty name or a folder); name a FILE.png or FILE.svg")
    if path.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"`plot`: {path} is neither .png nor .svg; name a FILE.png or FILE.svg")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(f"`plot`: matplotlib is not installed; {INSTALL}") from None


MAX_SWEEP_LINES = 32
"""Most lines (models × batch sizes) the memory panel of a sweep draws: past it, neither the lines nor the legend
can be told apart, and matplotlib's legend placement grows with their number (5,000 took minutes)."""


def plot_sweep(r: SweepReport, path: Path, units: str) -> None:
    """Write sweep_figure to `path` (format from its suffix); a grid of more than MAX_SWEEP_LINES lines is
    refused."""
    lines = len(r.models) * len(r.grid.batch)
    if lines > MAX_SWEEP_LINES:
        raise UserError(f"`plot`: {len(r.models):,} model(s) × {len(r.grid.batch):,} batch sizes make {lines:,} lines, "
                        f"past the {MAX_SWEEP_LINES} a plot can tell apart; plot fewer `batch` values, or leave "
                        "`plot` out and read the table (`format` csv)")
    _save(sweep_figure(r, units), path)


def _save(fig, path: Path) -> None:
    """fig to path, without matplotlib's layout warnings on stderr (a crowded legend): the figure is written all
    the same."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.savefig(path)


def sweep_figure(r: SweepReport, units: str):
    """The two panels of a sweep as a matplotlib Figure: memory vs context (one line per model and batch) with,
    given a GPU, a dashed line at the GPUs' usable memory together (usable_bytes_all); time per output token vs
    batch at the longest context. A point that does not fit (`fits` false) is a hollow marker, one that fits (or
    with no GPU) a filled one; x ticks only at the swept values. Log axes; GiB under --units iec, else GB."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter

    scale, unit = (2**30, "GiB") if units == "iec" else (10**9, "GB")
    longest = r.grid.seq[-1]
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    memory, tpot = fig.subplots(1, 2)
    for i, model in enumerate(r.models):  # a colour per model, a line style per batch
        rows = [x for x in r.rows if x.model == model]
        for j, b in enumerate(r.grid.batch):
            line = [(x.seq, x.memory_bytes / scale, x.fits) for x in rows if x.batch == b]
            _points(memory, line, f"C{i % 10}", STYLES[j % len(STYLES)], f"{model}, batch {b:,}")
        line = [(x.batch, x.tpot_s * 1e3, x.fits) for x in rows if x.seq == longest and x.tpot_s is not None]
        if line:
            _points(tpot, line, f"C{i % 10}", "-", model)
    if r.usable_bytes_all is not None:
        each = f" ({r.gpus} × {r.usable_bytes / scale:,.1f})" if r.gpus > 1 else ""
        memory.axhline(r.usable_bytes_all / scale, color="0.25", linestyle="--", linewidth=1, gid="capacity",
                       label=f"usable on {r.gpus} × {r.gpu}: {r.usable_bytes_all / scale:,.1f}{each} {unit}")
    if any(x.fits is False for x in r.rows):
        memory.plot([], [], linestyle="none", marker="o", markerfacecolor="none", markeredgecolor="0.4",
                    label="hollow: does not fit (per GPU, as fit)")
    memory.set(xlabel="context (tokens)", ylabel=f"inference memory ({unit})",
               title="memory: weights + KV cache + activations")
    memory.set_xscale("log", base=2)
    memory.set_yscale("log")
    memory.yaxis.set_major_formatter(LogFormatter())  # 300, not 3×10²; minor labels only over a narrow range
    memory.yaxis.set_minor_formatter(LogFormatter())
    _swept_ticks(memory, r.grid.seq)
    where = f", {r.gpus} × {r.gpu}" if r.gpu else ""
    tpot.set(xlabel="batch", ylabel="time per output token (ms)", title=f"time per output token at {longest:,} tokens{where}")
    tpot.set_xscale("log", base=2)
    if tpot.lines:
        _swept_ticks(tpot, r.grid.batch)
    else:
        why = "no --gpu given" if r.gpu is None else "the weights do not fit"
        tpot.text(0.5, 0.5, f"no latency: {why}", ha="center", transform=tpot.transAxes)
        tpot.set_xticks([])
        tpot.set_xticks([], minor=True)
        tpot.set_yticks([])
    _finish(fig, (memory, tpot))
    return fig


def _points(ax, points: list[tuple[float, float, bool | None]], color: str, style: str, label: str) -> None:
    """A labelled line through every point; markers filled where the point fits (or no GPU was given), hollow where
    it does not (gid "no-fit")."""
    xs, ys, fits = zip(*points)
    ax.plot(xs, ys, color=color, linestyle=style, label=label)
    for gid, keep, face in (("fit", lambda f: f is not False, color), ("no-fit", lambda f: f is False, "none")):
        shown = [(x, y) for x, y, f in points if keep(f)]
        if shown:
            ax.plot(*zip(*shown), color=color, linestyle="none", marker="o", markersize=4, markerfacecolor=face,
                    gid=gid)


MAX_TICK_LABELS = 10
"""Most labelled ticks on an x axis; past it, the swept values between them keep unlabelled minor ticks."""


def _swept_ticks(ax, values: list[int]) -> None:
    """x ticks (a log axis) at the swept values only (`1k` = 1024, `1m` = 1024², as the options take them): every
    one labelled, or, past MAX_TICK_LABELS, the first, the last and those at least 1/MAX_TICK_LABELS of the axis
    apart labelled, the rest minor ticks without labels."""
    from math import log2

    from matplotlib.ticker import NullFormatter

    major = values
    if len(values) > MAX_TICK_LABELS:
        gap = (log2(values[-1]) - log2(values[0])) / (MAX_TICK_LABELS - 1)
        major = [values[0]]
        for v in values[1:-1]:
            if log2(v) - log2(major[-1]) >= gap and log2(values[-1]) - log2(v) >= gap:
                major.append(v)
        major.append(values[-1])
    ax.set_xticks(major, [_count(v) for v in major])
    ax.set_xticks([v for v in values if v not in set(major)], minor=True)
    ax.xaxis.set_minor_formatter(NullFormatter())


def _count(n: int) -> str:
    """A swept value as the options write it: 1m, 32k, 1,000."""
    for size, suffix in ((1 << 20, "m"), (1 << 10, "k")):
        if n >= size and n % size == 0:
            return f"{n // size:,}{suffix}"
    return f"{n:,}"


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
    _finish(fig, (left, right))
    _save(fig, path)


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
    _finish(fig, (left, right))
    _save(fig, path)


def _finish(fig, axes) -> None:
    """Grid and legends."""
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")