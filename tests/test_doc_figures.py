"""The worked figures of docs/ are true: every number a page works out by hand from a model's shapes, a GPU's
figures or a command's result ("2 · 32 · 4096 · 2 = 524,288 bytes per token", "≈ 69 ms per token") is recomputed
here, independently of the page, and the page must state it as this file writes it.

How a page's worked figures are kept true: a figure a command prints is shown as that command's ```console block
(tests/test_readme.py runs it); any other worked figure has a function below, registered with `@on(page)`, that
recomputes it from the preset and GPU YAML files and the cost functions and yields the page's sentence with the
recomputed figures written in, at the precision the page writes them (an approximate "≈ 69 ms" is compared to the
millisecond). A changed preset, GPU file or formula then fails here until the page is updated; a new worked figure
in a page gets its function here. Pages are compared with their whitespace collapsed, so a sentence may wrap."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import settings
import yaml

from llmcalc.cli import main
from llmcalc.costs.params import params
from llmcalc.inputs.engines import load_engine
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset

ROOT = Path(__file__).parents[1]
PRESETS = ROOT / "presets"

FIGURES: dict[str, tuple[str, Callable[[], Iterator[str]], bool, bool]] = {}
"""Each worked figure's check by id (page::function): the page, a function yielding the page's text with the
figures recomputed, whether it takes seconds (a simulation, the reference model) and whether it needs torch."""


def on(page: str, slow: bool = False, measured: bool = False):
    """Register a function that yields text of `page` (relative to docs/) with its figures recomputed; `slow`: it
    simulates for seconds; `measured`: it runs the torch reference model (`validate`; slow, skipped without
    torch)."""
    def register(fn):
        FIGURES[f"{page}::{fn.__name__}"] = (page, fn, slow or measured, measured)
        return fn
    return register


@functools.cache
def page_text(page: str) -> str:
    return " ".join((ROOT / "docs" / page).read_text(encoding="utf-8").split())


@functools.cache
def spec(name: str):
    return load_preset(name)


@functools.cache
def raw(name: str) -> dict:
    """A preset's YAML as written."""
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text(encoding="utf-8"))


@functools.cache
def gpu_yaml(name: str) -> dict:
    return yaml.safe_load((PRESETS / "gpus" / f"{name}.yaml").read_text(encoding="utf-8"))


@functools.cache
def total(name: str) -> int:
    return params(spec(name)).total


