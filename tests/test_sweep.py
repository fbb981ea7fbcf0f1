"""`llmcalc sweep`: the fast evaluator equals the estimators, grid specs, and the command's outputs."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import subprocess
import sys

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.latency import latency
from llmcalc.costs.memory import memory
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.grid import check_size, parse_grid
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.model.mla import MLA
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.views.sweep import Sweeper
from llmcalc.workload import Layout, Workload

H100 = load_gpu("h100-sxm")
EDGES = [1, 2, 3, 4095, 4096, 4097, 8191, 8192, 131072]  # around gemma2-9b's and mistral's 4096 windows


def estimators(spec, w: Workload, batch: int, seq: int, gpu=H100, tm: TimeModel = ROOFLINE) -> dict:
    """The same figures from the plain estimators, as `llmcalc kv/memory/flops/latency` compute them."""
    m = memory(spec, Workload(batch=batch, seq=seq, weights_dtype=w.weights_dtype, kv_dtype=w.kv_dtype,
                              **({"group_size": w.group_size} if w.weights_dtype == "int4" else {})))
    f = flops(spec, Workload(batch=batch, seq=seq, gen=1, mla_decode=w.mla_decode))
    kv = kv_cache(spec, Workload(batch=batch, seq=seq, kv_dtype=w.kv_dtype))
    out = {"kv_bytes": kv.total_bytes, "weights_bytes": m.weights_bytes,
           "activation_bytes": m.activation_bytes, "memory_bytes": m.total_bytes,
           "prefill_flops": f.prefill_flops, "decode_flops": f.decode_flops}
    try:
        r = latency(spec, gpu, w.model_copy(update={"batch": batch, "seq": seq, "gen": 1}), tm)
    except UserError:  # the weights do not fit: no time
        return out | {"ttft_s": None, "tpot_s": None, "tokens_per_s": None, "fits": False}
    return out | {"ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "tokens_per_s": r.decode_tokens_per_s, "fits": r.fits}


def assert_equal(sweeper: Sweeper, w: Workload, points: list[tuple[int, int]]) -> None:
    for batch, seq in points:
        got = sweeper.point(batch, seq)._asdict()
        for field, want in estimators(sweeper.spec, w, batch, seq, tm=sweeper.tm).items():
            if isinstance(want, float):
                assert math.isclose(got[field], want, rel_tol=1e-9), (batch, seq, field, got[field], want)
            else:
                assert got[field] == want, (batch, seq, field, got[field], want)


def points(dp: int = 1, n: int = 20, seed: int = 0) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    grid = [(dp * rng.choice([1, 2, 3, 8, 64, 333]), s) for s in EDGES]
    return grid + [(dp * rng.randint(1, 512), rng.randint(1, 300_000)) for _ in range(n)]


CASES = [  # (preset, tp, pp, dp, ep, weights, kv, mla_decode): dense, sliding, MoE, MLA and DSA presets, several layouts
    ("llama2-7b", 1, 1, 1, 1, "bf16", "bf16", "absorbed"),
    ("llama2-7b", 2, 1, 1, 1, "bf16", "fp8", "absorbed"),
    ("mixtral-8x7b", 2, 1, 1, 1, "bf16", "bf16", "absorbed"),
    ("mixtral-8x7b", 2, 1, 2, 4, "bf16", "bf16", "absorbed"),
    ("deepseek-v2-lite", 1, 1, 1, 1, "bf16", "bf16", "absorbed"),
    ("deepseek-v2-lite", 2, 1, 1, 1, "bf16", "int4", "decompress"),
    ("gemma2-9b", 1, 1, 1, 1, "bf16", "bf16", "absorbed"),
    ("gemma2-9b", 2, 2, 1, 1, "int4", "bf16", "absorbed"),
    ("qwen3-30b-a3b", 1, 1, 1, 1, "bf16", "bf16", "absorbed"),
    ("qwen3-30b-a3b", 2, 1, 1, 2, "fp8", "bf16", "absorbed"),
    ("deepseek-v3", 8, 1, 1, 1, "int4", "bf16", "absorbed"),
    ("deepseek-v3", 8, 1, 1, 8, "int4", "fp8", "decompress"),
    ("deepseek-v3", 16, 1, 1, 16, "int4", "fp8", "absorbed"),  # tp and ep 16: beyond an 8-GPU node, the network
    ("falcon-7b", 1, 1, 1, 1, "bf16", "bf16", "absorbed"),
    ("falcon-7b", 1, 1, 2, 1, "bf16", "fp8", "absorbed"),  # 71 heads: no tensor parallel
    ("gpt3-175b", 8, 1, 1, 1, "int8", "bf16", "absorbed"),  # rounded terms: an LM-head slope 8 does not divide
    ("qwen1.5-moe-a2.7b", 4, 1, 1, 1, "bf16", "bf16", "absorbed"),  # and a shared gate 4 does not
    ("switch-base-8-decoder", 1, 1, 1, 1, "bf16", "bf16", "absorbed"),  # top-1, relu experts, 6 dense layers
    ("gshard-top2-decoder", 2, 1, 2, 4, "bf16", "fp8", "absorbed"),
    ("longformer-decoder-example", 2, 1, 1, 1, "bf16", "fp8", "absorbed"),  # window + globals: a capped window
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:5])))
def test_fast_path_equals_estimators(case):
    name, tp, pp, dp, ep, weights, kv, mla = case
    w = Workload(weights_dtype=weights, kv_dtype=kv, layout=Layout(tp=tp, pp=pp, dp=dp, ep=ep), mla_decode=mla)
    sweeper = Sweeper(load_preset(name), H100, w)
    assert sweeper.weights_per_gpu is not None
    assert_equal(sweeper, w, points(dp, seed=CASES.index(case)))


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_sweeps_as_its_estimators(name):
    """Every mixer the presets hold (hybrids of attention beside Mamba, cross-attention over image tokens, recurrent
    states) and a relative position encoding's projection of the distances (Gopher, Chinchilla) enter the sweep's
    forms as kv, memory, flops and latency count them; an encoder is refused as `sweep` refuses it."""
    spec = load_preset(name)
    w = Workload()
    try:
        spec.stack.check_timed("model", w.layout)
    except UserError as e:
        assert "\n" not in str(e)
        return
    assert_equal(Sweeper(spec, H100, w), w, [(1, 1), (3, 700), (2, 5000)])


PARTIAL = TimeModel(name="test", compute_efficiency=0.7, fp8_efficiency=0.5, attention_efficiency=0.6,
                    memory_efficiency=0.75, matmul_pad_rows=48, overlap=0.4, kernel_s=3e-6, collective_s=1e-5,
                    step_s=2e-4)
"""A time model with every term a calibrated profile has (arbitrary figures)."""


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:5])))
def test_fast_path_equals_estimators_with_overlap_and_fixed_costs(case):
    name, tp, pp, dp, ep, weights, kv, mla = case
    compute = "fp8" if weights == "fp8" else "bf16"
    w = Workload(weights_dtype=weights, kv_dtype=kv, compute_dtype=compute, layout=Layout(tp=tp, pp=pp, dp=dp, ep=ep),
                 mla_decode=mla)
    sweeper = Sweeper(load_preset(name), H100, w, PARTIAL)
    assert_equal(sweeper, w, points(dp, n=4, seed=CASES.index(case)))


def test_weights_that_do_not_fit_leave_latency_out():
    spec = load_preset("mixtral-8x7b")  # 93 GB of bf16 weights, 77 GB usable on one H100
    sweeper = Sweeper(spec, H100)
    p = sweeper.point(8, 4096)
    assert (p.ttft_s, p.tpot_s, p.tokens_per_s, p.fits) == (None, None, None, False)
    assert p.memory_bytes == memory(spec, Workload(batch=8, seq=4096)).total_bytes
    assert "no latency: `gpus`:" in sweeper.notes[0]


def test_rounded_terms_stay_exact():
    base = load_preset("deepseek-v2-lite")  # an odd latent (511 + 64) in int4: half bytes round up per layer
    spec = base.model_copy(update={"attention": MLA(**(base.attention.model_dump() | {"kv_lora_rank": 511}))})
    w = Workload(kv_dtype="int4", layout=Layout(tp=2))
    sweeper = Sweeper(spec, H100, w)
    assert "//" in sweeper.source  # a floor that does not fold: ⌈x·575·4 / 8⌉
    assert_equal(sweeper, w, points(n=8))


def test_grid_checks_batches_against_dp():
    sweeper = Sweeper(load_preset("llama2-7b"), H100, Workload(layout=Layout(tp=1, dp=2)))
    with pytest.raises(UserError, match="`batch`"):
        sweeper.grid([1, 2], [1024])
    assert [p.batch for p in sweeper.grid([2, 4], [1024, 2048])] == [2, 2, 4, 4]


def test_grid_specs():
    assert parse_grid("1k..128k", "seq") == [1024 * 2**i for i in range(8)]
    assert parse_grid("1,8,64", "batch") == [1, 8, 64]
    assert parse_grid("1k..8k:1k", "seq") == [1024 * i for i in range(1, 9)]
    assert parse_grid("3..20", "seq") == [3, 6, 12]
    assert parse_grid("64, 1,4..16,8", "batch") == [1, 4, 8, 16, 64]
    assert parse_grid("1m", "seq") == [1024**2]
    assert parse_grid("10..12:5", "seq") == [10]


@pytest.mark.parametrize("text, message", [
    ("0", "must be > 0"), ("5..2", "ends below its start"), ("abc", "not a whole number"),
    ("1.5k", "not a whole number"), ("", "not a whole number"), ("1..8:0", "must be > 0"),
    ("1..20000:1", "more than 10,000"), ("1,²", "not a whole number"),
])
def test_bad_grid_specs(text, message):
    with pytest.raises(UserError, match=message) as e:
        parse_grid(text, "seq")
    assert str(e.value).startswith("`seq`: ")


def test_grid_size_limit():
    check_size(list(range(100)), list(range(100)))
    with pytest.raises(UserError, match="10,000 points"):
        check_size(list(range(101)), list(range(100)))


def test_cli_json_rows_per_model_and_point(cli_json):
    out = cli_json("sweep", "--preset", "llama2-7b", "--preset", "gemma2-9b", "--seq", "1k..8k", "--batch", "1,8",
                   "--gpu", "h100-sxm")
    assert out["models"] == ["llama2-7b", "gemma2-9b"] and out["gpu"] == "h100-sxm"
    assert out["grid"] == {"batch": [1, 8], "seq": [1024, 2048, 4096, 8192]}
    assert len(out["rows"]) == 2 * 2 * 4
    row = out["rows"][0]
    assert (row["model"], row["batch"], row["seq"]) == ("llama2-7b", 1, 1024)
    for key in ("kv_bytes", "weights_bytes", "activation_bytes", "memory_bytes", "prefill_flops", "decode_flops"):
        assert type(row[key]) is int
    assert row["memory_bytes"] == row["weights_bytes"] + row["kv_bytes"] + row["activation_bytes"]
    assert row["tokens_per_s"] == pytest.approx(row["batch"] / row["tpot_s"])
    assert row["kv_bytes"] == cli_json("kv", "--preset", "llama2-7b", "--batch", "1", "--seq", "1024")["total_bytes"]


def test_cli_csv_one_row_per_point(cli):
    r = cli("sweep", "--preset", "llama2-7b", "--preset", "mistral-7b", "--seq", "1k,4k,16k", "--batch", "1,64",
            "--gpu", "h100-sxm", "-f", "csv")
    assert r.returncode == 0, r.stderr
    table = list(csv.DictReader(io.StringIO(r.stdout)))
    rows = [x for x in table if x["row"] == "item"]
    assert len(rows) == 2 * 3 * 2 and [x["row"] for x in table] == ["item"] * 12 + ["summary"]
    assert table[-1]["gpu"] == "h100-sxm" and table[-1]["grid.seq"] == "1024;4096;16384"
    assert [x["model"] for x in rows] == ["llama2-7b"] * 6 + ["mistral-7b"] * 6
    assert {"batch", "seq", "kv_bytes", "memory_bytes", "ttft_s", "tpot_s", "tokens_per_s", "fits"} <= set(rows[0])


def test_cli_table_and_bars(cli):
    r = cli("sweep", "--preset", "llama2-7b", "--seq", "1k..4k", "--batch", "1,8", "--bars", "--gpu", "h100-sxm")
    assert r.returncode == 0, r.stderr
    for text in ("llama2-7b: memory", "FLOPs and time", "TTFT", "4,096", "█"):
        assert text in r.stdout
    assert "█" not in cli("sweep", "--preset", "llama2-7b", "--seq", "1k..4k").stdout


def test_no_gpu_is_assumed(cli_json):
    """Without --gpu a sweep has no time and no fit columns, as latency and fit refuse to guess a GPU."""
    out = cli_json("sweep", "--preset", "llama2-7b", "--seq", "1k,4k")
    assert out["gpu"] is None
    assert all(row[k] is None for row in out["rows"] for k in ("ttft_s", "tpot_s", "tokens_per_s", "fits"))


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<svg")])
def test_plot_writes_only_the_named_file(cli, tmp_path, suffix, magic):
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install matplotlib)")
    target = tmp_path / f"out{suffix}"
    r = cli("sweep", "--preset", "llama2-7b", "--preset", "mixtral-8x7b", "--seq", "1k..32k", "--batch", "1,8",
            "--gpu", "h100-sxm", "--plot", str(target), "-f", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"]
    data = target.read_bytes()
    assert data.startswith(magic) if suffix == ".png" else magic in data[:2000]
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def _plotted(ax, gid: str) -> set[tuple[float, float]]:
    """The (x, y) points of the artists of `ax` tagged `gid`."""
    return {(float(x), float(y)) for line in ax.lines if line.get_gid() == gid
            for x, y in zip(line.get_xdata(), line.get_ydata())}


@pytest.mark.parametrize("units, scale, unit", [("si", 10**9, "GB"), ("iec", 2**30, "GiB")])
def test_plot_draws_the_capacity_and_the_points_that_do_not_fit_apart(cli_json, units, scale, unit):
    """The memory panel: a dashed line at the GPU's usable memory (fit's usable_bytes), labelled in the unit; points
    whose `fits` is false hollow, the others filled; x ticks at the swept values only, in both panels."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install matplotlib)")
    from llmcalc.render.plot import sweep_figure
    from llmcalc.views.sweep import sweep

    seqs, batches = [1024, 4096, 32768, 131072], [1, 16, 64]
    r = sweep([load_preset("llama2-7b")], H100, batches, seqs)
    fit = cli_json("fit", "-p", "llama2-7b", "--gpu", "h100-sxm")
    assert r.usable_bytes == r.usable_bytes_all == fit["usable_bytes"]
    memory, tpot = sweep_figure(r, units).axes
    (capacity,) = [x for x in memory.lines if x.get_gid() == "capacity"]
    assert list(capacity.get_ydata()) == [r.usable_bytes / scale] * 2
    assert f"{r.usable_bytes / scale:,.1f} {unit}" in capacity.get_label()
    want = {fits: {(x.seq, x.memory_bytes / scale) for x in r.rows if x.fits is fits} for fits in (True, False)}
    assert want[True] and want[False]
    assert _plotted(memory, "no-fit") == want[False] and _plotted(memory, "fit") == want[True]
    longest = {fits: {(x.batch, x.tpot_s * 1e3) for x in r.rows if x.seq == seqs[-1] and x.fits is fits}
               for fits in (True, False)}
    assert _plotted(tpot, "no-fit") == longest[False] and _plotted(tpot, "fit") == longest[True]
    assert list(memory.get_xticks()) == seqs and list(tpot.get_xticks()) == batches
    assert [t.get_text() for t in memory.get_xticklabels()] == ["1k", "4k", "32k", "128k"]
    assert list(memory.get_xticks(minor=True)) == [] == list(tpot.get_xticks(minor=True))


