"""GPU presets against the figures their vendor publishes: the Blackwell Ultra presets (gb300, b300) figure by figure
against NVIDIA's datasheet, HGX page and GB300 NVL72 rack totals; the device names that find them; their time-model
profiles; and the table of presets in docs/roofline.md against the presets and their profiles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from llmcalc.inputs.gpus import GPU_DIR, gpu_names, load_gpu, preset_for_device
from llmcalc.inputs.time_models import CALIBRATION_DIR, load_time_model

ROOT = Path(__file__).parents[1]

DATASHEET = "https://resources.nvidia.com/en-us-blackwell-architecture/blackwell-ultra-datasheet"
"""NVIDIA Blackwell Ultra datasheet, "Individual GPU Specifications": tensor figures with sparsity, FP4 "sparse | dense"."""
HGX = "https://www.nvidia.com/en-us/data-center/hgx/"
"""HGX B300 column: 8-GPU totals, tensor figures with sparsity, FP4 "sparse | dense"."""
NVL72 = "https://www.nvidia.com/en-us/data-center/gb300-nvl72/"
"""GB300 NVL72 rack totals (72 GPUs), tensor figures with sparsity, FP4 "sparse | dense"."""

# (preset, field, figure the preset must state, the published figure it follows from, source)
FIGURES = [
    ("gb300", "fp32", 80, "FP32 80 TFLOPS", DATASHEET),
    ("gb300", "tf32", 2500 / 2, "TF32 2.5 PFLOPS with sparsity", DATASHEET),
    ("gb300", "bf16", 5000 / 2, "FP16/BF16 5 PFLOPS with sparsity", DATASHEET),
    ("gb300", "fp16", 5000 / 2, "FP16/BF16 5 PFLOPS with sparsity", DATASHEET),
    ("gb300", "fp8", 10000 / 2, "FP8/FP6 10 PFLOPS with sparsity", DATASHEET),
    ("gb300", "int8", 330 / 2, "INT8 330 TOPS with sparsity", DATASHEET),
    ("gb300", "fp4", 15000, "FP4 20 | 15 PFLOPS (sparse | dense)", DATASHEET),
    ("gb300", "memory_gib", 279, "279 GB HBM3E", DATASHEET),
    ("gb300", "memory_bandwidth_gbs", 8000, "8 TB/s", DATASHEET),
    ("gb300", "interconnect_gbs", 1800, "Fifth-generation NVLink 1.8 TB/s", DATASHEET),
    ("gb300", "gpus_per_node", 72, "72 Blackwell Ultra GPUs on one NVLink domain", NVL72),
    ("gb300", "network_gbs", 800 / 8 * 2, "ConnectX-8 SuperNIC, 800 Gb/s per GPU", NVL72),
    ("b300", "fp32", 600 / 8, "FP32 600 TFLOPS per 8 GPUs", HGX),
    ("b300", "tf32", 18000 / 8 / 2, "TF32 18 PFLOPS per 8 GPUs with sparsity", HGX),
    ("b300", "bf16", 36000 / 8 / 2, "FP16/BF16 36 PFLOPS per 8 GPUs with sparsity", HGX),
    ("b300", "fp16", 36000 / 8 / 2, "FP16/BF16 36 PFLOPS per 8 GPUs with sparsity", HGX),
    ("b300", "fp8", 72000 / 8 / 2, "FP8/FP6 72 PFLOPS per 8 GPUs with sparsity", HGX),
    ("b300", "int8", 307 / 2, "INT8 307 TOPS with sparsity (HGX B300 column)", DATASHEET),
    ("b300", "fp4", 108000 / 8, "FP4 144 | 108 PFLOPS per 8 GPUs (sparse | dense)", HGX),
    ("b300", "memory_gib", 270, "270 GB HBM3E (HGX B300 column)", DATASHEET),
    ("b300", "memory_bandwidth_gbs", 7700, "7.7 TB/s (HGX B300 column)", DATASHEET),
    ("b300", "interconnect_gbs", 14400 / 8, "NVLink 14.4 TB/s per 8 GPUs", HGX),
    ("b300", "gpus_per_node", 8, "8 Blackwell Ultra GPUs per board", HGX),
    ("b300", "network_gbs", 1600 / 8, "networking bandwidth 1.6 TB/s per 8 GPUs", HGX),
]
PEAKS = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"}


def stated(name: str, field: str):
    """The figure as the preset's YAML states it, and as the loaded GPU carries it."""
    raw = yaml.safe_load((GPU_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    gpu = load_gpu(name)
    if field in PEAKS:
        return raw["peak_tflops"][field], getattr(gpu.peak_tflops, field)
    return raw[field], getattr(gpu, field)


@pytest.mark.parametrize("name, field, figure, published, source", FIGURES,
                         ids=[f"{n}-{f}" for n, f, *_ in FIGURES])
def test_blackwell_ultra_presets_state_the_published_figures(name, field, figure, published, source):
    in_yaml, loaded = stated(name, field)
    assert in_yaml == pytest.approx(figure, rel=1e-12) and loaded == in_yaml, (name, field, published, source)


@pytest.mark.parametrize("field, rack_total", [("fp4", 1_080_000), ("fp8", 720_000 / 2), ("bf16", 360_000 / 2),
                                               ("tf32", 180_000 / 2), ("memory_bandwidth_gbs", 576_000)])
def test_gb300_is_one_72nd_of_the_nvl72_rack(field, rack_total):
    """The GB300 NVL72 page's rack totals (dense) over 72 GPUs give the datasheet's per-GPU figures."""
    assert stated("gb300", field)[0] == rack_total / 72


def test_blackwell_ultra_trades_int8_for_fp4_and_b300_and_gb300_are_priced_or_say_why_not():
    for ultra, blackwell in (("b300", "b200"), ("gb300", "gb200")):
        u, b = load_gpu(ultra), load_gpu(blackwell)
        assert u.peak("fp4") > b.peak("fp4") and u.peak("int8") < b.peak("int8") / 20
        assert u.memory_gib > 1.4 * b.memory_gib and u.link(u.gpus_per_node) == b.link(b.gpus_per_node)
    assert load_gpu("b300").price_per_hour == 7.89
    header = (GPU_DIR / "gb300.yaml").read_text(encoding="utf-8")
    assert load_gpu("gb300").price_per_hour is None and "# price_per_hour: null" in header


@pytest.mark.parametrize("device, preset", [("NVIDIA GB300", "gb300"), ("NVIDIA B300 SXM6 AC", "b300"),
                                            ("NVIDIA GB200", "gb200"), ("NVIDIA B200", "b200")])
def test_device_names_find_the_blackwell_presets_the_longest_word_first(device, preset):
    assert preset_for_device(device) == preset


@pytest.mark.parametrize("name", ["b300", "gb300"])
def test_blackwell_ultra_profiles_are_the_h200_fit_by_analogy_as_blackwell_s_are(name):
    gpu, b200 = load_gpu(name), load_gpu("b200")
    tm, ref = load_time_model("calibrated", gpu), load_time_model("calibrated", b200)
    assert tm.gpu == name
    assert tm.model_dump(exclude={"gpu", "sources"}) == ref.model_dump(exclude={"gpu", "sources"})
    for field, source in tm.sources.items():
        assert source == ref.sources[field].replace("b200", name), field
    assert tm.sources["compute_efficiency"].startswith(f"by analogy: no published measurement on {name}; "
                                                       "the figure fitted for h200")


@pytest.mark.parametrize("gpu", ["gb300", "b300"])
def test_latency_runs_on_blackwell_ultra_over_nvlink(cli_json, gpu):
    r = cli_json("latency", "-p", "llama3.1-70b", "--gpu", gpu, "--gpus", "8")
    assert r["time_model"] == "calibrated" and r["ttft_s"] > 0 and r["tpot_s"] > 0
    assert not [n for n in r["notes"] if "crosses nodes" in n]  # tp 8 stays within the NVLink domain


def presets_table() -> dict[str, tuple[str, str]]:
    """docs/roofline.md's table of presets: name → (figures from, time-model profile)."""
    text = (ROOT / "docs" / "roofline.md").read_text(encoding="utf-8")
    section = text.split("### The presets", 1)[1].split("\n### ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| preset")]
    return {name.strip(): (source.strip(), profile.strip()) for name, source, profile in rows}


def test_roofline_lists_every_preset_with_the_basis_of_its_profile():
    table = presets_table()
    assert sorted(table) == gpu_names()
    for name, (_, profile) in table.items():
        source = yaml.safe_load((CALIBRATION_DIR / f"{name}.yaml").read_text(encoding="utf-8"))["sources"]
        basis = source["compute_efficiency"]
        if basis.startswith("by analogy"):
            fitted_on = re.search(r"the figure fitted for (\S+),", basis)[1]
            assert profile.startswith("by analogy") and f"{fitted_on}'s fit" in profile, (name, profile)
            assert ("across vendors" in profile) == ("across vendors" in basis), name
        elif basis.startswith("measured"):
            assert profile.startswith("measured"), (name, profile)
        else:
            assert profile.startswith("fitted"), (name, profile)
