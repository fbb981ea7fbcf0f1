"""GPU link tiers: the interconnect within a node, the network between nodes, and how a GPU file states them; and
the rental price a GPU file may state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmcalc.costs.latency import latency
from llmcalc.costs.parallel import collective_link
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import GPU_DIR, gpu_names, load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.model.gpu import Link
from llmcalc.workload import Layout, Workload

H100 = yaml.safe_load((GPU_DIR / "h100-sxm.yaml").read_text())


def gpu_file(tmp_path: Path, **changes) -> Path:
    f = tmp_path / "gpu.yaml"
    f.write_text(yaml.safe_dump({**H100, **changes}))
    return f


def test_a_collective_within_a_node_crosses_nvlink_and_beyond_it_the_network():
    """DGX H100: 8 GPUs on NVLink 4 (900 GB/s both ways), one 400 Gb/s NIC per GPU (100 GB/s both ways)."""
    h100 = load_gpu("h100-sxm")
    assert h100.gpus_per_node == 8
    for span in (1, 2, 8):
        assert h100.link(span) == Link(450e9, h100.interconnect_latency_us * 1e-6)
    assert h100.link(9) == h100.link(16) == Link(50e9, h100.network_latency_us * 1e-6)
    assert h100.link(8).bytes_per_s == h100.link_one_way


def test_gb200_keeps_72_gpus_on_nvlink():
    gb200 = load_gpu("gb200")
    assert gb200.gpus_per_node == 72 and gb200.link(72).bytes_per_s == 900e9


def test_without_tiers_every_span_is_the_interconnect(tmp_path):
    """A GPU file without the new fields keeps the single-tier model; unknown latencies are 0."""
    old = {k: v for k, v in H100.items()
           if k not in ("gpus_per_node", "interconnect_latency_us", "network_gbs", "network_latency_us")}
    f = tmp_path / "old.yaml"
    f.write_text(yaml.safe_dump(old))
    gpu = load_gpu(str(f))
    assert gpu.gpus_per_node is None
    assert gpu.link(1) == gpu.link(1024) == Link(450e9, 0.0)


def test_without_a_network_figure_a_wide_collective_falls_back_to_the_interconnect(tmp_path):
    gpu = load_gpu(str(gpu_file(tmp_path, network_gbs=None, network_latency_us=None)))
    assert gpu.link(64) == gpu.link(8)


def test_every_preset_states_its_tiers_consistently():
    for name in gpu_names():
        g = load_gpu(name)
        if g.network_gbs is not None:
            assert g.gpus_per_node and g.network_gbs < g.interconnect_gbs, name
            assert g.link(g.gpus_per_node + 1).bytes_per_s < g.link(g.gpus_per_node).bytes_per_s, name


@pytest.mark.parametrize("changes,needles", [
    ({"gpus_per_node": 0}, ["gpus_per_node", "positive"]),
    ({"gpus_per_node": 8.5}, ["gpus_per_node", "whole number"]),
    ({"interconnect_latency_us": -1}, ["interconnect_latency_us", "positive"]),
    ({"network_gbs": 0}, ["network_gbs", "positive"]),
    ({"gpus_per_node": None}, ["network_gbs", "gpus_per_node"]),
    ({"network_gbs": None}, ["network_latency_us", "network_gbs"]),
])
def test_bad_tier_fields_name_the_field_and_the_fix(tmp_path, changes, needles):
    with pytest.raises(UserError) as e:
        load_gpu(str(gpu_file(tmp_path, **changes)))
    message = str(e.value)
    assert "\n" not in message and all(n in message for n in needles), message


def test_cli_refuses_a_gpu_file_with_no_gpus_per_node(cli, tmp_path):
    r = cli("latency", "-p", "llama2-7b", "--gpu", str(gpu_file(tmp_path, gpus_per_node=0)))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line, = r.stderr.strip().splitlines()
    assert "gpus_per_node" in line and "positive" in line


def test_collectives_beyond_a_node_take_the_network_by_their_algorithm():
    h100, node = load_gpu("h100-sxm"), 8
    nic = h100.network_gbs * 1e9 / 2
    nvlink = h100.interconnect_gbs * 1e9 / 2
    within = Layout(tp=8, ep=8)
    assert collective_link("comm/tp_all_reduce", within, h100).bytes_per_s == nvlink
    assert collective_link("comm/ep_all_to_all", within, h100).bytes_per_s == nvlink
    wide = Layout(tp=16, ep=16)  # a ring per GPU of each node, each through its own NIC: 8 NICs, capped by NVLink
    assert collective_link("comm/tp_all_reduce", wide, h100).bytes_per_s == min(nvlink, node * nic)
    assert collective_link("comm/ep_all_to_all", wide, h100).bytes_per_s == nic  # every GPU's own NIC
    strided = Layout(tp=2, dp=32)  # the gradient reduction's group: 32 GPUs 2 apart, 4 in each node
    assert collective_link("comm/dp_all_reduce", strided, h100).bytes_per_s == 4 * nic
    assert collective_link("comm/pp_send", Layout(tp=8, pp=2), h100).bytes_per_s == nic


def test_latency_charges_a_tensor_parallel_all_reduce_beyond_a_node_at_the_rails_bandwidth(cli_json, tmp_path):
    # llama3.1-405b over 16 H100s (tp 16): an HGX node holds 8, so each all-reduce crosses the network on 8 rails
    args = ("--preset", "llama3.1-405b", "--gpus", "16", "--batch", "8", "--seq", "1024", "--weights-dtype", "fp8")
    two_nodes = cli_json("latency", *args, "--gpu", "h100-sxm")
    one_domain = cli_json("latency", *args, "--gpu", str(gpu_file(tmp_path, gpus_per_node=16)))
    h100 = load_gpu("h100-sxm")
    ratio = h100.interconnect_gbs / (8 * h100.network_gbs)  # NVLink one way over 8 NICs one way
    for a, b in zip(two_nodes["phases"], one_domain["phases"]):
        assert a["comm_s"] == pytest.approx(ratio * b["comm_s"], rel=1e-12) and a["comm_s"] > 0
        assert a["compute_s"] == b["compute_s"] and a["memory_s"] == b["memory_s"]


def test_every_preset_prices_a_gpu_hour_positively_or_not_at_all():
    """price_per_hour is USD per GPU-hour, on-demand; a preset without a public price leaves it out (None)."""
    prices = {name: load_gpu(name).price_per_hour for name in gpu_names()}
    assert all(p is None or p > 0 for p in prices.values()), prices
    assert prices["h100-sxm"] is not None and H100["price_per_hour"] == prices["h100-sxm"]
    priced = [name for name, p in prices.items() if p is not None]
    for name in priced:  # each priced preset names where the price comes from, in its comments
        assert "# price_per_hour:" in (GPU_DIR / f"{name}.yaml").read_text(), name


def test_a_gpu_file_without_a_price_has_none(tmp_path):
    old = {k: v for k, v in H100.items() if k != "price_per_hour"}
    f = tmp_path / "old.yaml"
    f.write_text(yaml.safe_dump(old))
    assert load_gpu(str(f)).price_per_hour is None


@pytest.mark.parametrize("price", [-1, 0])
def test_a_price_that_is_not_positive_names_the_field(tmp_path, price):
    with pytest.raises(UserError) as e:
        load_gpu(str(gpu_file(tmp_path, price_per_hour=price)))
    message = str(e.value)
    assert "\n" not in message and "price_per_hour" in message and "positive" in message, message


def test_gpus_lists_the_price_in_its_json_and_table(cli, cli_json):
    rows = {r["name"]: r for r in cli_json("gpus")}
    assert rows["h100-sxm"]["price_per_hour"] == load_gpu("h100-sxm").price_per_hour
    assert rows["h20"]["price_per_hour"] is None
    assert cli_json("gpus", "h100-sxm")["price_per_hour"] == load_gpu("h100-sxm").price_per_hour
    assert "USD/h" in cli("gpus").stdout


def test_latency_says_which_tier_each_collective_crosses_and_that_tp_over_nodes_crosses_them():
    """Tensor parallelism over 16 H100s (8 per node) once crossed nodes without a word. The note names each
    collective's tier and its one-way bytes/s, as collective_link costs it."""
    h100 = load_gpu("h100-sxm")
    wide = latency(load_preset("llama3-8b"), h100, Workload(batch=1, seq=128, gen=2, layout=Layout(tp=16)))
    note, = [n for n in wide.notes if "each way" in n]
    tier = collective_link("comm/tp_all_reduce", Layout(tp=16), h100)
    assert f"tensor-parallel all-reduce over the network ({tier.bytes_per_s / 1e9:,.0f} GB/s each way)" in note
    assert "crosses nodes" in note and "`tp` ≤ 8" in note
    staged = latency(load_preset("llama3-8b"), h100, Workload(batch=1, seq=128, gen=2, layout=Layout(tp=8, pp=2)))
    note, = [n for n in staged.notes if "each way" in n]
    assert "tensor-parallel all-reduce over NVLink" in note and "pipeline send over the network" in note
    assert "crosses nodes" not in note
    inside = latency(load_preset("llama3-8b"), h100, Workload(batch=1, seq=128, gen=2, layout=Layout(tp=8)))
    assert not [n for n in inside.notes if "each way" in n]


