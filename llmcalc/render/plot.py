"""`llmcalc sweep --plot FILE.png|svg`: memory vs context (one line per model and batch) beside time
per output token vs batch (one line per model, at the grid's longest context). matplotlib is the
optional extra `plot`, imported only here.
"""

from __future__ import annotations

from pathlib import Path

from llmcalc.errors import UserError
from llmcalc.reports.sweep import SweepReport

INSTALL = "pip install 'llmcalc-cost[plot]'"
STYLES = ("-", "--", ":", "-.")


def check_target(path: Path) -> None:
    """Before any work: a .png or .svg in a folder that exists, and matplotlib importable."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"`plot`: {path} is neither .png nor .svg; name a FILE.png or FILE.svg")
    if path.is_dir():
        raise UserError(f"`plot`: {path} is a folder; name a FILE.png or FILE.svg")
    if not path.parent.is_dir():
        raise UserError(f"`plot`: folder {path.parent} does not exist; create it or name a file in an existing one")
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
    for ax in (memory, tpot):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    fig.savefig(path)