def test_plot_capacity_is_the_gpus_together_and_absent_without_a_gpu():
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install matplotlib)")
    from llmcalc.render.plot import MAX_TICK_LABELS, sweep_figure
    from llmcalc.views.sweep import sweep

    seqs = parse_grid("1k..16k:512", "seq")
    r = sweep([load_preset("llama3-8b")], H100, [1, 8], seqs, Workload(layout=Layout(tp=2)))
    assert r.usable_bytes_all == 2 * r.usable_bytes
    memory, _ = sweep_figure(r, "si").axes
    (capacity,) = [x for x in memory.lines if x.get_gid() == "capacity"]
    assert capacity.get_ydata()[0] == r.usable_bytes_all / 1e9 and "2 × h100-sxm" in capacity.get_label()
    major, minor = list(memory.get_xticks()), list(memory.get_xticks(minor=True))
    assert len(seqs) > MAX_TICK_LABELS >= len(major) and major[0] == seqs[0] and major[-1] == seqs[-1]
    assert sorted(major + minor) == seqs  # a tick at every swept value, and at nothing else
    r = sweep([load_preset("llama3-8b")], None, [1, 8], [1024, 4096])
    assert r.usable_bytes is None is r.usable_bytes_all
    memory, tpot = sweep_figure(r, "si").axes
    assert not [x for x in memory.lines if x.get_gid() in ("capacity", "no-fit")]
    assert _plotted(memory, "fit") == {(x.seq, x.memory_bytes / 1e9) for x in r.rows}
    assert list(tpot.get_xticks()) == [] and not tpot.lines


