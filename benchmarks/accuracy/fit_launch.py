"""Fit the calibrated profiles' launch_s, the host's seconds per kernel launched without CUDA graphs, to the
published runs of docs/accuracy.md's table subset that ran without them, and write it into every profile.

Run: python benchmarks/accuracy/fit_launch.py [--write]   (without --write: print the fit and each row)

Which rows: the table subset's exact rows whose point says `cuda_graphs: false` (benchmarks/accuracy/published.yaml:
an engine of its time with none, or a launch that turned them off). Each is timed by `latency` under its GPU's
bundled profile with `enforce_eager` (llmcalc/costs/step_time.py: StepTime.bounded), every other figure as the
profile has it. launch_s is the value at which the median of measured / predicted over those rows is 1, found by
bisection (the prediction does not fall as launch_s grows). The held-out subset is not run, nor any serving point:
benchmarks/serving/'s TensorRT-LLM runs without CUDA graphs (another source, another engine) check the figure.

Like kernel_s, the figure is the serving software's, not a GPU's: --write puts the same launch_s, with its source,
in every presets/calibration/<gpu>.yaml (after step_s; the source last), replacing the one there.
"""

from __future__ import annotations

import argparse
import re
import statistics
from datetime import date

from fit_profiles import OUT, load_evaluate

from llmcalc.costs.latency import latency

HI = 1e-3
"""The bisection's upper end: a millisecond per kernel, far above any host's."""


def eager_pairs(ev) -> list:
    """The table subset's exact pairs of points run without CUDA graphs."""
    points = ev.load_points()
    splits = ev.assign_splits(points)
    return [p for p in ev.usable_pairs(points) if splits.get(p.id) == "table" and not p.approx and p.inputs.eager]


def ratios(ev, pairs: list, launch_s: float) -> list[float]:
    """measured / predicted of each pair under its GPU's profile with this launch_s."""
    out = []
    for pair in pairs:
        tm = ev.profile(ev.gpu_of(pair.inputs).name).model_copy(update={"launch_s": launch_s})
        out.append(pair.measured_s / ev.predict(pair, lambda s, g, w, tm=tm: latency(s, g, w, tm)))
    return out


def fit(ev, pairs: list) -> float:
    """The launch_s at which the median ratio is 1 (bisection over [0, HI], 60 halvings)."""
    lo, hi = 0.0, HI
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if statistics.median(ratios(ev, pairs, mid)) > 1 else (lo, mid)
    return float(f"{(lo + hi) / 2:.3g}")


def write(launch_s: float, pairs: list) -> None:
    """launch_s and its source into every bundled profile (textually: their comments stay)."""
    rows = ", ".join(p.id for p in pairs)
    source = (f"fitted by benchmarks/accuracy/fit_launch.py ({date.today().isoformat()}) to the {len(pairs)} "
              f"table-subset measurements of docs/accuracy.md run without CUDA graphs ({rows}): the median measured / predicted "
              "is 1 under each GPU's profile; the serving software's host, shared by every GPU")
    for path in sorted(OUT.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^launch_s: .*\n", "", text, flags=re.M)
        text = re.sub(r"^  launch_s: '(?:[^']|'')*'\n?", "", text, flags=re.M)
        text = re.sub(r"^(step_s: .*\n)", rf"\g<1>launch_s: {launch_s!r}\n", text, count=1, flags=re.M)
        quoted = source.replace("'", "''")
        path.write_text(text.rstrip("\n") + f"\n  launch_s: '{quoted}'\n", encoding="utf-8")
        print(f"wrote launch_s {launch_s!r} to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write launch_s into presets/calibration/<gpu>.yaml")
    args = parser.parse_args()
    ev = load_evaluate()
    pairs = eager_pairs(ev)
    if not pairs:
        raise SystemExit("no table-subset row runs without CUDA graphs")
    launch_s = fit(ev, pairs)
    print(f"launch_s = {launch_s!r} s per kernel, from {len(pairs)} table-subset rows")
    for p, before, after in zip(pairs, ratios(ev, pairs, 0.0), ratios(ev, pairs, launch_s)):
        print(f"  {p.id}: measured / predicted {before:.2f} without the term, {after:.2f} with it")
    if args.write:
        write(launch_s, pairs)


if __name__ == "__main__":
    main()
