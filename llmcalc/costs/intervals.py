"""A report's time figures with their error bands (llmcalc/model/intervals.py, docs/intervals.md): the range the
measured figure fell in on the published runs' table subset, as [low, high] beside the figure
(`<figure>_range`), and a note of how often that band held on the held-out runs. No band: the figure stands
alone and the note says why."""

from __future__ import annotations

from llmcalc.model.intervals import Band, Bands


def _note(bands: Bands, what: str, found: dict[str, Band | None], ranges: dict[str, list[float] | None]) -> str:
    units = {"tokens_per_s": "tokens/s", "output_tokens_per_s": "tokens/s"}
    held = [f"{name} {r[0]:.3g}–{r[1]:.3g} {units.get(name, 's')} ({b.held()})"
            for name, b in found.items() if b is not None and (r := ranges[f"{name}_range"]) is not None]
    if not held:
        return f"--interval: no error band for {what} (docs/intervals.md)"
    return (f"ranges: the {bands.label} band of measured / predicted on published runs of {what} (docs/intervals.md): "
            + "; ".join(held))


def latency_ranges(report, bands: Bands) -> dict:
    """ttft_s_range, tpot_s_range, tokens_per_s_range of a LatencyReport under its time model, and the note."""
    found = {name: bands.find("latency", report.time_model, name) for name in ("ttft_s", "tpot_s", "tokens_per_s")}
    ranges = {"ttft_s_range": found["ttft_s"] and found["ttft_s"].of_time(report.ttft_s),
              "tpot_s_range": found["tpot_s"] and found["tpot_s"].of_time(report.tpot_s),
              "tokens_per_s_range": found["tokens_per_s"] and found["tokens_per_s"].of_rate(report.tokens_per_s)}
    return ranges | {"notes": [*report.notes, _note(bands, f"the {report.time_model} time model", found, ranges)]}


def serve_ranges(report, bands: Bands) -> dict:
    """ttft_s_range and tpot_s_range (of the medians) and output_tokens_per_s_range of a ServeReport on its
    engine (the runs of every engine where its own gave no band), and the note."""
    found = {name: bands.find("serve", report.engine, name, "all")
             for name in ("ttft_s", "tpot_s", "output_tokens_per_s")}
    own = all(bands.find("serve", report.engine, name) for name in found)
    what = f"{report.engine}" if own else f"{report.engine} (or, lacking its own, of every engine)"
    ranges = {"ttft_s_range": found["ttft_s"] and found["ttft_s"].of_time(report.ttft_s.p50),
              "tpot_s_range": found["tpot_s"] and found["tpot_s"].of_time(report.tpot_s.p50),
              "output_tokens_per_s_range": found["output_tokens_per_s"]
              and found["output_tokens_per_s"].of_rate(report.output_tokens_per_s)}
    return ranges | {"notes": [*report.notes, _note(bands, what, found, ranges)]}


def train_ranges(report, bands: Bands) -> dict:
    """step_s_range of a TrainReport under its time model, and the note."""
    found = {"step_s": bands.find("train", report.time_model, "step_s")}
    ranges = {"step_s_range": found["step_s"] and found["step_s"].of_time(report.step_s)}
    what = f"training under the {report.time_model} time model"
    return ranges | {"notes": [*report.notes, _note(bands, what, found, ranges)]}