def test_a_price_is_shown_to_the_cent_and_kept_exact_in_json():
    """a10g's 1.006 USD/h printed as 1.006 beside prices to the cent."""
    env = dict(os.environ, COLUMNS="80", TERM="dumb")

    def run(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, env=env,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout

    row = next(x for x in run("gpus").splitlines() if x.startswith("a10g "))
    assert row.split()[-1] == "1.01"
    assert "price: 1.01 USD per GPU-hour" in run("gpus", "a10g")
    assert json.loads(run("gpus", "a10g", "-f", "json"))["price_per_hour"] == 1.006


def test_gpus_name_as_yaml_is_a_gpu_file_that_loads_back_as_the_same_gpu(tmp_path, cli):
    """`gpus NAME -f yaml` once wrote the report (memory_bytes, ridge_point: fields a GPU file refuses) and left out
    the node and network tiers; it is now the GPU file itself, every preset loading back field for field."""
    from llmcalc.render.formats import gpu_document
    from llmcalc.views.gpus import gpu_detail

    for name in gpu_names():
        path = tmp_path / f"{name}.yaml"
        path.write_text(gpu_document(gpu_detail(load_gpu(name))), encoding="utf-8")
        assert load_gpu(str(path)) == load_gpu(name), name
    r = cli("gpus", "h100-sxm", "-f", "yaml")
    assert r.returncode == 0 and r.stdout.startswith("# h100-sxm: 85,899,345,920 bytes"), r.stderr
    copy = tmp_path / "copy.yaml"
    copy.write_text(r.stdout, encoding="utf-8")
    assert cli("latency", "-p", "llama3-8b", "--gpu", str(copy), "-f", "json").stdout == \
        cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "-f", "json").stdout


def test_gpus_name_shows_the_node_and_network_tiers(cli, cli_json):
    """The tiers every multi-node figure depends on (gpus_per_node, network_gbs, each tier's latency) are in the
    report and its table, as the preset states them; a GPU with no network says how collectives are then costed."""
    h100 = load_gpu("h100-sxm")
    g = cli_json("gpus", "h100-sxm")
    assert (g["gpus_per_node"], g["network_bytes_per_s"]) == (h100.gpus_per_node, h100.network_gbs * 1e9)
    assert g["interconnect_latency_s"] == pytest.approx(h100.interconnect_latency_us * 1e-6)
    assert g["network_latency_s"] == pytest.approx(h100.network_latency_us * 1e-6)
    assert g["spec"]["memory_gib"] == h100.memory_gib and "memory_bytes" not in g["spec"]
    text = " ".join(cli("gpus", "h100-sxm").stdout.split())
    assert f"{h100.gpus_per_node} GPUs per node" in text and "network: 100.0 GB/s per GPU" in text
    assert "network: not stated" in " ".join(cli("gpus", "l40s").stdout.split())