def test_plot_without_matplotlib_names_the_extra(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # makes `import matplotlib` fail
            "from llmcalc.cli import main\n"
            f"sys.argv = ['llmcalc', 'sweep', '--preset', 'llama2-7b', '--plot', {str(tmp_path / 'x.png')!r}]\n"
            "main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "pip install matplotlib" in r.stderr


def test_sweep_without_plot_imports_no_plotting():
    code = ("import sys; from llmcalc.cli import load_commands\n"
            "sys.argv = ['llmcalc', 'sweep', '--preset', 'llama2-7b', '-f', 'json']\n"
            "load_commands(sys.argv[1:])(standalone_mode=False)\n"
            "print(' '.join(sys.modules))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
                 .stdout.split())
    assert not loaded & {"matplotlib", "numpy", "torch"}


@pytest.mark.parametrize("args", [
    ["--seq", "0"], ["--seq", "5..2"], ["--seq", "abc"], ["--batch", "1..1m:1"],
    ["--seq", "1..10k:1", "--batch", "1,2"],
    ["--plot", "/no/such/folder/x.png"], ["--plot", "x.pdf"], ["--tp", "3"],
])
def test_bad_input_is_one_line_exit_2(cli, args):
    r = cli("sweep", "--preset", "llama2-7b", *args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr


def test_attention_variants_are_series(cli_json):
    """--attention makes each variant a series whose KV equals `llmcalc compare` for the same variant."""
    out = cli_json("sweep", "--preset", "llama2-7b", "--attention", "mha,gqa,mla", "--seq", "4k,16k", "--batch", "2")
    assert out["models"] == ["llama2-7b [mha]", "llama2-7b [gqa]", "llama2-7b [mla]"]
    for seq in (4096, 16384):
        compared = {r["model"]: r["kv_cache_bytes"] for r in
                    cli_json("compare", "gqa", "mla", "--seq", str(seq), "--batch", "2")["rows"]}
        for row in (r for r in out["rows"] if r["seq"] == seq):
            assert row["kv_bytes"] == compared[row["model"]]


def test_plot_of_more_lines_than_can_be_told_apart_is_refused_and_writes_nothing(cli, tmp_path):
    """--batch 1..5000:1 --plot ran past a minute in matplotlib's legend placement; 500 lines took 4.5 s and drew a
    legend over the plot, with matplotlib's warnings on stderr. Past MAX_SWEEP_LINES the plot is refused, one line."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install matplotlib)")
    from llmcalc.render.plot import MAX_SWEEP_LINES

    target = tmp_path / "many.png"
    r = cli("sweep", "-p", "llama2-7b", "--seq", "1,2", "--batch", f"1..{MAX_SWEEP_LINES + 1}:1", "--plot",
            str(target), "-f", "csv")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{MAX_SWEEP_LINES + 1} lines" in r.stderr and "--plot" in r.stderr and not list(tmp_path.iterdir())
    r = cli("sweep", "-p", "llama2-7b", "--seq", "1,2", "--batch", f"1..{MAX_SWEEP_LINES}:1", "--plot",
            str(target), "-f", "csv")
    assert r.returncode == 0 and r.stderr == f"plot: wrote {target}\n", r.stderr
