"""GPU link tiers: the interconnect within a node, the network between nodes, and how a GPU file states them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmcalc.errors import UserError
from llmcalc.inputs.gpus import GPU_DIR, gpu_names, load_gpu
from llmcalc.model.gpu import Link

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