@functools.cache
def report(*args: str) -> dict:
    """`llmcalc ARGS --format json`, run in this process: the report a command prints."""
    out = io.StringIO()
    argv, sys.argv = sys.argv, ["llmcalc", *args, "--format", "json"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main()
    except SystemExit as e:
        assert not e.code, f"llmcalc {' '.join(args)} exited {e.code}"
    finally:
        sys.argv = argv
    return json.loads(out.getvalue())


def n(x: float) -> str:
    """An exact count with separators: 1,099,511,627,776 (a float must be whole)."""
    assert x == int(x), x
    return f"{int(x):,}"


def f(x: float, places: int) -> str:
    """x at `places` decimals, with separators: 0.513, 1,425.5."""
    return f"{x:,.{places}f}"


def pct(part: float, whole: float, places: int) -> str:
    return f(100 * part / whole, places)


def row(kv: dict, layer_type: str) -> dict:
    return next(r for r in kv["per_layer"] if r["layer_type"] == layer_type)


def component(rows: list[dict], name: str, field: str) -> int:
    return next(r[field] for r in rows if r["component"] == name)


# docs/formulas.md ----------------------------------------------------------------------------------------------


@on("formulas.md")
def mixtral_active():
    moe, d, layers = raw("mixtral-8x7b")["ffn"], raw("mixtral-8x7b")["d_model"], raw("mixtral-8x7b")["n_layers"]
    skipped, matrices = moe["experts"] - moe["top_k"], 3 if moe["gated"] else 2
    active = total("mixtral-8x7b") - layers * skipped * matrices * d * moe["d_ff"]
    assert active == params(spec("mixtral-8x7b")).active
    yield (f"Mixtral-8x7B: {n(total('mixtral-8x7b'))} − {layers}·{skipped}·{matrices}·{d}·{moe['d_ff']} = {n(active)}.")
    yield f"as Mixtral's published {f(active / 1e9, 1)}B does"


@on("formulas.md")
def deepseek_v3_mtp_and_buffers():
    r, p = raw("deepseek-v3"), params(spec("deepseek-v3"))
    copies = 2 * r["vocab_size"] * r["d_model"]
    yield f"for V3, {n(p.mtp)} parameters, reported as `mtp`"
    yield (f"(2·V·d = {n(copies)} more), which is how {f(p.total / 1e9, 1)}B + {f(p.mtp / 1e9, 1)}B + "
           f"{f(copies / 1e9, 1)}B gives")
    moe_layers = r["n_layers"] - r["ffn"]["dense_layers"]
    yield f"(E per MoE layer, {n(r['ffn']['experts'] * moe_layers)} in all)"
    yield f"the published {n(p.total)} excludes it"


@on("formulas.md")
def mla_elements_per_token():
    a = raw("deepseek-v2")["attention"]
    ratio = (a["kv_lora_rank"] + a["qk_rope_head_dim"]) / a["qk_nope_head_dim"]
    yield (f"= `{ratio:g}·d_h·l` for DeepSeek-V2 (d_c = {a['kv_lora_rank']}, d_R = {a['qk_rope_head_dim']}, "
           f"d_h = {a['qk_nope_head_dim']})")


@on("formulas.md")
def llama2_7b_kv_layer():
    layer = row(report("kv", "-p", "llama2-7b", "-b", "64", "-s", "32k"), "full")
    yield (f"One layer is {n(layer['bytes_per_layer'])} bytes ({f(layer['bytes_per_layer'] / 1e9, 2)} GB) — the figure "
           f"the article \"Transformer-based LLM\" quotes as the whole cache, having left out the {layer['layers']} "
           "layers.")


@on("formulas.md")
def llama2_7b_rope_flops():
    a, layers = raw("llama2-7b")["attention"], raw("llama2-7b")["n_layers"]
    r = report("flops", "-p", "llama2-7b", "-b", "1", "-s", "4096")
    per = 3 * (a["heads"] + a["kv_heads"]) * a["head_dim"]
    assert r["positions"]["per_token_per_layer"] == per and r["positions"]["prefill"] == layers * 4096 * per
    yield (f"Llama-2-7B at batch 1 × 4,096: 3 · {a['heads'] + a['kv_heads']} · {a['head_dim']} = {n(per)} per token "
           f"per layer, {layers} · 4,096 · {n(per)} = {n(layers * 4096 * per)} prefill FLOPs "
           f"({pct(layers * 4096 * per, r['prefill_flops'], 3)}% of its {f(r['prefill_flops'] / 1e12, 2)} T matmul "
           "FLOPs)")


@on("formulas.md")
def chinchilla_exponents():
    from llmcalc.costs.scaling import LAWS

    one, two = LAWS["chinchilla-1"].exponent, LAWS["chinchilla-2"].exponent
    slope = math.log(216.2e12 / 8.0e9) / math.log(10e12 / 400e6)  # Table 3's 400M and 10T rows
    assert round(1 / (1 + slope), 4) == one and round(1 / (1 + 1.0411), 4) == two
    yield (f"ln(216.2T / 8.0B) / ln(10T / 400M) = {f(slope, 4)} = (1 − a) / a for approach 1, 1.0411 for approach 2) "
           f"is a = {one} and {two}")
    yield f"approach 1's 10B row, 6 · 10B · 205.1B = {6 * 10e9 * 205.1e9:.4e}".replace("e+", "e")
    yield f"(6 · 67B · 1.5T = {6 * 67e9 * 1.5e12:.2e}".replace("e+", "e")


@on("formulas.md")
def chinchilla_approach_3():
    from llmcalc.costs.scaling import LAWS, LOSS, TRAIN_FLOPS, optimum

    law = LAWS["chinchilla-3"]
    g3 = law.coefficient * TRAIN_FLOPS ** law.exponent
    tex = 0.2849 / (0.3392 + 0.2849)
    small, large = optimum(law, "params", 400e6)[1], optimum(law, "params", 10e12)[1]
    assert law.exponent == LOSS["beta"] / (LOSS["alpha"] + LOSS["beta"])
    yield f"With the printed coefficients a = {f(law.exponent, 4)} and G₃ = {f(g3, 3)}."
    yield (f"400M parameters get {f(small / 1e9, 1)}B tokens here and 9.2B there, 10T get {f(large / 1e12, 0)}T and "
           "1,425.5T")
    yield f"α = 0.3392, β = 0.2849 give a = {f(tex, 4)}"


@on("formulas.md")
def chinchilla_and_kaplan_at_1e21():
    from llmcalc.costs.scaling import LAWS, PF_DAY

    assert PF_DAY == 8.64e19
    yield f"1 PF-day = 10¹⁵ · 86,400 = {PF_DAY / 1e19:g}·10¹⁹ FLOPs"
    yield ("Appendix D.4's \"2.86 billion\" parameters at 10²¹ FLOPs "
           f"({f(LAWS['chinchilla-1'].params(1e21) / 1e9, 3)}B here)")
    yield f"This reproduces the {f(LAWS['kaplan'].params(1e21) / 1e9, 2)}B parameters Hoffmann et al."


@on("formulas.md")
def scaling_default_mfu():
    from llmcalc.costs.scaling import PUBLISHED_MFU

    yield f"The MFU defaults to {PUBLISHED_MFU:.0%}, what large published pre-training runs reach"


@on("formulas.md")
def int4_partial_groups():
    scale = 2  # one fp16 scale per group of 128 weights
    yield (f"(128: +1/{128 // scale} byte per weight; where g does not divide d_in, as for gpt-oss' "
           f"{raw('gpt-oss-20b')['d_model']} or Falcon's {raw('falcon-7b')['d_model']}, the last group is partial)")
    assert raw("gpt-oss-20b")["d_model"] % 128 and raw("falcon-7b")["d_model"] % 128


@on("formulas.md")
def llama2_70b_megatron_activations():
    r = report("memory", "-p", "llama2-70b", "--train", "-b", "1", "-s", "4096", "--tp", "8", "--sp",
               "--recompute", "selective")
    sbh_t = 4096 * raw("llama2-70b")["d_model"] // 8
    yield f"keep {r['activation_bytes_per_layer'] / sbh_t:g}·sbh/t"


@on("formulas.md")
def lora_adapter_counts():
    r, layers = raw("llama2-7b"), raw("llama2-7b")["n_layers"]
    d, ff = r["d_model"], r["ffn"]["d_ff"]
    qv = report("memory", "-p", "llama2-7b", "--train", "--lora", "8", "--lora-targets", "q,v")["trainable_params"]
    every = report("memory", "-p", "llama2-7b", "--train", "--lora", "64")["trainable_params"]
    assert qv == layers * 2 * 8 * (d + d) and every == layers * (4 * 64 * 2 * d + 3 * 64 * (d + ff))
    yield f"r = 8 on q and v: {layers} · 2 · 8 · ({d} + {d}) = {n(qv)}, the figure PEFT prints"
    yield f"r = 64 on all seven: {layers} · (4 · 64 · {2 * d} + 3 · 64 · {d + ff}) = {n(every)}."


# docs/roofline.md, docs/commands/gpus.md ----------------------------------------------------------------------


def gb_one_way(link) -> str:
    return f(link.bytes_per_s / 1e9, 0)


@on("roofline.md")
def link_tiers_of_collectives():
    from llmcalc.costs.parallel import collective_link
    from llmcalc.workload import Layout

    h100 = load_gpu("h100-sxm")
    node, net = h100.link(1), h100.link(h100.gpus_per_node + 1)
    tp16 = collective_link("comm/tp_all_reduce", Layout(tp=16), h100)
    ep16 = collective_link("comm/ep_all_to_all", Layout(dp=16, ep=16), h100)
    dp32 = collective_link("comm/dp_all_reduce", Layout(tp=2, dp=32), h100)
    per_node = h100.gpus_per_node // 2
    yield (f"On {h100.gpus_per_node}-GPU H100 nodes, tp 16 all-reduces at min({gb_one_way(node)}, "
           f"{h100.gpus_per_node} × "
           f"{gb_one_way(net)}) = {gb_one_way(tp16)} GB/s one way, an ep-16 all-to-all at {gb_one_way(ep16)}, and a "
           f"dp-32 gradient reduction with tp 2 at {per_node} × {gb_one_way(net)} = {gb_one_way(dp32)}.")


@on("roofline.md")
def link_tier_fields():
    per_node = {name: gpu_yaml(name)["gpus_per_node"] for name in ("a100-80gb", "a100-40gb", "h100-sxm", "h200", "h800",
                                                                   "h20", "b200", "b300", "mi300x", "gb200", "gb300",
                                                                   "h100-pcie", "rtx-3090", "l4", "l40s", "a10g",
                                                                   "rtx-4090")}
    assert {per_node[g] for g in ("a100-80gb", "a100-40gb", "h100-sxm", "h200", "h800", "h20", "b200", "b300",
                                  "mi300x")} == {8}
    assert per_node["gb300"] == per_node["gb200"]
    assert {per_node[g] for g in ("l4", "l40s", "a10g", "rtx-4090")} == {None}
    yield (f"how many GPUs the interconnect joins: {per_node['h100-sxm']} on HGX/DGX boards (A100, H100, H200, H800, "
           "H20, "
           f"B200, B300) and MI300X platforms, {per_node['gb200']} in a GB200 or GB300 NVL72 rack, "
           f"{per_node['h100-pcie']} for cards "
           f"paired by an NVLink bridge (H100 PCIe, RTX 3090); null for PCIe cards")
    assert per_node["rtx-3090"] == per_node["h100-pcie"]
    yield f"about {gpu_yaml('h100-sxm')['interconnect_latency_us']:g} µs on 2 H100s"
    yield f"{gpu_yaml('a100-80gb')['interconnect_latency_us']:g} µs on 2 A100s"
    hopper = {gpu_yaml(g)["network_gbs"] for g in ("h100-sxm", "h200", "b200", "h800", "h20")}
    assert len(hopper) == 1
    blackwell_ultra = {gpu_yaml(g)["network_gbs"] for g in ("b300", "gb300")}
    assert len(blackwell_ultra) == 1 and 800 / 8 * 2 in blackwell_ultra and gpu_yaml("gb200")["network_gbs"] is None
    yield (f"one 400 Gb/s ConnectX-7 NIC per GPU on DGX H100/H200/B200 and H800/H20 nodes is 50 GB/s each way, "
           f"{hopper.pop():g} here; one 800 Gb/s ConnectX-8 per GPU on HGX B300 and GB300 NVL72 is "
           f"{blackwell_ultra.pop():g}; none is stated for GB200 NVL72 (null); 200 Gb/s HDR on DGX A100 is "
           f"{gpu_yaml('a100-80gb')['network_gbs']:g}")
    assert 400 / 8 == 50 and 200 / 8 / 0.5 == gpu_yaml("a100-80gb")["network_gbs"]


@on("roofline.md")
def h100_ridge_point():
    g = gpu_yaml("h100-sxm")
    ridge = g["peak_tflops"]["bf16"] / (g["memory_bandwidth_gbs"] / 1000)
    yield (f"For bf16 on an H100 SXM it is {g['peak_tflops']['bf16']:g}e12 / {g['memory_bandwidth_gbs'] / 1000:g}e12 "
           f"= {ridge:.0f}.")
    yield f"For Llama-2-7B on an H100 that happens between batch {ridge:.0f} and 1.15 × {ridge:.0f}"
    yield f"reached ~798 of {g['peak_tflops']['bf16']:.0f} TFLOP/s on an H100"
    yield f"reached ~3.0 of {g['memory_bandwidth_gbs'] / 1000:g} TB/s on an H100"


@on("roofline.md")
def kipply_worked_example():
    peak, bandwidth, weights = 312e12, 1.5e12, 52e9
    yield (f"an A100 is taken at 312 TFLOP/s and 1.5 TB/s, which gives a ridge of {peak / bandwidth:.0f} FLOPs per "
           "byte. "
           f"A 52B model in 16-bit then needs 2·52e9 / 1.5e12 ≈ {2 * weights / bandwidth * 1e3:.0f} ms per token")


@on("commands/gpus.md")
def gpu_prices():
    from llmcalc.inputs.gpus import gpu_names

    unpriced = ["l4", "rtx-3090", "h20", "h800", "gb300"]
    assert {g for g in gpu_names() if gpu_yaml(g).get("price_per_hour") is None} == set(unpriced)
    price = gpu_yaml("a10g")["price_per_hour"]
    yield (f"It is left out (—) where no public price was found ({', '.join(unpriced[:-1])}, and {unpriced[-1]}, "
           "which CoreWeave lists only as \"Contact sales\");")
    yield f"(a10g's {price:g} as {price:.2f})"

# docs/commands/*.md: kv, memory, train, params, mfu, moe -------------------------------------------------------


@on("commands/kv.md")
def article_per_layer_figure():
    layer = row(report("kv", "-p", "llama2-7b", "-b", "64", "-s", "32k"), "full")
    # the article's figure is the per-layer bytes cut (not rounded) to one decimal of a GB
    yield (f"The \"{math.floor(layer['bytes_per_layer'] / 1e8) / 10:g} GB\" of the article \"Transformer-based LLM\" "
           "is "
           f"the per-layer figure: the whole cache is {layer['layers']} of them.")


def bytes_per_param(*options: str) -> float:
    r = report("memory", "-p", "llama2-7b", "--train", *options)
    return (r["weights_bytes"] + r["gradient_bytes"] + r["optimizer_bytes"]) / total("llama2-7b")


@on("commands/memory.md")
def megatron_bytes_per_parameter():
    fp32 = bytes_per_param("--grad-dtype", "fp32")
    sharded = bytes_per_param("--grad-dtype", "fp32", "--zero", "1", "--dp", "8", "--batch", "8")
    assert sharded == pytest.approx(fp32 - 12 + 12 / 8, rel=1e-6)
    yield (f"(Megatron's fp32 main gradients: {fp32:g} bytes per parameter with Adam, {fp32 - 12:g} + 12/dp with "
           "`--zero 1`")


@on("formulas.md")
def training_bytes_per_parameter():
    adam, fp32 = bytes_per_param(), bytes_per_param("--grad-dtype", "fp32")
    yield f"Adam m and v 8 = {adam:g} bytes/param"
    yield (f"Adam 2 + 2 + 4 + 8 = {adam:g} bytes with bf16 gradients, **{fp32:g} with fp32 gradients** — Megatron's "
           "convention")
    sharded = bytes_per_param("--grad-dtype", "fp32", "--zero", "1", "--dp", "4", "--batch", "4")
    assert sharded == pytest.approx(fp32 - 12 + 12 / 4)
    yield f"a GPU holds {fp32 - 12:g} + 12 / (dp · cp) bytes per parameter"
    yield (f"(adamw-8bit: {bytes_per_param('--optimizer', 'adamw-8bit') - 8:g} for m and v; sgd: "
           f"{bytes_per_param('--optimizer', 'sgd') - 8:g} for")


@on("commands/train.md")
def whole_replica_at_once():
    step = report("train", "-p", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "8", "--batch", "512", "--seq", "4096",
                  "--zero", "1", "--auto")
    whole = report("memory", "-p", "llama2-7b", "--train", "--batch", "512", "--seq", "4096", "--dp", "8",
                   "--zero", "1")
    yield (f"ZeRO-1 AdamW on 8 A100s holds micro-batches of {step['micro_batch']} of the {whole['micro_batch']} "
           "sequences "
           f"each replica runs (the whole {whole['micro_batch']} at once would need "
           f"{f(whole['total_bytes'] / 1e12, 2)} TB)")


@on("commands/params.md")
def published_conventions():
    v3, mixtral = params(spec("deepseek-v3")), params(spec("mixtral-8x7b"))
    yield f"so `total` is the published {n(v3.total)}."
    yield f"as in Mixtral's published {f(mixtral.active / 1e9, 1)}B."
    # model cards cut (do not round) their active counts to one decimal: DeepSeek-V2-Lite's 2.45B is "2.4B"
    cut = {m: math.floor(params(spec(m)).active_excluding_embedding / 1e8) / 10
           for m in ("gpt-oss-20b", "deepseek-v2-lite")}
    sizes = yaml.safe_load((ROOT / "tests" / "fixtures" / "checkpoint_sizes.yaml").read_text(encoding="utf-8"))
    yield f"The {len(sizes)} published checkpoints this is checked against"
    yield (f"cards that quote gpt-oss-20b at {cut['gpt-oss-20b']:g}B or DeepSeek-V2-Lite at "
           f"{cut['deepseek-v2-lite']:g}B.")


def palm_hfu(**kw) -> float:
    from test_mfu import PALM, PALM_CHIPS, PALM_TOKENS_PER_S, TPU_V4_PEAK

    from llmcalc.costs.mfu import utilisation
    from llmcalc.workload import Workload

    w = Workload(batch=1, seq=2048, attention_core="dense", attention_kernel="eager", **kw)
    return 100 * utilisation(PALM, w, gpus=PALM_CHIPS, peak_flops=TPU_V4_PEAK, tokens_per_s=PALM_TOKENS_PER_S).hfu


@on("commands/mfu.md")
def reproduced_mfu_table():
    from test_mfu import A100_PEAK, FIXTURES, PALM, PALM_CHIPS, PALM_TOKENS_PER_S, TABLE5, TPU_V4_PEAK, eq8, korthikanti

    from llmcalc.costs.mfu import utilisation
    from llmcalc.inputs.presets import load_spec_file
    from llmcalc.workload import Workload

    palm = utilisation(PALM, Workload(batch=2048, seq=2048, attention_core="dense", attention_kernel="eager"),
                       gpus=PALM_CHIPS, peak_flops=TPU_V4_PEAK, tokens_per_s=PALM_TOKENS_PER_S)
    weights = params(PALM).total - PALM.norm.per_layer * PALM.n_layers * PALM.d_model - PALM.d_model
    six_n = PALM_TOKENS_PER_S * 6 * weights / (PALM_CHIPS * TPU_V4_PEAK)
    yield f"| 238.3K tokens/s, 6144 TPU v4 | {pct(palm.mfu, 1, 1)}% ({pct(six_n, 1, 1)}%) |"
    mt_nlg = load_spec_file(FIXTURES / "mt-nlg-530b.yaml")
    r = utilisation(mt_nlg, Workload(batch=1920, seq=2048, attention_core="dense", attention_kernel="eager"),
                    gpus=2240, peak_flops=A100_PEAK, step_s=60.1)
    six_n = r.tokens_per_s * 6 * params(mt_nlg).total / (2240 * A100_PEAK)
    yield f"batch 1920 × 2048 at 60.1 s (Smith et al. 2022), 2240 A100 | {pct(r.mfu, 1, 1)}% ({pct(six_n, 1, 1)}%) |"
    for size, inputs in (("175B", "13.75 s, 64 GPUs, batch 64, `--recompute selective`"),
                         ("530B", "37.83 s, 280 GPUs, batch 280"), ("1T", "71.49 s, 512 GPUs, batch 512")):
        r = korthikanti(size, "selective", TABLE5[size][3])
        yield f"| {inputs} | {pct(r.mfu, 1, 1)}%, HFU {pct(r.hfu, 1, 1)}% |"
    r = korthikanti("22B", "selective", 1.10)
    capacity = 8 * A100_PEAK
    lo = max(r.model_flops_per_step / (0.4155 * capacity), float(eq8("22B")) / (0.4375 * capacity))
    hi = min(r.model_flops_per_step / (0.4145 * capacity), float(eq8("22B")) / (0.4365 * capacity))
    assert lo < hi
    yield f"| {pct(r.mfu, 1, 2)}% at 1.10 s; 41.5% at {lo:.3f}–{hi:.3f} s |"
    yield f"| 39.15 s, batch 2240 | {pct(korthikanti('530B', 'selective', 39.15, gpus=2240, batch=2240).mfu, 1, 1)}% |"
    full = {size: korthikanti(size, "full", TABLE5[size][2]) for size in ("22B", "175B", "530B", "1T")}
    shown = [f"{size} {pct(r.mfu, 1, 1)}% / {'HFU ' if size == '22B' else ''}{pct(r.hfu, 1, 1)}%"
             for size, r in full.items()]
    yield f"| `--recompute full` | {', '.join(shown)} |"
    lower = [TABLE5[size][5] - round(100 * korthikanti(size, "selective", TABLE5[size][3]).hfu, 1)
             for size in ("175B", "530B", "1T")]
    yield f"llmcalc's is {min(lower):.1f} to {max(lower):.1f} point lower."
    yield f"the printed 1.42 s / 1.10 s either, {100 * (1.42 / 1.10 - 1):.1f}%"


@on("commands/mfu.md")
def palm_rematerialisation():
    yield ("(recomputing every op but the FFN gives "
           f"{palm_hfu(recompute_ops=('qkv', 'attention', 'attention_out')):.1f}%, "
           f"the FFN alone {palm_hfu(recompute_ops=('ffn',)):.1f}%, full recomputation "
           f"{palm_hfu(recompute='full'):.1f}%)")
    every, ffn = palm_hfu(recompute="full", recompute_layers=89), palm_hfu(recompute_ops=("ffn",), recompute_layers=101)
    assert round(palm_hfu(recompute="full", recompute_layers=88), 1) != 57.8
    yield f"every op of 89 of the 118 layers, or the FFN of 101, gives {every:.1f}%."
    assert f"{ffn:.1f}" == f"{every:.1f}"


@on("formulas.md")
def palm_partial_recompute():
    every, ffn = palm_hfu(recompute="full", recompute_layers=89), palm_hfu(recompute_ops=("ffn",), recompute_layers=101)
    assert f"{ffn:.1f}" == f"{every:.1f}"
    yield (f"PaLM 540B's HFU of {every:.1f}% (Appendix B), whose policy the paper does not state, is reached by every "
           "op of 89 of its 118 layers, or its FFN in 101")


@on("moe.md")
def busiest_expert_at_decode():
    from llmcalc.costs.moe import expected_busiest

    yield (f"8 sequences over 8 top-1 experts put {expected_busiest(8, 1, 8):.2f} tokens on the busiest expert against "
           f"a mean of {8 * 1 // 8}.")
    yield f"At capacity factor 1.25 and no drops it is {1 - 1 / 1.25:.0%}."


@on("moe.md")
def switch_preset_shapes():
    r = raw("switch-base-8-decoder")
    a, moe = r["attention"], r["ffn"]
    yield (f"vocab {r['vocab_size']}, d_model {r['d_model']}, {r['n_layers']} layers, {a['heads']} heads × "
           f"{a['head_dim']}, "
           f"d_ff {moe['d_ff']}, ReLU experts without biases, {moe['experts']} experts, top-{moe['top_k']}")
    yield (f"{r['n_layers'] - moe['dense_layers']} sparse decoder layers, tied embeddings), capacity factor "
           f"{moe['capacity_factor']:g}")
    yield f"(32 buckets × {a['heads']} heads, one add per score)"
    yield f"llmcalc places the {moe['dense_layers']} dense layers first"
    yield f"`max_seq_len` {r['max_seq_len']} is the pre-training input length"
    assert moe["activation"] == "relu" and not moe["expert_bias"] and r["tie_embeddings"]
    g = raw("gshard-top2-decoder")["ffn"]
    assert (g["top_k"], g["capacity_factor"]) == (2, 1.0)
    yield f"top-{g['top_k']} and capacity 2N/E (capacity factor {g['capacity_factor']:.1f})"

# docs/compare.md, docs/attention-*.md ---------------------------------------------------------------------------


@on("compare.md")
def llama2_7b_kv_elements_by_variant():
    a, layers = raw("llama2-7b")["attention"], raw("llama2-7b")["n_layers"]
    rows = {r["name"]: r for r in report("compare", "mha", "gqa", "mqa", "mla", "-p", "llama2-7b")["rows"]}
    h, d_h = a["heads"], a["head_dim"]
    assert rows["mla"]["kv_elements_per_token"] == (4 * d_h + d_h // 2) * layers
    yield (f"Llama-2-7B (H = {h}, d_h = {d_h}, l = {layers}): {n(rows['mha']['kv_elements_per_token'])} / "
           f"{n(rows['gqa']['kv_elements_per_token'])} (n_g = 8) / {n(rows['mqa']['kv_elements_per_token'])} / "
           f"{n(rows['mla']['kv_elements_per_token'])} elements")
    yield f"the MHA variant's total equals Llama-2-7B's published {n(rows['mha']['total_params'])}"


@on("compare.md")
def deepseek_mla_ratios():
    v2, v3 = raw("deepseek-v2")["attention"], raw("deepseek-v3")["attention"]
    assert v2["kv_lora_rank"] == 4 * v2["qk_nope_head_dim"] and v2["qk_rope_head_dim"] == v2["qk_nope_head_dim"] // 2
    yield f"(d_c = {v2['kv_lora_rank']}, d_r = {v2['qk_rope_head_dim']} for d_h = {v2['qk_nope_head_dim']};"
    yield f"d_h of an MLA base is its no-RoPE query/key head dim (DeepSeek-V2: {v2['qk_nope_head_dim']})"
    assert v3["q_lora_rank"] == 12 * v3["qk_nope_head_dim"]
    dsa = raw("deepseek-v3.2-exp")["attention"]
    assert dsa["index_head_dim"] == dsa["qk_nope_head_dim"] and dsa["index_heads"] == dsa["heads"] // 2
    yield (f"DeepSeek-V3: {v3['q_lora_rank']} = 12·{v3['qk_nope_head_dim']}), an indexer of H/2 heads of d_h "
           f"(DeepSeek-V3.2: {dsa['index_heads']} of {dsa['heads']} heads, d_I = {dsa['index_head_dim']} = d_h)")


@on("compare.md")
def recurrent_swaps_of_llama3_8b():
    long = {r["name"]: r for r in report("compare", "gqa", "mamba2", "gdn", "-p", "llama3-8b", "-s", "32k")["rows"]}
    short = {r["name"]: r
             for r in report("compare", "gqa", "mamba2", "gdn", "-p", "llama3-8b", "-s", "8k", "-b", "4")["rows"]}
    state = short["mamba2"]["state_bytes_per_sequence"]
    assert state == short["gdn"]["state_bytes_per_sequence"] == long["mamba2"]["kv_cache_bytes"]
    assert short["mamba2"]["decode_bytes_per_context"] == short["gdn"]["decode_bytes_per_context"] == 0
    yield (f"Llama-3-8B at 32k tokens: GQA keeps {f(long['gqa']['kv_cache_bytes'] / 1e9, 2)} GB, the Mamba-2 swap "
           f"{f(state / 1e6, 2)} MB (the SSM state in fp32); at 8k tokens and batch 4 GQA's decode step grows by "
           f"{n(short['gqa']['decode_bytes_per_context'])} bytes per token of context, the Mamba-2 and Gated DeltaNet "
           f"swaps' by 0, each holding {n(state)} bytes per sequence.")


@on("attention-dsa.md")
def indexer_parameters():
    r = raw("deepseek-v3.2-exp")
    a, d, layers = r["attention"], r["d_model"], r["n_layers"]
    q, k, norm, w = a["q_lora_rank"] * a["index_heads"] * a["index_head_dim"], d * a["index_head_dim"], \
        2 * a["index_head_dim"], d * a["index_heads"]
    per_layer = q + k + norm + w
    assert total("deepseek-v3.2-exp") == total("deepseek-v3") + layers * per_layer
    yield (f"DeepSeek-V3.2-Exp: {a['q_lora_rank']}·{a['index_heads'] * a['index_head_dim']} + "
           f"{d}·{a['index_head_dim']} + "
           f"{norm} + {d}·{a['index_heads']} = {n(per_layer)} per layer, ×{layers} = {n(layers * per_layer)}; total "
           f"{n(total('deepseek-v3'))} + {n(layers * per_layer)} = **{n(total('deepseek-v3.2-exp'))}**")
    yield f"the indexers add {pct(layers * per_layer, total('deepseek-v3'), 2)} %."
    yield f"Active per token: {n(params(spec('deepseek-v3.2-exp')).active)}."
    yield f"parameters {n(total('deepseek-v3.2-exp'))} exactly (tests/test_transformers_parity.py)"


@on("attention-dsa.md")
def indexer_against_mla_at_decode():
    a, layers = raw("deepseek-v3.2-exp")["attention"], raw("deepseek-v3.2-exp")["n_layers"]
    h_i, d_i, h, latent, r_kv = a["index_heads"], a["index_head_dim"], a["heads"], \
        a["kv_lora_rank"] + a["qk_rope_head_dim"], a["kv_lora_rank"]
    index_pair, mla_pair = 2 * h_i * d_i + 2 * h_i, 2 * h * latent + 2 * h * r_kv
    keys = 131_072 + 1
    dsa = sum(component(report("flops", "-p", "deepseek-v3.2-exp", "-s", "131072")["breakdown"], c, "decode")
              for c in ("attention/core_scores", "attention/core_values", "attention/index_scores",
                        "attention/index_weights")) // layers
    mla = sum(component(report("flops", "-p", "deepseek-v3", "-s", "131072")["breakdown"], c, "decode")
              for c in ("attention/core_scores", "attention/core_values")) // layers
    assert dsa == keys * index_pair + a["index_topk"] * mla_pair and mla == keys * mla_pair
    yield (f"at 2·{h_i}·{d_i} + 2·{h_i} = {n(index_pair)} FLOPs per pair against absorbed MLA's 2·{h}·{latent} + "
           f"2·{h}·{r_kv} = {n(mla_pair)}: one decode step at 131,072 tokens of context ({n(keys)} keys) costs "
           f"{n(keys)}·{n(index_pair)} + {n(a['index_topk'])}·{n(mla_pair)} = {f(dsa / 1e9, 2)} G core FLOPs per "
           f"layer against MLA's {f(mla / 1e9, 1)} G (1/{mla / dsa:.0f}).")


@on("attention-dsa.md")
def indexer_cache():
    from llmcalc.costs.kv import kv_cache
    from llmcalc.inputs.presets import spec_from_data
    from llmcalc.workload import Workload

    r = raw("deepseek-v3.2-exp")
    a, layers = r["attention"], r["n_layers"]
    latent = a["kv_lora_rank"] + a["qk_rope_head_dim"]
    bf16 = report("kv", "-p", "deepseek-v3.2-exp")["bytes_per_token"]
    v3 = report("kv", "-p", "deepseek-v3")["bytes_per_token"]
    fp8 = kv_cache(spec_from_data({**r, "attention": {**a, "index_cache_dtype": "fp8"}}, "fp8 indexer keys"),
                   Workload()).bytes_per_token
    assert bf16 == layers * (latent + a["index_head_dim"]) * 2 and fp8 == layers * (latent * 2 + a["index_head_dim"])
    yield (f"DeepSeek-V3.2-Exp, bf16 cache: {layers} · ({a['kv_lora_rank']} + {a['qk_rope_head_dim']} + "
           f"{a['index_head_dim']}) · 2 = {n(bf16)} bytes per token (V3: {n(v3)}; +{pct(bf16 - v3, v3, 0)} %) fp8 "
           "indexer "
           f"keys: {layers} · ({latent} · 2 + {a['index_head_dim']}) = {n(fp8)} bytes per token")


@on("attention-linformer.md")
def projection_parameters():
    r = raw("linformer-decoder-example")
    a = r["attention"]
    matrices = 2 if a["sharing"] == "headwise" else 1
    count = r["n_layers"] * matrices * a["proj_len"] * a["max_len"]
    rows = params(spec("linformer-decoder-example")).breakdown
    assert count == sum(x.params for x in rows if "seq_proj" in x.component)
    assert (a["proj_len"], a["max_len"]) == (128, 512)  # the paper's n = 512, k = 128
    yield f"Example preset: {r['n_layers']} · {matrices} · {a['proj_len']} · {a['max_len']} = {n(count)} parameters"


@on("attention-reformer.md")
def lsh_pairs_and_cache():
    r = raw("reformer-decoder-example")
    a, layers, s = r["attention"], r["n_layers"], 16_384
    pairs, causal = a["n_hashes"] * s * 2 * a["chunk_len"], s * (s + 1) // 2
    per_token = report("kv", "-p", "reformer-decoder-example")["bytes_per_token"]
    assert per_token == layers * (2 * a["heads"] * a["head_dim"] * 2 + a["heads"] * a["n_hashes"])
    yield (f"Example preset ({layers} layers, H = {a['heads']}, h = {a['head_dim']}, n_hashes {a['n_hashes']}, n_b "
           f"{a['n_buckets']}, c {a['chunk_len']}) at S = 16,384: {a['n_hashes']} · 16,384 · {2 * a['chunk_len']} "
           "pairs "
           f"per layer, against {causal / 1e6:.0f}M for causal full attention (S(S+1)/2): {causal / pairs:.0f}× fewer; "
           f"the cache is {layers} · (2 · {a['heads'] * a['head_dim']} · 2 + {a['heads']} · {a['n_hashes']}) = "
           f"{n(per_token)} bytes per token.")

# docs/mamba.md, docs/deltanet.md ------------------------------------------------------------------------------


def mixer_layers(name: str, kind: str | None) -> int:
    """Layers of preset `name` whose mixer is of `kind` (None: layers without one)."""
    return sum(g.count for g in spec(name).layer_groups() if (g.mixer.kind if g.mixer else None) == kind)


@on("mamba.md")
def codestral_parameters():
    r = raw("mamba-codestral-7b")
    a, d, layers, v = r["attention"], r["d_model"], r["n_layers"], r["vocab_size"]
    h, p, g, s, k = a["heads"], a["head_dim"], a["groups"], a["state_size"], a["conv_kernel"]
    inner = h * p
    in_proj, conv_ch = d * (2 * inner + 2 * g * s + h), inner + 2 * g * s
    conv = conv_ch * k + (conv_ch if a["conv_bias"] else 0)
    per_layer = in_proj + conv + 3 * h + inner + inner * d + d
    yield (f"Mamba-Codestral-7B (d {d}, {layers} layers, H {h}, P {p}, G {g}, N {s}, K {k}, V {v}, untied): in_proj "
           f"{d}·({2 * inner} + {2 * g * s} + {h}) = {n(in_proj)}; conv {conv_ch}·{k} + {conv_ch} = {n(conv)}; ssm "
           f"{3 * h}; gate_norm {inner}; out_proj {n(inner * d)}; the layer's norm {d}: {n(per_layer)} per layer, and "
           f"{layers} layers + 2·{v}·{d} + {d} (final norm) = **{n(layers * per_layer + 2 * v * d + d)}**")
    assert layers * per_layer + 2 * v * d + d == total("mamba-codestral-7b")


@on("mamba.md")
def codestral_state():
    a, layers = raw("mamba-codestral-7b")["attention"], raw("mamba-codestral-7b")["n_layers"]
    h, p, s, k = a["heads"], a["head_dim"], a["state_size"], a["conv_kernel"]
    conv_ch = h * p + 2 * a["groups"] * s
    state = report("kv", "-p", "mamba-codestral-7b", "-s", "4k")["state_bytes_per_sequence"]
    assert state == report("kv", "-p", "mamba-codestral-7b", "-s", "1m")["state_bytes_per_sequence"]
    assert state == layers * (h * p * s * 4 + conv_ch * k * 2)
    yield (f"Mamba-Codestral-7B: {h}·{p}·{s} = {n(h * p * s)} state elements ({n(4 * h * p * s)} bytes in fp32) and "
           f"{conv_ch}·{k} = {n(conv_ch * k)} conv elements ({n(2 * conv_ch * k)} bytes in bf16) per layer and "
           "sequence; "
           f"{n(state)} bytes ({f(state / 1e6, 2)} MB) for the {layers} layers")


@on("mamba.md")
def codestral_decode_step():
    state = report("kv", "-p", "mamba-codestral-7b")["state_bytes_per_sequence"]
    short = report("latency", "-p", "mamba-codestral-7b", "--gpu", "h100-sxm", "-b", "4", "-s", "1k")
    long = report("latency", "-p", "mamba-codestral-7b", "--gpu", "h100-sxm", "-b", "4", "-s", "200k")
    step = next(p for p in short["phases"] if p["phase"] == "decode first")
    assert step == {**next(p for p in long["phases"] if p["phase"] == "decode first"), "context": step["context"]}
    yield (f"Mamba-Codestral-7B on one H100 SXM, batch 4: the decode step moves the same {f(step['bytes'] / 1e9, 2)} "
           "GB "
           f"({f(short['weights_bytes_per_gpu'] / 1e9, 2)} GB of weights, 2 × 4 × {f(state / 1e6, 2)} MB of states "
           "read "
           f"and written, the activations) and takes the same {f(step['time_s'] * 1e3, 2)} ms at 1k and at 200k tokens")


@on("mamba.md")
def jamba():
    r = raw("jamba-v0.1")
    m, moe = r["mixers"]["mamba"], r["ffn"]
    kv = report("kv", "-p", "jamba-v0.1")
    yield (f"Jamba-v0.1 (d {r['d_model']}, {r['n_layers']} layers: {mixer_layers('jamba-v0.1', 'gqa')} attention + "
           f"{mixer_layers('jamba-v0.1', 'mamba')} Mamba, {moe['experts']} experts top {moe['top_k']}, I {m['inner']}, "
           f"N {m['state_size']}, R {m['dt_rank']}, K {m['conv_kernel']}, V {r['vocab_size']}): "
           f"**{n(total('jamba-v0.1'))}** parameters, {n(params(spec('jamba-v0.1')).active)} active")
    yield (f"Its cache: K/V of the {mixer_layers('jamba-v0.1', 'gqa')} attention layers per token "
           f"({kv['bytes_per_token'] // 1024} "
           f"KiB per token in bf16) plus {mixer_layers('jamba-v0.1', 'mamba')} Mamba states per sequence.")
    assert kv["bytes_per_token"] % 1024 == 0
    yield f"(the shortest repeating cycle, {len(r['hybrid_pattern'])} slots for Jamba-v0.1)"


@on("mamba.md")
def falcon_h1():
    r = raw("falcon-h1-7b")
    a, m = r["mixers"]["parallel"]["attention"], r["mixers"]["parallel"]["mamba"]
    inner, bc = m["heads"] * m["head_dim"], 2 * m["groups"] * m["state_size"]
    per_token_layer = 2 * a["kv_heads"] * a["head_dim"] * 2
    kv = report("kv", "-p", "falcon-h1-7b")
    assert kv["bytes_per_token"] == r["n_layers"] * per_token_layer and per_token_layer == 1024
    state = inner * m["state_size"] * 4 + (inner + bc) * m["conv_kernel"] * 2  # fp32 SSM state, bf16 conv inputs
    assert kv["state_bytes_per_sequence"] == r["n_layers"] * state
    yield (f"Falcon-H1-7B (d {r['d_model']}, {r['n_layers']} layers, {a['heads']} heads of {a['head_dim']}, "
           f"{a['kv_heads']} "
           f"kv heads, {m['heads']} Mamba heads of {m['head_dim']}, N {m['state_size']}, G {m['groups']}, d_ff "
           f"{r['ffn']['d_ff']}, V {r['vocab_size']}): **{n(total('falcon-h1-7b'))}** parameters")
    yield (f"(1 KiB per token in bf16) plus {m['heads']}·{m['head_dim']}·{m['state_size']} fp32 state + ({inner} + "
           f"{bc})·"
           f"{m['conv_kernel']} conv inputs per sequence.")


@on("mamba.md")
def hybrid_presets_table():
    yield f"| `mamba-codestral-7b` | Mamba-2 | {n(total('mamba-codestral-7b'))} |"
    yield f"| `jamba-v0.1` | Mamba-1 + attention every {len(raw('jamba-v0.1')['hybrid_pattern'])} + MoE every 2 | " \
          f"{n(total('jamba-v0.1'))} ({n(params(spec('jamba-v0.1')).active)} active) |"
    yield f"| `falcon-h1-7b` | attention ∥ Mamba-2 in every layer | {n(total('falcon-h1-7b'))} |"
    yield (f"| `nemotron-h-8b` | Mamba-2, attention and MLP layers ({raw('nemotron-h-8b')['n_layers']}, "
           f"{mixer_layers('nemotron-h-8b', 'gqa')} attention) | {n(total('nemotron-h-8b'))} |")
    yield (f"| `qwen3-next-80b-a3b` | Gated DeltaNet + gated attention, MoE (docs/deltanet.md) | "
           f"{n(total('qwen3-next-80b-a3b'))} ({n(params(spec('qwen3-next-80b-a3b')).active)} active) |")
    yield (f"| `minimax-text-01` | lightning attention + softmax attention every "
           f"{len(raw('minimax-text-01')['hybrid_pattern'])}, MoE (docs/lightning.md) | "
           f"{n(total('minimax-text-01'))} ({n(params(spec('minimax-text-01')).active)} active) |")


@on("deltanet.md")
def qwen3_next():
    r = raw("qwen3-next-80b-a3b")
    moe = r["ffn"]
    yield (f"d {r['d_model']}, {r['n_layers']} layers: {mixer_layers('qwen3-next-80b-a3b', 'gated_deltanet')} Gated "
           f"DeltaNet + {mixer_layers('qwen3-next-80b-a3b', 'gqa')} gated attention, {moe['experts']} experts "
           f"{moe['d_ff']} wide, top {moe['top_k']}, with a {moe['shared_d_ff']}-wide shared expert, V "
           f"{r['vocab_size']}, "
           f"context {r['max_seq_len']}): **{n(total('qwen3-next-80b-a3b'))}** parameters, "
           f"{n(params(spec('qwen3-next-80b-a3b')).active)} active")
    assert moe["shared_experts"] == 1

@on("lightning.md")
def minimax_text_01():
    name = "minimax-text-01"
    r, p = raw(name), params(spec(name))
    a, moe, mixer = r["attention"], r["ffn"], r["mixers"]["linear"]
    yield (f"d {r['d_model']}, {r['n_layers']} layers: {mixer_layers(name, 'lightning')} lightning + "
           f"{mixer_layers(name, 'gqa')} softmax ({a['heads']} heads, {a['kv_heads']} KV heads, h {a['head_dim']}), "
           f"{moe['experts']} experts {moe['d_ff']} wide, top {moe['top_k']}, V {r['vocab_size']}): "
           f"**{n(p.total)}** parameters, {n(p.active)} active "
           f"({n(p.active - 2 * r['vocab_size'] * r['d_model'])} without the embedding and the head)")
    state = mixer["heads"] * mixer["head_dim"] ** 2
    yield (f"MiniMax-Text-01: {mixer['heads']}·{mixer['head_dim']}·{mixer['head_dim']} = {n(state)} elements, "
           f"{state * 2 // 2**20} MiB in bf16 per layer and sequence.")
    assert not r["tie_embeddings"] and state * 2 % 2**20 == 0


# docs/encoders.md, docs/encoder-decoder.md ----------------------------------------------------------------------


def validated(*args: str) -> dict[str, dict]:
    """`llmcalc validate ARGS --device fake`: its rows by quantity (the reference model measured, torch needed)."""
    return {r["quantity"]: r for r in report("validate", *args, "--device", "fake")["rows"]}


@on("encoders.md")
def encoder_parameters():
    from llmcalc.inputs.presets import spec_from_data

    bert, roberta, modern = raw("bert-base-uncased"), raw("roberta-base"), raw("modernbert-base")
    large = spec_from_data({**bert, "d_model": 1024, "n_layers": 24, "ffn": {**bert["ffn"], "d_ff": 4096},
                            "attention": {**bert["attention"], "heads": 16, "kv_heads": 16}}, "BERT-large")
    yield (f"BERT-base (V {bert['vocab_size']}, P {bert['max_seq_len']}, T {bert['stack']['token_types']}, d "
           f"{bert['d_model']}, L {bert['n_layers']}, f {bert['ffn']['d_ff']}): {n(total('bert-base-uncased'))}, the "
           "\"110M\" of Devlin et al. 2019")
    yield f"BERT-large (d 1024, L 24, f 4096): {n(params(large).total)}, their \"340M\"."
    yield (f"RoBERTa-base (V {roberta['vocab_size']}, P {roberta['max_seq_len']}, T "
           f"{roberta['stack']['token_types']}): "
           f"{n(total('roberta-base'))}; RoBERTa's table has {roberta['max_seq_len']} rows")
    yield (f"ModernBERT-base (V {modern['vocab_size']}, d {modern['d_model']}, L {modern['n_layers']}, f "
           f"{modern['ffn']['d_ff']}): {n(total('modernbert-base'))}, the \"{total('modernbert-base') / 1e6:.0f} "
           "million\" of its model card")


@on("encoders.md")
def encoder_estimates():
    for name, label in (("bert-base-uncased", "bert"), ("modernbert-base", "modern")):
        fl = report("flops", "-p", name, "-b", "2", "-s", "128", "--attention", "dense")
        mem = report("memory", "-p", name, "-b", "2", "-s", "128")
        if label == "bert":
            yield (f"params {n(total(name))}, prefill FLOPs {n(fl['prefill_flops'])} and train FLOPs "
                   f"{n(fl['train_flops'])}, each equal to the estimate; peak memory")
            yield f"against {n(mem['total_bytes'])} estimated"
        else:
            yield (f"ModernBERT-base at the same size: {n(total(name))} params, prefill {n(fl['prefill_flops'])} and "
                   f"train {n(fl['train_flops'])} FLOPs exact")


@on("encoders.md", measured=True)
def encoder_measured_peaks():
    bert = validated("-p", "bert-base-uncased", "-b", "2", "-s", "128")
    modern = validated("-p", "modernbert-base", "-b", "2", "-s", "128")
    for rows in (bert, modern):
        assert all(r["measured"] == r["estimate"] for q, r in rows.items() if q != "peak memory")
    peak = bert["peak memory"]
    yield (f"peak memory {n(peak['measured'])} bytes measured against {n(peak['estimate'])} estimated "
           f"({pct(peak['measured'] - peak['estimate'], peak['estimate'], 2)}%)")
    peak = modern["peak memory"]
    yield f"FLOPs exact, peak {pct(peak['measured'] - peak['estimate'], peak['estimate'], 2)}% over."


@on("encoder-decoder.md")
def whisper_caches():
    r = raw("whisper-large-v3")
    a = r["attention"]
    kv = report("kv", "-p", "whisper-large-v3", "-s", "448")
    frames = r["stack"]["encoder_frames"]
    assert kv["cross_bytes_per_sequence"] == r["n_layers"] * frames * 2 * a["kv_heads"] * a["head_dim"] * 2
    yield (f"Whisper-large-v3 in bf16 holds {r['n_layers']} · {frames} · 2 · {a['kv_heads'] * a['head_dim']} · 2 = "
           f"{n(kv['cross_bytes_per_sequence'])} bytes of cross cache per sequence, more than its "
           f"{r['max_seq_len']}-token "
           f"self cache ({n(kv['total_bytes'] - kv['cross_bytes_per_sequence'])} bytes).")


@on("encoder-decoder.md")
def encoder_decoder_parameters():
    from llmcalc.inputs.hf import spec_dict_from_hf
    from llmcalc.inputs.presets import spec_from_data

    tiny = params(spec_from_data(spec_dict_from_hf({"model_type": "whisper"}, name="whisper-tiny"), "whisper-tiny"))
    yield f"vocabulary 51865): {n(tiny.total)} parameters, equal to llmcalc's import of an empty config."
    w = raw("whisper-large-v3")
    yield (f"(d {w['d_model']}, {w['stack']['encoder_layers']} + {w['n_layers']} layers, {w['attention']['heads']} "
           "heads, "
           f"FFN {w['ffn']['d_ff']}, {w['stack']['mel_bins']} mel bins, {w['stack']['encoder_frames']} / "
           f"{w['max_seq_len']} "
           f"positions; its vocabulary {w['vocab_size']} is large-v2's 51865 plus")
    yield f"token the model card names as new in v3): {n(total('whisper-large-v3'))} parameters"
    t5, flan, bart = raw("t5-small"), raw("flan-t5-base"), raw("bart-large")
    yield (f"T5-Small (V {t5['vocab_size']}, d {t5['d_model']}, H {t5['attention']['heads']}, d_kv "
           f"{t5['attention']['head_dim']}, f {t5['ffn']['d_ff']}, L_e = L_d = {t5['n_layers']}, tied head): "
           f"{n(total('t5-small'))}, the \"about 60 million\"")
    assert t5["stack"]["encoder_layers"] == t5["n_layers"] and flan["stack"]["encoder_layers"] == flan["n_layers"]
    yield (f"Flan-T5-base (d {flan['d_model']}, H {flan['attention']['heads']}, f {flan['ffn']['d_ff']} gated, L_e = "
           "L_d = "
           f"{flan['n_layers']}, untied head): {n(total('flan-t5-base'))}.")
    offset = bart["positions"]["offset"]
    yield (f"(S_max + {offset})·d per stack: {bart['max_seq_len'] + offset} rows for `max_position_embeddings` "
           f"{bart['max_seq_len']}")
    yield (f"BART-large (V {bart['vocab_size']}, d {bart['d_model']}, H {bart['attention']['heads']}, f "
           f"{bart['ffn']['d_ff']}, L_e = L_d = {bart['n_layers']}): {n(total('bart-large'))}.")
    yield (f"of num_buckets × H elements ({t5['positions']['num_buckets']} × {t5['attention']['heads']} = "
           f"{t5['positions']['num_buckets'] * t5['attention']['heads']})")


@on("encoder-decoder.md")
def encoder_decoder_estimates():
    def figures(name):
        fl = report("flops", "-p", name, "-b", "2", "-s", "128", "--attention", "dense")
        return fl, report("kv", "-p", name, "-b", "2", "-s", "128")["total_bytes"]

    (t5, t5_kv), (bart, bart_kv) = figures("t5-small"), figures("bart-large")
    yield (f"t5-small {n(total('t5-small'))} params, prefill {n(t5['prefill_flops'])}, decode {n(t5['decode_flops'])} "
           f"and train {n(t5['train_flops'])} FLOPs, {n(t5_kv)} cache bytes; bart-large {n(total('bart-large'))} "
           "params, "
           f"prefill {n(bart['prefill_flops'])}, decode {n(bart['decode_flops'])}, train {n(bart['train_flops'])} "
           "FLOPs, "
           f"{n(bart_kv)} cache bytes; every one equal to the estimate.")
    t5_mem = report("memory", "-p", "t5-small", "-b", "2", "-s", "128")["total_bytes"]
    bart_mem = report("memory", "-p", "bart-large", "-b", "2", "-s", "128")["total_bytes"]
    yield f"bytes measured for {n(t5_mem)} estimated;"
    yield f"for {n(bart_mem)} ("
    whisper = report("memory", "-p", "whisper-large-v3", "-b", "1", "-s", "64")["total_bytes"]
    assert whisper > 0


@on("encoder-decoder.md", measured=True)
def encoder_decoder_measured():
    t5 = validated("-p", "t5-small", "-b", "2", "-s", "128")
    bart = validated("-p", "bart-large", "-b", "2", "-s", "128")
    whisper = validated("-p", "whisper-large-v3", "--layers", "4", "-b", "1", "-s", "64")
    for rows in (t5, bart, whisper):
        assert all(r["measured"] == r["estimate"] for q, r in rows.items() if q != "peak memory")
    t5, bart, whisper = t5["peak memory"], bart["peak memory"], whisper["peak memory"]
    yield (f"t5-small at batch 2 × 128, {n(t5['measured'])} bytes measured for {n(t5['estimate'])} estimated; "
           "bart-large "
           f"{n(bart['measured'])} for {n(bart['estimate'])} "
           f"({pct(bart['measured'] - bart['estimate'], bart['estimate'], 4)}%); "
           f"whisper-large-v3 cut to 4 layers, batch 1 × 64, {n(whisper['measured'])} for {n(whisper['estimate'])} "
           f"({pct(whisper['measured'] - whisper['estimate'], whisper['estimate'], 1)}%)")


@on("encoder-decoder.md")
def encoder_decoder_time():
    def timed(name, *extra):
        r = report("latency", "-p", name, "--gpu", "h100-sxm", "--time-model", "roofline", "-b", "8", "-s", "64", "-g",
                   "128", *extra)
        return f(r["ttft_s"] * 1e3, 3), f(r["tpot_s"] * 1e3, 3), f(r["tpot_end_s"] * 1e3, 3), r

    t5 = timed("t5-small", "--encoder-seq", "512")
    bart = timed("bart-large", "--encoder-seq", "512")
    whisper = report("latency", "-p", "whisper-large-v3", "--gpu", "h100-sxm", "--time-model", "roofline", "-b", "8",
                     "-s", "64", "-g", "128")
    step = next(p for p in whisper["phases"] if p["phase"] == "decode first")["bytes"]
    cross = report("kv", "-p", "whisper-large-v3")["cross_bytes_per_sequence"]
    yield (f"t5-small over 512 encoder tokens, {t5[0]} ms to the first token and {t5[1]} ms per step ({t5[2]} ms at "
           "the "
           f"last); bart-large {bart[0]} ms and {bart[1]} ms; whisper-large-v3 over its "
           f"{raw('whisper-large-v3')['stack']['encoder_frames']} frames {f(whisper['ttft_s'] * 1e3, 1)} ms and "
           f"{f(whisper['tpot_s'] * 1e3, 3)} ms, a step reading {f(step / 1e9, 2)} GB of which "
           f"{f(8 * cross / 1e9, 2)} GB "
           f"is the cross cache ({n(cross)} bytes per sequence × 8).")

# docs/vision.md -----------------------------------------------------------------------------------------------


def image(name: str, *options: str) -> dict:
    """`llmcalc flops` of one image through `name`'s tower (its `vision` report)."""
    return report("flops", "-p", name, "--images", "1", *options)["vision"]


@on("vision.md")
def what_each_tower_does():
    llava, gemma, qwen = (spec(m).vision for m in ("llava-1.5-7b", "gemma3-4b", "qwen2.5-vl-7b"))
    side = llava.image_size // llava.patch_size
    yield (f"| CLIP ViT-L/14, {llava.n_layers} × {llava.d_model}, {llava.image_size} px | every image to "
           f"{llava.image_size}² | {side}² + 1 class = {image('llava-1.5-7b')['encoder_tokens']} | "
           f"Linear({llava.d_model}→{raw('llava-1.5-7b')['d_model']}) + GELU + Linear({raw('llava-1.5-7b')['d_model']}→"
           f"{raw('llava-1.5-7b')['d_model']}) on the patches (class token dropped) | "
           f"{image('llava-1.5-7b')['tokens_per_image']} |")
    g = gemma.image_size // gemma.patch_size
    pooled = image("gemma3-4b")["tokens_per_image"]
    yield (f"| SigLIP so400m, {gemma.n_layers} × {gemma.d_model}, {gemma.image_size} px | every image to "
           f"{gemma.image_size}² (pan-and-scan off) | {g}² = {image('gemma3-4b')['encoder_tokens']} | average pool "
           f"{g // math.isqrt(pooled)} × {g // math.isqrt(pooled)} → {math.isqrt(pooled)}², RMSNorm, "
           f"Linear({gemma.d_model}→{raw('gemma3-4b')['d_model']}) | {pooled} |")
    m = qwen.projector.merge
    yield (f"| ViT {qwen.n_layers} × {qwen.d_model}, patch {qwen.patch_size}, window attention | dynamic: "
           "`smart_resize` | "
           f"(H'/{qwen.patch_size})·(W'/{qwen.patch_size}) | RMSNorm, {m} × {m} patches concatenated "
           f"({m * m * qwen.d_model}), "
           f"Linear({m * m * qwen.d_model}→{m * m * qwen.d_model}) + GELU + Linear({m * m * qwen.d_model}→"
           f"{raw('qwen2.5-vl-7b')['d_model']}) | (H'/{qwen.patch_size * m})·(W'/{qwen.patch_size * m}) |")
    yield f"(`mm_tokens_per_image` {pooled})"
    yield f"(min_pixels {qwen.min_pixels}, max_pixels {qwen.max_pixels})"


@on("vision.md")
def dynamic_resize():
    big, default = image("qwen2.5-vl-7b", "--image-size", "1080x1920"), image("qwen2.5-vl-7b")
    p = spec("qwen2.5-vl-7b").vision.patch_size
    yield (f"A 1080 × 1920 image becomes {big['grid_height'] * p} × {big['grid_width'] * p}: {big['grid_height']} × "
           f"{big['grid_width']} patches, {n(big['tokens_per_image'])} tokens.")
    yield (f"`--image-size` defaults to {default['image_height']} × {default['image_width']} there "
           f"({default['tokens_per_image']} tokens)")
    tokens = image("llava-1.5-7b")["tokens_per_image"]
    yield (f"(a prompt of 2048 tokens with one LLaVA image holds {tokens} image tokens and {2048 - tokens} others)")


@on("vision.md")
def vision_parameters():
    cards = []
    for name in ("llava-1.5-7b", "gemma3-4b", "qwen2.5-vl-7b"):
        p = params(spec(name))
        yield f"| {name} | {n(p.total)} | {n(p.language)} | {n(p.vision)} |"
        cards.append(f"{f(p.total / 1e9, 2)}B")
    yield f"The model cards' {cards[0]}, {cards[1]} and {cards[2]} agree"
    llava, llama = raw("llava-1.5-7b"), raw("llama2-7b")
    extra = llava["vocab_size"] - llama["vocab_size"]
    assert params(spec("llava-1.5-7b")).language == total("llama2-7b") + 2 * extra * llama["d_model"]
    assert params(spec("qwen2.5-vl-7b")).language == total("qwen2.5-7b")
    yield (f"Vicuna-7B (Llama-2-7B's {n(total('llama2-7b'))} plus {extra} vocabulary rows in the embedding and the "
           "head) "
           f"and Qwen2.5-7B ({n(total('qwen2.5-7b'))})")


@on("vision.md")
def flops_per_image():
    llava, gemma = image("llava-1.5-7b"), image("gemma3-4b")
    odd = image("qwen2.5-vl-7b", "--image-size", "333x517")
    yield (f"LLaVA-1.5 at 336 px ({n(llava['flops_per_image'])} FLOPs), Gemma 3 at 896 px "
           f"({n(gemma['flops_per_image'])}) "
           f"and Qwen2.5-VL at 333 × 517 px (a {odd['grid_height']} × {odd['grid_width']} grid with partial windows, "
           f"{n(odd['flops_per_image'])})")
    tower = params(spec("llava-1.5-7b")).vision
    prompt = report("flops", "-p", "llava-1.5-7b", "--images", "1", "--seq", "576")["prefill_flops"]
    yield (f"is {n(llava['flops_per_image'])} FLOPs (≈ 2 × {f(tower / 1e9, 1)}B parameters × {llava['encoder_tokens']} "
           f"tokens, plus attention), {pct(llava['flops_per_image'], prompt, 1)}% of the language model's prefill of a "
           f"{llava['tokens_per_image']}-token prompt, {n(prompt)} FLOPs")


@on("vision.md")
def image_tokens_in_the_cache():
    llava = report("kv", "-p", "llava-1.5-7b", "-s", "2048", "--images", "1")
    gemma = report("kv", "-p", "gemma3-4b", "-s", "2048", "--images", "2")
    l = raw("llama2-7b")
    assert llava["bytes_per_token"] == 2 * l["n_layers"] * l["d_model"] * 2
    yield (f"LLaVA-1.5 at 2048 tokens with one image: {llava['image_tokens']} × {n(llava['bytes_per_token'])} bytes "
           f"(Llama-2-7B's 2·{l['n_layers']}·{l['d_model']}·2 per token) = {n(llava['image_bytes'])} bytes, "
           f"{pct(llava['image_bytes'], llava['total_bytes'], 1)}% of the cache; Gemma 3 4B with two images in 2048 "
           f"tokens: only its {row(gemma, 'full')['layers']} full-attention layers still hold them "
           f"({n(gemma['image_bytes'])} bytes, {pct(gemma['image_bytes'], gemma['total_bytes'], 1)}%).")


@on("vision.md")
def tower_activation_peaks():
    llava, gemma, qwen = spec("llava-1.5-7b"), spec("gemma3-4b"), spec("qwen2.5-vl-7b")
    one = llava.vision.activation_bytes(336, 336, llava.d_model, 2)
    yield (f"LLaVA-1.5 ({n(one)} B per 336 px image, 3 images {n(3 * one)} B) and Gemma 3 "
           f"({n(gemma.vision.activation_bytes(896, 896, gemma.d_model, 2))} B per 896 px image)")
    estimate = qwen.vision.activation_bytes(1080, 1920, qwen.d_model, 2)
    # the reference tower also holds its windows' token order, one int64 per patch (tests/test_vision.py measures it)
    indices = 8 * image("qwen2.5-vl-7b", "--image-size", "1080x1920")["encoder_tokens"]
    yield (f"Qwen2.5-VL at 1080 × 1920 px ({n(estimate)} B estimated) differs by its windows' int64 token indices "
           f"({n(indices)} B, {pct(indices, estimate, 2)}%)")
    big = report("memory", "-p", "qwen2.5-vl-7b", "--images", "4", "--image-size", "1080x1920", "-s", "16384",
                 "-b", "2")
    many = report("memory", "-p", "gemma3-4b", "--images", "8", "-s", "4096", "-b", "4")
    assert many["activation_bytes"] == many["vision_activation_bytes"]
    yield (f"hold {f(big['vision_activation_bytes'] / 1e9, 2)} GB at the tower's peak, under the language model's "
           f"{f(big['activation_bytes'] / 1e9, 2)} GB at 16,384 tokens")
    yield (f"in each of 4 sequences of 4,096 tokens hold {f(many['vision_activation_bytes'] / 1e9, 2)} GB, the larger "
           "of the two.")


@on("vision.md")
def image_time():
    g = gpu_yaml("h100-sxm")
    rate = g["peak_tflops"]["bf16"] * 0.8
    r = report("latency", "-p", "llava-1.5-7b", "--gpu", "h100-sxm", "--time-model", "roofline", "--images", "1")
    flops = image("llava-1.5-7b")["flops_per_image"]
    assert r["image_s"] == pytest.approx(flops / (rate * 1e12))
    yield (f"({g['peak_tflops']['bf16']:g} TFLOP/s × 0.8): {n(flops)} / {f(rate, 1)} T = {f(r['image_s'] * 1e3, 3)} "
           "ms.")


@on("vision.md")
def mllama_tiles_and_tower():
    from llmcalc.model.vision import tile_grid

    v = spec("llama-3.2-11b-vision").vision
    yield (f"A 1080 × 1920 photo is {' × '.join(map(str, v.tiles(1080, 1920)))} tiles; 300 × 2000 px is "
           f"{' × '.join(map(str, v.tiles(300, 2000)))}.")
    assert v.tiles(300, 2000) == tile_grid(300, 2000, v.image_size, v.max_tiles)
    side, per_tile = v.image_size // v.patch_size, v.tile_tokens
    padded = -(-per_tile // v.pad_to) * v.pad_to
    concat = v.projector.concat
    yield (f"Per tile: a {side} × {side} patch grid (patch {v.patch_size}) + a class token, {n(per_tile)} tokens, "
           "padded "
           f"to a multiple of {v.pad_to} ({n(padded)}). A local encoder of {v.n_layers} layers and a global encoder of "
           f"{v.global_layers}")
    tower = image("llama-3.2-11b-vision")
    assert tower["encoder_tokens"] == v.max_tiles * padded and tower["tokens_per_image"] == v.max_tiles * per_tile
    yield f"n = {v.max_tiles} · {n(padded)} = {n(tower['encoder_tokens'])} tokens"
    yield (f"concatenated with local layers {', '.join(map(str, v.intermediate_layers[:-1]))} and "
           f"{v.intermediate_layers[-1]} ({concat} · {v.d_model} = {concat * v.d_model} features) through one "
           f"Linear({concat * v.d_model} → {raw('llama-3.2-11b-vision')['d_model']})")
    yield f"{v.max_tiles} · {n(per_tile)} = {n(tower['tokens_per_image'])} image tokens per image."
    yield (f"with T = {v.max_tiles} tiles, A = {v.aspect_ratios} aspect ratios (+1 for the padding id), n_pos = "
           f"{n(per_tile)}, L = {v.n_layers}, G = {v.global_layers}.")
    core = sum(r["flops_per_image"] for r in report("flops", "-p", "llama-3.2-11b-vision", "--images", "1")["vision"]
               ["breakdown"] if "core" in r["component"])
    yield (f"{n(params(spec('llama-3.2-11b-vision')).vision)} parameters (transformers' vision_model + "
           f"multi_modal_projector on the meta device, exactly); {n(tower['flops_per_image'])} FLOPs per image, "
           "whatever "
           f"its size, {pct(core, tower['flops_per_image'], 1)}% of them the attention core over "
           f"{n(tower['encoder_tokens'])} tokens.")


@on("vision.md")
def mllama_cross_attention():
    r = raw("llama-3.2-11b-vision")
    x = r["mixers"]["cross_attention"]
    cross_layers = mixer_layers("llama-3.2-11b-vision", "cross")
    cycle = r["hybrid_pattern"]
    pattern = [i for i in range(r["n_layers"]) if cycle[i % len(cycle)]["mixer"] == "cross_attention"]
    assert pattern == list(range(pattern[0], r["n_layers"], 5))
    yield (f"{cross_layers} of the {r['n_layers']} text layers (cross_attention_layers {pattern[0]}, {pattern[1]}, …, "
           f"{pattern[-1]}: every fifth from {pattern[0]}) are gated cross-attention layers: GQA-shaped projections "
           f"({x['heads']} query heads, {x['kv_heads']} kv heads of {x['head_dim']})")
    yield f"the other {r['n_layers'] - cross_layers} are Llama 3.1's self-attention layers."
    tokens = image("llama-3.2-11b-vision")["tokens_per_image"]
    assert x["image_tokens"] == tokens
    yield f"= N · {n(tokens)} for the 11B"
    yield f"(the preset: one image, {n(x['image_tokens'])})"
    one, two = (report("flops", "-p", "llama-3.2-11b-vision", "-s", "1000", "--images", k) for k in ("1", "2"))
    kv = report("kv", "-p", "llama-3.2-11b-vision")
    per_image = cross_layers * 2 * tokens * x["kv_heads"] * x["head_dim"] * 2
    assert kv["state_bytes_per_sequence"] == per_image
    cross = sum(b["prefill"] for b in one["breakdown"] if b["component"].startswith("cross_attention/"))
    d = r["d_model"]
    added = cross_layers * (2 * tokens * 2 * d * x["kv_heads"] * x["head_dim"]
                            + 4 * 1000 * tokens * x["heads"] * x["head_dim"])
    assert two["prefill_flops"] - one["prefill_flops"] == added
    yield (f"For the 11B: {cross_layers} × 2 × {n(tokens)} × {x['kv_heads']} × {x['head_dim']} × 2 B = {n(per_image)} "
           "B a "
           f"sequence per image (`kv`'s state_bytes_per_sequence), beside the self-attention layers' "
           f"{n(kv['bytes_per_token'])} B a text token; a prompt of 1,000 tokens with one image: "
           f"{f(one['prefill_flops'] / 1e12, 2)} TFLOPs prefill, {f(cross / 1e12, 2)} T of them the cross layers; each "
           f"further image adds {cross_layers} · (2 · {n(tokens)} · 2 · {d} · {x['kv_heads'] * x['head_dim']} + 4 · "
           "1,000 · "
           f"{n(tokens)} · {x['heads'] * x['head_dim']}) = {f(added / 1e12, 2)} TFLOPs to the prefill, "
           f"{f((two['decode_flops'] - one['decode_flops']) / 1e9, 2)} GFLOPs to a decode step and {n(per_image)} B "
           "to the "
           "cache a decode step reads.")


@on("vision.md")
def mllama_parameters():
    r = raw("llama-3.2-11b-vision")
    p = params(spec("llama-3.2-11b-vision"))
    extra, v, d = r["embedding_extra_rows"], r["vocab_size"], r["d_model"]
    yield (f"builds embed_tokens with vocab_size + {extra} rows ({n(v + extra)} × {d}: the image token `<|image|>`, id "
           f"{n(v)}, and padding), while its lm_head has vocab_size outputs ({n(v)} × {d}). The spec holds the "
           "difference "
           f"as `embedding_extra_rows: {extra}`, which adds {extra}·d = {n(extra * d)} to the token embedding")
    cross = mixer_layers("llama-3.2-11b-vision", "cross")
    yield (f"language = (V + {extra})·d + V·d + {r['n_layers'] - cross} self-attention layers + {cross} cross layers + "
           f"{r['n_layers']} FFNs + norms = {n(p.language)} total = language + vision tower and projector "
           f"{n(p.vision)} = "
           f"{n(p.total)}")
    yield f"the model card says {math.floor(p.total / 1e8) / 10:g}B."


@on("vision.md")
def mllama_validate_estimates():
    fl = report("flops", "-p", "llama-3.2-11b-vision", "-b", "1", "-s", "32", "--attention", "dense")
    kv = report("kv", "-p", "llama-3.2-11b-vision", "-b", "1", "-s", "32")
    yield (f"params {n(params(spec('llama-3.2-11b-vision')).language)}, prefill {n(fl['prefill_flops'])} and decode "
           f"{n(fl['decode_flops'])} FLOPs, train {n(fl['train_flops'])}, KV bytes {n(kv['total_bytes'])} (the "
           f"{mixer_layers('llama-3.2-11b-vision', 'cross')} cross layers' {n(kv['state_bytes_per_sequence'])} for one "
           "image among them), all exact")


@on("vision.md", measured=True)
def mllama_validate_measured():
    rows = validated("-p", "llama-3.2-11b-vision", "-b", "1", "-s", "32")
    assert all(r["measured"] == r["estimate"] for q, r in rows.items() if q != "peak memory")
    peak = rows["peak memory"]
    yield f"all exact; peak memory within {math.ceil(1000 * abs(peak['measured'] / peak['estimate'] - 1)) / 10:g}%."

# docs/formats.md ----------------------------------------------------------------------------------------------


def section_rows(page: str, heading: str) -> list[list[str]]:
    """The cells of the table rows under `heading` of docs/`page` (up to the next heading), header and rule left
    out."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1]
    lines = text.split("\n#", 1)[0].splitlines()
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    return [r for r in rows[2:]]


def as_written(value: float, written: str) -> str:
    """`value` at the decimals `written` has."""
    return f(value, len(written.partition(".")[2]))


@on("formats.md")
def bits_per_weight_table():
    from llmcalc.model.formats import FORMATS

    yield "Bits per weight are for a 16,384 × 16,384 matrix"
    side = 16_384
    for cells in section_rows("formats.md", "## The formats"):
        names = re.findall(r"`([^`]+)`", cells[0])
        if "…" in cells[0]:  # `gptq-int2-g128` … `gptq-int8-g128`: the bits column names them
            names = [re.sub(r"int\d", f"int{b}", names[0]) for b in re.findall(r"\d+", cells[1])]
        formats = [FORMATS[name] for name in names]
        bits = [fm.bits for fm in formats]
        if "–" in cells[1]:
            cells[1] = f"{min(bits)}–{max(bits)}"
        elif "," in cells[1]:
            cells[1] = ", ".join(map(str, bits))
        else:
            assert len(set(bits)) == 1, names
            cells[1] = str(bits[0])
        blocks = iter((fm.matrix_bytes(fm.group, 1), fm.group) for fm in formats if fm.pad)

        def block_sizes(m: re.Match) -> str:
            sizes = [next(blocks) for _ in m[1].split(", ")]
            assert len({g for _, g in sizes}) == 1
            return f"{', '.join(str(b) for b, _ in sizes)}-byte blocks of {sizes[0][1]}"

        if re.search(r"-byte blocks of", cells[2]):
            cells[2] = re.sub(r"((?:\d+, )*\d+)-byte blocks of \d+", block_sizes, cells[2])
            assert next(blocks, None) is None, names
        cells[2] = re.sub(r"per \d+-weight block", lambda m: f"per {formats[0].group}-weight block", cells[2])
        written = cells[4].split(", ")
        per_weight = [fm.matrix_bytes(side, side) * 8 / side ** 2 for fm in formats]
        if len(written) == 1:
            assert len({as_written(x, written[0]) for x in per_weight}) == 1, names
            cells[4] = as_written(per_weight[0], written[0])
        else:
            cells[4] = ", ".join(as_written(x, w) for x, w in zip(per_weight, written, strict=True))
        native = {fm.compute for fm in formats}
        assert len(native) == 1, names
        cells[5] = native.pop() or "—"
        yield "| " + " | ".join(cells) + " |"


CHECKPOINTS = {
    **{name: name.replace("/", "__") for name in (
        "huggyllama/llama-7b", "meta-llama/Llama-3.2-3B-Instruct", "mistralai/Mistral-7B-Instruct-v0.2",
        "mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-v0.1", "mistralai/Mixtral-8x7B-v0.1",
        "mistralai/Mixtral-8x7B-Instruct-v0.1", "openai/gpt-oss-20b",
        "bingjieshengtian/Llama3-8B-Instruct-finetune-fp16", "jeevanchaps/Llama-3.1-8B-Instruct-bnb-int8",
        "deepseek-ai/DeepSeek-R1")},
    **{f"Wizard-Vicuna-30B GPTQ {branch}": f"TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ__{key}" for branch, key in (
        ("3bit--1g", "gptq-3bit--1g_actorder_True"), ("3bit-128g", "gptq-3bit-128g_actorder_False"),
        ("4bit-32g", "gptq-4bit-32g_actorder_True"), ("4bit-64g", "gptq-4bit-64g_actorder_True"),
        ("4bit-128g", "gptq-4bit-128g_actorder_True"), ("8bit--1g", "gptq-8bit--1g_actorder_True"),
        ("8bit-128g", "gptq-8bit-128g_actorder_False"), ("main", "main"))},
    "reubzdubz/Molmo-7B-D-bnb-nf4": "reubzdubz__Molmo-7B-D-bnb-nf4"}
"""The rows of docs/formats.md's table of published checkpoints, and their config.json in ../shared/checkpoint-configs/
(their published sizes in tests/fixtures/checkpoint_sizes.yaml)."""


@functools.cache
def shipped(key: str) -> int:
    """A published checkpoint's bytes as llmcalc counts them, from its config.json in ../shared/."""
    from conftest import shared_folder

    from llmcalc.costs.checkpoint import checkpoint_bytes
    from llmcalc.inputs.hf import load_hf_config

    return checkpoint_bytes(load_hf_config(shared_folder("checkpoint-configs") / f"{key}.json"))[0]


def config(key: str) -> dict:
    """A published checkpoint's config.json, from ../shared/checkpoint-configs/ (the test skips without it)."""
    from conftest import shared_folder

    return json.loads((shared_folder("checkpoint-configs") / f"{key}.json").read_text(encoding="utf-8"))


@on("formats.md")
def published_checkpoints_table():
    sizes = yaml.safe_load((ROOT / "tests" / "fixtures" / "checkpoint_sizes.yaml").read_text(encoding="utf-8"))
    rows = section_rows("formats.md", "## Checkpoint bytes against published checkpoints")
    assert [r[0] for r in rows] == list(CHECKPOINTS)
    matched = 0
    for cells in rows:
        published = sizes[CHECKPOINTS[cells[0]]]
        note = cells[5].partition(" ")[2] or ("" if cells[5] == "0" else cells[5])
        kind = "total_size" if published["kind"] == "total_size" else \
            f"{published['files']} file{'s' if published['files'] > 1 else ''}"
        cells[2], cells[3] = n(published["bytes"]), kind + cells[3].removeprefix(cells[3].split(" (")[0])
        if "unsupported" in published:
            yield "| " + " | ".join(cells) + " |"
            continue
        ours = shipped(CHECKPOINTS[cells[0]])
        matched += published["kind"] == "total_size" and ours == published["bytes"]
        difference = n(published["bytes"] - ours)
        cells[4], cells[5] = n(ours), f"{difference} {note}".strip()
        yield "| " + " | ".join(cells) + " |"
    importable = sum(s["kind"] == "total_size" and "unsupported" not in s for s in sizes.values())
    yield f"The {len(sizes)} `config.json` files in `../shared/checkpoint-configs/`"
    yield f"Every published `total_size` is matched to the byte ({matched} of {importable} importable)."


@on("formats.md")
def header_arithmetic():
    sizes = yaml.safe_load((ROOT / "tests" / "fixtures" / "checkpoint_sizes.yaml").read_text(encoding="utf-8"))
    extra = {key: sizes[key]["bytes"] - shipped(key) for key in CHECKPOINTS.values() if "unsupported" not in sizes[key]}
    mistral = config("mistralai__Mistral-7B-v0.1")
    tensors = 9 * mistral["num_hidden_layers"] + 3  # 7 linears and 2 norms a layer; embedding, final norm, head
    a = extra["mistralai__Mistral-7B-v0.1"]
    yield f"(8 bytes and the JSON list of its tensors: {n(a)} bytes for {tensors} tensors, {a // tensors} per tensor)."
    yield (f"The v0.2 index, with the same shapes, gives {n(shipped('mistralai__Mistral-7B-Instruct-v0.2'))}, our "
           "figure.")
    r1 = extra["deepseek-ai__DeepSeek-R1"]
    yield f"only its 163 files: {f(r1 / 1e6, 1)} MB of headers for its 91,991 tensors"
    yield f"MTP layer with its own embedding and head; {r1 // 91_991} bytes per entry)."
    wizard = config("TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ__main")
    layers, d, ff = wizard["num_hidden_layers"], wizard["hidden_size"], wizard["intermediate_size"]
    # a layer: 7 linears of 5 tensors, 2 norms and an inv_freq; then the embedding, the final norm and the head
    tensors = layers * (7 * 5 + 2 + 1) + 3
    branches = {k: v for k, v in extra.items() if "GPTQ" in k and not k.endswith("main")}
    header = sum(branches.values()) / len(branches)
    share = max(v / sizes[k]["bytes"] for k, v in branches.items())
    bias = 2 * layers * (4 * d + 2 * ff + d)  # fp16, every linear's outputs: q, k, v, o, gate, up, down
    yield (f"its header, ~{header / tensors:.0f} bytes for each of its {n(tensors)} tensors (per linear `qweight`, "
           f"`qzeros`, `scales`, `g_idx`, `bias`; the norms, the {layers} `inv_freq`, embedding and head), "
           f"{share * 1e5:.1f}e-5 of the file. The fp16 bias of every linear ({n(bias)} bytes here) is AutoGPTQ's "
           f"layout: without it every branch would be {f((bias + header) / 1e6, 2)} MB off.")
    assert len({f((bias + v) / 1e6, 2) for v in branches.values()}) == 1
    main = extra["TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ__main"]
    yield (f"The main branch carries {f((main - header) / 1e6, 2)} MB beyond its header that no GPTQ layout of its "
           "config "
           "(4-bit, per row, act-order) explains: "
           f"{pct(main - header, sizes['TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ__main']['bytes'], 3)}% of the "
           "file.")

# docs/serving.md ----------------------------------------------------------------------------------------------


def simulate(preset="llama3-8b", n=300, prompt="1024", output="128", rate=float("inf"), constant=False,
             engine=None, w=None, spec_dec=None, gpu="h100-sxm"):
    """`llmcalc serve`'s simulation (calibrated time model, seed 0)."""
    from llmcalc.inputs.requests import parse_lengths
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.views.serve import Load, make_requests, serve
    from llmcalc.workload import Workload

    g, load = load_gpu(gpu), Load(rate=rate, constant=constant)
    rows = make_requests(n, parse_lengths(prompt, "prompt"), parse_lengths(output, "output"), load, 0)
    return serve(spec(preset), g, w or Workload(), load_time_model(None, g), rows, engine or settings(), load, prompt,
                 output, seed=0, spec_dec=spec_dec)


@on("serving.md", slow=True)
def serve_checks_table():
    from llmcalc.costs.latency import latency
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.views.serve import speculative
    from llmcalc.workload import Layout, Workload

    h100 = load_gpu("h100-sxm")
    tm = load_time_model(None, h100)
    low = simulate(n=20, prompt="1024", output="64", rate=0.05, constant=True)
    lat = latency(spec("llama3-8b"), h100, Workload(batch=1, seq=1024, gen=64), tm)
    assert low.tpot_s.p99 == pytest.approx((lat.total_s - lat.ttft_s) / 63, rel=1e-9)
    yield (f"TTFT and TPOT vs `llmcalc latency --batch 1` | {f(low.ttft_s.p50 * 1e3, 2)} ms vs "
           f"{f(lat.ttft_s * 1e3, 2)} ms; TPOT equal to 1e-9 |")
    ratios = []
    for b in (16, 64, 256):
        full = simulate(n=10 * b, prompt="512", output="256", engine=settings(max_seqs=b))
        static = latency(spec("llama3-8b"), h100, Workload(batch=b, seq=512, gen=256), tm).tokens_per_s
        ratios.append(f(full.output_tokens_per_s / static, 4))
    yield f"| B = 16: {ratios[0]}; 64: {ratios[1]}; 256: {ratios[2]} |"
    rates = [simulate(n=300, prompt="4096", output="1024", engine=settings(max_seqs=512, gpu_memory_utilization=u))
             .output_tokens_per_s for u in (0.4, 0.55, 0.7, 0.9)]
    assert rates == sorted(rates)
    yield f"| {' → '.join(f(x, 0) for x in rates)} output tokens/s; never lower |"
    w = Workload(layout=Layout(tp=4))
    drawn = []
    for a in (0.5, 0.7, 0.9):
        sd = speculative(spec("llama3.1-70b"), h100, w, tm, 4, a, spec("llama3-8b"), 8192)
        r = simulate("llama3.1-70b", n=30, prompt="512", output="200", rate=0.05, constant=True, w=w, spec_dec=sd)
        expected = (1 - a ** 5) / (1 - a)  # Σ_{i=0}^{4} a^i, the truncated geometric of k = 4 draft tokens
        drawn.append((f(r.tokens_per_step, 2), f(expected, 2)))
    yield (f"| tokens per step {drawn[0][0]} (expected {drawn[0][1]}) at a = 0.5; {drawn[1][0]} ({drawn[1][1]}) at "
           "0.7; "
           f"{drawn[2][0]} ({drawn[2][1]}) at 0.9 |")


@on("serving.md", slow=True)
def plan_against_the_simulator():
    from llmcalc.costs.engine_step import EngineStep
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.views.plan import steady
    from llmcalc.workload import Workload

    h100 = load_gpu("h100-sxm")
    step = EngineStep(spec("llama3-8b"), h100, Workload(), load_time_model(None, h100))
    tpot, concurrency, ttft = [], [], []
    for rate in (2, 10, 15, 20):
        est, sim = steady(step, 1024, 256, rate), simulate(n=1500, prompt="1024", output="256", rate=rate)
        b = f(est.b, 1) if est.b < 100 else f(est.b, 0)
        b_sim = f(sim.mean_concurrency, 1) if sim.mean_concurrency < 100 else f(sim.mean_concurrency, 0)
        yield (f"| {rate} | {b} / {b_sim} | {f(est.tpot * 1e3, 1)} / {f(sim.tpot_s.mean * 1e3, 1)} ms | "
               f"{f(est.ttft * 1e3, 0)} / {f(sim.ttft_s.mean * 1e3, 0)} ms |")
        tpot.append(abs(est.tpot / sim.tpot_s.mean - 1))
        concurrency.append(abs(est.b / sim.mean_concurrency - 1))
        ttft.append(1 - est.ttft / sim.ttft_s.mean)
    assert steady(step, 1024, 256, 30) is None
    yield (f"TPOT and concurrency agree within {math.ceil(100 * max(tpot))}% and {math.ceil(100 * max(concurrency))}%; "
           f"TTFT is low by {10 * math.floor(10 * min(ttft))}–{10 * math.ceil(10 * max(ttft))}%")
    ramp = simulate(n=400, prompt="1024", output="256", rate=20)
    yield f"over 400 requests the simulated concurrency at 20 requests/s is {ramp.mean_concurrency:.0f}."

# Shapes and constants worked into other pages -------------------------------------------------------------------


@on("roofline.md")
def kipply_model_on_the_roofline():
    from llmcalc.costs.latency import latency
    from llmcalc.inputs.presets import spec_from_data
    from llmcalc.model.gpu import GPU
    from llmcalc.model.time_model import TimeModel
    from llmcalc.workload import Workload

    gpu = GPU.model_validate({"name": "a100-kipply", "description": "A100 as the article takes it", "source": "kipply",
                              "peak_tflops": {"fp32": 19.5, "bf16": 312, "fp16": 312}, "memory_gib": 1000,
                              "memory_bandwidth_gbs": 1500, "interconnect": "NVLink 3", "interconnect_gbs": 600})
    model = spec_from_data({"name": "kipply-52b", "vocab_size": 65536, "d_model": 8192, "n_layers": 64,
                            "max_seq_len": 8192, "tie_embeddings": True, "norm": {"kind": "layernorm", "bias": True},
                            "positions": {"kind": "none"},
                            "attention": {"kind": "gqa", "heads": 64, "kv_heads": 64, "head_dim": 128},
                            "ffn": {"kind": "dense", "d_ff": 32768, "activation": "gelu"}}, "kipply's 52B")
    ideal = TimeModel(name="roofline", compute_efficiency=1.0, memory_efficiency=1.0, comm_efficiency=1.0)
    r = latency(model, gpu, Workload(batch=1, seq=1, gen=2), ideal)
    assert 69 <= r.tpot_s * 1e3 <= 72 and 51e9 < params(model).total < 53e9
    yield f"sets the efficiencies to 1, and gets {r.ridge_point:.0f} and 69–72 ms."


@on("formulas.md")
def selective_recompute_savings():
    from test_mfu import KORTHIKANTI, gpt

    from llmcalc.costs.memory import memory
    from llmcalc.workload import Layout, Workload

    def saved(size: str) -> str:
        h, a, layers = KORTHIKANTI[size]
        w = dict(train=True, batch=1, seq=2048, dropout=True, flash=False, layout=Layout(tp=8, sp=True))
        kept = memory(gpt(h, a, layers), Workload(**w, recompute="selective")).activation_bytes_per_layer
        return f"{1 - kept / memory(gpt(h, a, layers), Workload(**w)).activation_bytes_per_layer:.0%}"

    yield f"({saved('175B')} of the activations for GPT-3, {saved('530B')} for MT-NLG)"


@on("commands/mfu.md")
def accelerator_peaks():
    from test_mfu import A100_PEAK, TPU_V4_PEAK

    assert gpu_yaml("a100-80gb")["peak_tflops"]["bf16"] * 1e12 == A100_PEAK
    yield f"A100 peak {A100_PEAK / 1e12:g} TFLOP/s, TPU v4 {TPU_V4_PEAK / 1e12:g}."
    yield f"(a TPU v4: {TPU_V4_PEAK / 1e12:g};"


@on("commands/compare.md")
def mla_swap_widths():
    a = raw("llama2-7b")["attention"]
    yield (f"(attention in the {4 * a['head_dim'] + a['head_dim'] // 2}-wide latent space: more FLOPs per cached token "
           f"than MHA's {a['head_dim']}-wide heads")


@on("commands/calibrate.md")
def llama3_8b_weight_shapes():
    r = raw("llama3-8b")
    a, d, ff = r["attention"], r["d_model"], r["ffn"]["d_ff"]
    yield (f"(llama3-8b: q/o {a['heads'] * a['head_dim']}×{d}, k/v {a['kv_heads'] * a['head_dim']}×{d}, gate/up "
           f"{ff}×{d}, down {d}×{ff})")


@on("commands/sweep.md")
def doubling_grid():
    from llmcalc.inputs.grid import parse_grid

    seqs = parse_grid("1k..128k", "seq")
    yield f"(`1k..128k` is {seqs[0]}, {seqs[1]}, …, {seqs[-1]})"

@on("encoder-decoder.md")
def tiny_models_of_the_checks():
    from test_encoder_decoder_costs import B, BART, T5, WHISPER, _workload

    from llmcalc.costs.flops import flops
    from llmcalc.costs.kv import kv_cache
    from llmcalc.costs.latency import latency
    from llmcalc.inputs.hf import spec_dict_from_hf
    from llmcalc.inputs.presets import spec_from_data

    def tiny(config):
        return spec_from_data(spec_dict_from_hf(dict(config), name=config["model_type"]), config["model_type"])

    r = {name: flops(tiny(c), _workload(c)) for name, c in (("t5", T5), ("bart", BART), ("whisper", WHISPER))}
    yield (f"The tiny T5 measures {n(r['t5'].prefill_flops)} prefill and {n(r['t5'].decode_flops)} decode FLOPs, the "
           f"tiny BART {n(r['bart'].prefill_flops)} and {n(r['bart'].decode_flops)}, the tiny Whisper "
           f"{n(r['whisper'].prefill_flops)} and {n(r['whisper'].decode_flops)} (its training step "
           f"{n(r['whisper'].train_flops)})")
    caches = []
    for c in (T5, BART):
        kv = kv_cache(tiny(c), _workload(c))
        caches.append((n(kv.total_bytes - B * kv.cross_bytes_per_sequence), n(B * kv.cross_bytes_per_sequence)))
    yield (f"(tiny T5: {caches[0][0]} and {caches[0][1]} bytes in fp32, measured before the decode step appends its "
           f"token; tiny BART {caches[1][0]} and {caches[1][1]})")
    steps = []
    for c in (T5, BART, WHISPER):
        w = _workload(c).model_copy(update={"seq": 1, "gen": 2, "weights_dtype": "fp32", "compute_dtype": "fp32"})
        phases = {p.phase: p.flops for p in latency(tiny(c), load_gpu("h100-sxm"), w).phases}
        steps.append((n(phases["prefill"]), n(phases["decode first"])))
    yield (f"{steps[0][0]} and {steps[0][1]} FLOPs (T5), {steps[1][0]} and {steps[1][1]} (BART), {steps[2][0]} and "
           f"{steps[2][1]} (Whisper)")


@on("commands/kv.md")
def gemma2_sliding_layers():
    kv = report("kv", "-p", "gemma2-9b", "-b", "8", "-s", "8192")
    window = raw("gemma2-9b")["sliding_window"]
    assert row(kv, f"sliding {window}")["tokens_cached"] == window - 1
    yield f"keep at most the last window − 1 tokens ({n(window - 1)} here)."


@on("commands/memory.md")
def gpt_oss_checkpoint_bytes():
    sizes = yaml.safe_load((ROOT / "tests" / "fixtures" / "checkpoint_sizes.yaml").read_text(encoding="utf-8"))
    weights = report("memory", "-p", "gpt-oss-20b", "-s", "8192", "--weights-format",
                     "experts=mxfp4,default=bf16")["weights_bytes"]
    assert weights == sizes["openai__gpt-oss-20b"]["bytes"]
    yield f"which is its published checkpoint's {n(weights)} bytes"


@on("commands/moe.md")
def routing_presets():
    switch, gshard = raw("switch-base-8-decoder")["ffn"], raw("gshard-top2-decoder")["ffn"]
    assert gshard["capacity_factor"] == 1.0
    yield (f"The presets `switch-base-8-decoder` (top-{switch['top_k']}, capacity factor "
           f"{switch['capacity_factor']:g}) "
           f"and `gshard-top2-decoder` (top-{gshard['top_k']}, 2N/E)")

@on("serving.md")
def published_benchmarks_summary():
    import statistics

    page = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    table = page.split("<!-- serving-table -->")[1].split("<!-- /serving-table -->")[0]
    rows = [cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
                                if line.startswith("| ")) if len(cells) == 13 and cells[1] in ("table", "heldout")]

    def ratios(where) -> list[float]:
        return [float(r[12]) for r in rows if where(r)]

    def span(values: list[float], places: int = 2) -> str:
        lo, hi = f(min(values), places), f(max(values), places)
        return lo if lo == hi else f"{lo}–{hi}"

    own = lambda r: r[0].startswith("trt")  # noqa: E731 - TensorRT-LLM's own tables
    medians = {q: [statistics.median(ratios(lambda r: own(r) and r[9] == q and r[1] == sub))
                   for sub in ("table", "heldout")] for q in ("output tokens/s", "TTFT mean", "TPOT mean")}
    yield (f"output tokens/s median {span(medians['output tokens/s'])} (table and held out), TPOT "
           f"{span(medians['TPOT mean'])}×, TTFT")
    host = load_engine("trtllm-triton").request_s * 1e3
    yield f"{span(medians['TTFT mean'])}× with Triton's {f(host, 1)} ms a request"
    inf = ratios(lambda r: own(r) and r[3] == "all at once" and not r[0].endswith("maxthpt") and r[9] == "TPOT mean")
    yield f"limit (2,048) instead of 256 moved the all-at-once rows from TPOT 1.55–1.85× to {span(inf)}×"
    llama = [r for r in rows if r[0].startswith("datacrunch")]
    rate = lambda r: float(r[3].split()[1])  # noqa: E731
    low = [r for r in llama if rate(r) <= 4]
    yield (f"output tokens/s {span([float(r[12]) for r in llama if rate(r) <= 8 and r[9] == 'output tokens/s'])} "
           "up to 8 requests/s")
    yield f"TPOT {span([float(r[12]) for r in low if r[9] == 'TPOT p50'])} up to 4 requests/s"
    yield f"the measured TTFT is {span([float(r[12]) for r in low if r[9] == 'TTFT p50'])}× the"
    high = {rate(r): float(r[12]) for r in llama if rate(r) > 4 and r[9] == "TTFT p50"}
    yield f"{f(high[8], 1)}× at 8 and {f(high[16], 1)}× at 16"


@on("serving.md")
def vllm_v0_prefill_per_prompt_token():
    page = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    table = page.split("<!-- serving-table -->")[1].split("<!-- /serving-table -->")[0]
    ms = lambda cell: float(cell.removesuffix(" ms").replace(",", ""))  # noqa: E731
    ttft = {cells[0]: (ms(cells[10]), ms(cells[11])) for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| "))
        if len(cells) == 13 and cells[9] == "TTFT p50"}

    def rounds(gpu: str, most: int) -> tuple[list[float], list[float]]:
        """Measured and predicted µs of TTFT per prompt token of a round of clients × 3,200 tokens, vLLM V0 on
        `gpu`, up to `most` clients."""
        prefix = f"dstack-dsr1-{gpu}-vllm-tp8-3200-800-c"
        per = [(m * 1e3 / (c * 3200), p * 1e3 / (c * 3200)) for c, (m, p) in
               ((int(k.removeprefix(prefix)), v) for k, v in ttft.items() if k.startswith(prefix)) if c <= most]
        assert len(per) >= 5
        return [m for m, _ in per], [p for _, p in per]

    def us(values: list[float]) -> str:
        return f"{min(values):.0f}–{max(values):.0f}"

    def rate(values: list[float]) -> str:  # tokens/s, to the hundred
        return f"{round(1e6 / max(values), -2):,.0f}–{round(1e6 / min(values), -2):,.0f}"

    points = yaml.safe_load((ROOT / "benchmarks" / "serving" / "published.yaml").read_text(encoding="utf-8"))["points"]
    spread = max(abs(p["measured"]["ttft_ms_mean"] / p["measured"]["ttft_ms_p50"] - 1) for p in points
                 if p["id"].startswith("dstack-dsr1-h200-vllm-tp8-3200-800-c") and p["concurrency"] <= 64)
    assert spread < 0.02  # the page: "each run's mean TTFT is within 2% of its median"
    measured, predicted = rounds("h200", 64)
    yield f"H200 measured {us(measured)} µs at 4 to 64 clients ({rate(measured)} tokens/s"
    yield f"where `serve` gives {us(predicted)} µs ({rate(predicted)} tokens/s)"
    measured, predicted = rounds("mi300x", 128)
    yield f"measured {us(measured)} µs against {us(predicted)} µs"


@on("formulas.md")
def scaling_law_constants():
    from llmcalc.costs.scaling import LAWS, LOSS, TRAIN_FLOPS

    one, two, three, kaplan = (LAWS[m] for m in ("chinchilla-1", "chinchilla-2", "chinchilla-3", "kaplan"))
    assert one.params(TRAIN_FLOPS * 400e6 * 8.0e9) == pytest.approx(400e6)
    assert two.params(TRAIN_FLOPS * 400e6 * 7.7e9) == pytest.approx(400e6)
    yield f"| `chinchilla-1` | {one.exponent} | through (400M parameters, 8.0B tokens) |"
    yield f"| `chinchilla-2` | {two.exponent} | through (400M, 7.7B) |"
    yield f"| `chinchilla-3` | β/(α+β) = {f(three.exponent, 4)} |"
    assert kaplan.params(2 * 8.64e19) == pytest.approx(1.3e9)
    yield f"| `kaplan` | {kaplan.exponent} | 1.3·10⁹ · (2 · 8.64·10¹⁹)^(−{kaplan.exponent}) |"
    yield (f"E = {LOSS['E']}, A = {LOSS['A']}, B = {LOSS['B']}, α = {LOSS['alpha']}, β = {LOSS['beta']} (the form of "
           "§3.3, Eq. 2")
    yield f"so D ∝ C^{1 - kaplan.exponent:.2f}"


@on("formulas.md")
def flash_backward_passes():
    r = report("flops", "-p", "llama2-7b", "-b", "1", "-s", "1024", "--logits", "all")
    forward = {c: component(r["breakdown"], f"attention/core_{c}", "prefill") for c in ("scores", "values")}
    hardware = {c: component(r["breakdown"], f"attention/core_{c}", "train_hardware") for c in ("scores", "values")}
    scores, values = hardware["scores"] / forward["scores"], hardware["values"] / forward["values"]
    both = sum(hardware.values()) / sum(forward.values())
    yield (f"the scores' row is {scores:g} × its forward, the values' {values:g} ×, so {both:g} × the core's forward "
           f"when d_qk = d_v — the backward {both - 1:g} × the forward")


@on("roofline.md")
def efficiency_and_fit_defaults():
    from llmcalc.model.time_model import ROOFLINE
    from llmcalc.workload import Workload

    yield f"| `--compute-efficiency` | {ROOFLINE.compute_efficiency:g} |"
    yield f"| `--memory-efficiency` | {ROOFLINE.memory_efficiency:g} |"
    yield f"| `--comm-efficiency` | {ROOFLINE.comm_efficiency:g} |"
    w = Workload()
    yield f"usable = capacity · (1 − reserve) reserve {w.reserve:.2f} = vLLM's gpu_memory_utilization {1 - w.reserve:g}"
    yield f"workspace: one prefill chunk ({w.prefill_chunk} tokens"
    yield f"(NVLink 4: {gpu_yaml('h100-sxm')['interconnect_gbs']:g} GB/s)"


@pytest.mark.parametrize("key", [pytest.param(key, marks=[pytest.mark.slow] if FIGURES[key][2] else [])
                                 for key in FIGURES])
def test_worked_figure_is_current(key):
    page, fn, _, measured = FIGURES[key]
    if measured:
        pytest.importorskip("torch")
    text, checked = page_text(page), 0
    for expected in fn():
        expected = " ".join(expected.split())
        assert re.search(r"\d", expected), f"«{expected}» states no figure"
        assert expected in text, f"docs/{page} should read «{expected}»; it has «{nearest(text, expected)}»"
        checked += 1
    assert checked, f"{key} checks nothing"


def nearest(text: str, expected: str) -> str:
    """The page's text where it departs from `expected`: from the longest start of `expected` it holds."""
    for cut in range(len(expected), 0, -1):
        at = text.find(expected[:cut])
        if at >= 0:
            return text[at:at + len(expected) + 20]
    return "(no part of it)"
