"""A (GPU, engine) calibration profile (presets/calibration/engines/<engine>/<gpu>.yaml) for a GPU whose own
profile is by analogy (no published latency measurement of it in docs/accuracy.md's table subset) where the
engine's published serving runs on that GPU give one: the share of the fp8 peak the engine's matmuls over
block-scaled fp8 weights reach on that GPU (block_fp8_efficiency), fitted to that engine's table-subset points of
benchmarks/serving/ on that GPU; every other figure as the GPU's profile has it.

A prompt's time is made of that share (TTFT), and so is a decode step's under a prefill-first engine at many clients,
where prompts' steps stall the decodes (TPOT); the floor of a small decode step (kernel_s) is not fitted: the
points' loads do not tell it apart. Each point runs as evaluate.py runs it, with the share in place of the
profile's; the fit minimises the sum over the points of log(TTFT ratio)² + log(TPOT ratio)² by a golden-section
search (fit_profiles.golden) on the share's logarithm within BOUNDS. The held-out points are never run here.

Run: python benchmarks/serving/fit_engine_profiles.py mi300x vllm-v0            (the fit and its points)
     python benchmarks/serving/fit_engine_profiles.py mi300x vllm-v0 --write    (and the profile file)
after benchmarks/accuracy/fit_profiles.py --write, whose GPU profile it starts from.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.append(str(Path(__file__).parents[1] / "accuracy"))  # after this folder: its evaluate.py is not ours

import evaluate as ev  # noqa: E402
from fit_profiles import golden  # noqa: E402

from llmcalc.inputs.gpus import load_gpu  # noqa: E402
from llmcalc.inputs.time_models import CALIBRATION_DIR, dump_profile, load_time_model  # noqa: E402

FIGURE = "block_fp8_efficiency"
BOUNDS = (0.01, 0.6)
"""The share's bracket."""
STEPS = 16
"""Golden-section steps (the bracket's log-width shrinks by 0.618^16: the share to within 0.2%)."""
FITTED = ("ttft", "tpot")


def table_points(gpu: str, engine: str):
    """The filter of evaluate.evaluate: the table-subset points run on `engine`'s preset on `gpu`."""
    def keep(p: dict, split: str) -> bool:
        return split == "table" and p["gpu"] == gpu and ev.engine_preset(p) == engine
    return keep


def loss(gpu: str, engine: str, share: float) -> tuple[float, list[dict]]:
    rows, _ = ev.evaluate(only=table_points(gpu, engine), **{FIGURE: share})
    rows = [r for r in rows if r["quantity"] in FITTED]
    if not rows:
        raise SystemExit(f"no table-subset points of {engine} on {gpu} with a published TTFT or TPOT")
    return sum(math.log(r["ratio"]) ** 2 for r in rows), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpu")
    parser.add_argument("engine")
    parser.add_argument("--write", action="store_true", help="write presets/calibration/engines/<engine>/<gpu>.yaml")
    args = parser.parse_args()
    gpu = load_gpu(args.gpu)
    base = load_time_model("calibrated", gpu)
    if "by analogy" not in base.sources.get("compute_efficiency", ""):
        raise SystemExit(f"{args.gpu}'s own profile is fitted to its published measurements; no engine profile")
    log_share = golden(lambda x: loss(args.gpu, args.engine, math.exp(x))[0], *map(math.log, BOUNDS), STEPS)
    share = round(math.exp(log_share), 3)
    _, rows = loss(args.gpu, args.engine, share)
    for r in rows:
        print(f"{r['id']:<52} {r['quantity']:<5} measured / predicted {r['ratio']:.2f}")
    ids = sorted({r["id"] for r in rows})
    print(f"{args.engine} on {args.gpu}: {FIGURE} {share:g} ({share * gpu.peak('fp8') / 1e12:,.0f} TFLOP/s), "
          f"from {len(ids)} table-subset point(s)")
    if not args.write:
        return
    when = datetime.date.today().isoformat()
    sources = sorted({str(p["source"].get("repo") or p["source"].get("url")) for p in ev.points() if p["id"] in ids})
    models = sorted({r["model"] for r in rows})
    how = (f"fitted by benchmarks/serving/fit_engine_profiles.py ({when}) to the TTFT and TPOT of the "
           f"{len(ids)} table-subset point(s) of benchmarks/serving/ run on {args.engine} on {args.gpu} ("
           f"{', '.join(ids)}; source {', '.join(sources)}; model {', '.join(models)}): that engine's kernels on "
           "this GPU as those runs had them; the GPU's own profile is by analogy")
    tm = base.model_copy(update={"engine": args.engine, FIGURE: share, "sources": dict(base.sources) | {FIGURE: how}})
    path = CALIBRATION_DIR / "engines" / args.engine / f"{args.gpu}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = [f"Calibration profile for {args.gpu} under the {args.engine} engine: presets/calibration/{args.gpu}.yaml",
              f"with {FIGURE} fitted to that engine's runs on it; regenerate with",
              f"benchmarks/serving/fit_engine_profiles.py {args.gpu} {args.engine} --write (after",
              "benchmarks/accuracy/fit_profiles.py --write)"]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_profile(tm, header))
    tmp.replace(path)
    print(f"wrote {path.relative_to(ev.ROOT)}")


if __name__ == "__main__":
    main()
