"""Where input enters: a config.json's fields and its quantization_config, --weights-format, GPU files and time-model
profiles, each refused in one line naming the field (exit 2), never a traceback, never sized as something else.
Every case runs the CLI as a user would (a separate process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from hf_counts import fixture_config, write_fixture

ROOT = Path(__file__).resolve().parents[1]


def refused(r, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def strict(text: str):
    """JSON as the CLI must write it: no NaN or Infinity."""
    def refuse(token):
        raise AssertionError(f"{token} in the output")
    return json.loads(text, parse_constant=refuse)


def hf(name: str) -> dict:
    """A model's config.json as tests/fixtures/hf_architectures.yaml records it."""
    return fixture_config(name)


def write(tmp_path: Path, config: dict | str) -> str:
    path = tmp_path / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return str(path)


# ---- config.json ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_hf_non_finite_number_is_refused_naming_the_field(tmp_path, literal):
    text = json.dumps(hf("jamba-v0.1"))
    assert '"mamba_expand": 2' in text
    path = write(tmp_path, text.replace('"mamba_expand": 2', f'"mamba_expand": {literal}'))
    refused(run_cli("params", "--hf-config", path), "mamba_expand", "not a finite number")


def test_hf_infinity_in_a_field_not_read_is_kept(tmp_path):
    """Mamba-Codestral's config.json holds "time_step_limit": [0.0, Infinity], as transformers writes it."""
    folder = write_fixture("mamba-codestral-7b", tmp_path)
    assert "Infinity" in (folder / "config.json").read_text()
    r = run_cli("params", "--hf-config", str(folder), "-f", "json")
    assert r.returncode == 0, r.stderr
    assert strict(r.stdout)["total"] > 0


WRONG_TYPES = [
    ("llama-3.2-11b-vision", {"vision_config": [1, 2]}, ["vision_config", "JSON object"]),
    ("llava-1.5-7b", {"vision_config": "clip"}, ["vision_config", "JSON object"]),
    ("gemma3-4b", {"text_config": [1]}, ["text_config", "JSON object"]),
    ("gemma3-4b", {"text_config": "gemma"}, ["text_config", "JSON object"]),
    ("llama3-8b", {"quantization_config": "yes"}, ["quantization_config", "JSON object"]),
    ("llama3-8b", {"quantization_config": [1, 2]}, ["quantization_config", "JSON object"]),
    ("gpt-oss-20b", {"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": 5}},
     ["quantization_config.modules_to_not_convert", "list"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}},
     ["quantization_config.group_size", "-1"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -2}},
     ["quantization_config.group_size"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 2**30}},
     ["quantization_config.group_size", "1,048,576"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "gptq", "bits": 5, "group_size": 128}},
     ["quantization_config.bits", "2, 3, 4 or 8"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": "maybe"}},
     ["quantization_config.load_in_4bit", "true or false"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": 1}},
     ["quantization_config.load_in_8bit", "true or false"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                           "load_in_8bit": True}}, ["load_in_4bit and load_in_8bit", "both"]),
    ("llama3-8b", {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": [1]}}},
     ["quantization_config.config_groups.g", "JSON object"]),
    ("llama3-8b", {"tie_word_embeddings": "no"}, ["tie_word_embeddings", "true or false"]),
    ("jamba-v0.1", {"mamba_expand": "2"}, ["mamba_expand", "number > 0"]),
    ("jamba-v0.1", {"mamba_d_state": [16]}, ["mamba_d_state", "whole number"]),
    ("falcon-h1-7b", {"mamba_n_heads": "128"}, ["mamba_n_heads", "whole number > 0"]),
    ("qwen3-next-80b-a3b", {"full_attention_interval": 0}, ["full_attention_interval", "> 0"]),
    ("qwen2.5-vl-7b", {"vision_config": {"fullatt_block_indexes": None}}, ["vision_config.fullatt_block_indexes"]),
    ("llama-3.2-11b-vision", {"vision_config": {"image_size": "560"}}, ["vision_config.image_size"]),
]


@pytest.mark.parametrize("name, change, needles", WRONG_TYPES, ids=[f"{n}-{next(iter(c))}" for n, c, _ in WRONG_TYPES])
def test_hf_wrong_type_is_one_line_naming_the_field(tmp_path, name, change, needles):
    config = hf(name)
    for key, value in change.items():
        config[key] = config[key] | value if isinstance(value, dict) and isinstance(config.get(key), dict) else value
    refused(run_cli("params", "--hf-config", write(tmp_path, config), "--bytes"), *needles)


def test_hf_nested_text_config_field_is_named_by_its_path(tmp_path):
    config = hf("gemma3-4b")
    config["text_config"]["hidden_size"] = "2560"
    line = refused(run_cli("params", "--hf-config", write(tmp_path, config)), "text_config.hidden_size")
    assert "vision_use_head" not in line


def test_hf_long_key_is_cut_in_the_message(tmp_path):
    line = refused(run_cli("params", "--hf-config", write(tmp_path, '{"model_type": "llama", "' + "k" * 5000 +
                                                                   '": NaN}')), "not a finite number")
    assert len(line) < 300


def test_hf_gptq_per_channel_group_is_kept(tmp_path):
    """GPTQ's group_size -1 is one group per output row in transformers: sized, as gptq-int4-grow."""
    config = hf("llama3-8b") | {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}}
    r = run_cli("params", "--hf-config", write(tmp_path, config), "--bytes", "-f", "json")
    assert r.returncode == 0, r.stderr
    assert "gptq-int4-grow" in strict(r.stdout)["checkpoint_formats"]


# ---- --weights-format -----------------------------------------------------------------------------------------

def weights_bytes(*args: str) -> int:
    r = run_cli("memory", "-p", "llama3-8b", *args, "-f", "json")
    assert r.returncode == 0, r.stderr
    return strict(r.stdout)["weights_bytes"]


@pytest.mark.parametrize("fmt", ["int4-g0", "gptq-int4-g0", "gptq-int4-g" + "9" * 5000, "int4-g" + "1" * 8,
                                 "nf4-g00", f"int4-g{2**20 + 1}"], ids=lambda fmt: fmt[:24])
def test_weights_format_group_out_of_range_is_refused(fmt):
    refused(run_cli("memory", "-p", "llama3-8b", "--weights-format", fmt), "--weights-format", "weights per group",
            "-grow")


@pytest.mark.parametrize("fmt", ["mxfp4-grow", "q4_k-g64", "nvfp4-g32", "iq2_xs-grow"])
def test_block_format_keeps_its_block(fmt):
    """GGUF, MX and NVFP4 store blocks of a size their layout fixes: no other group, no group per row."""
    refused(run_cli("memory", "-p", "llama3-8b", "--weights-format", fmt), "--weights-format", "fixed blocks")


def test_weights_format_largest_group_is_sized():
    """The bound (2^20 weights per group) is wider than any row: a group that wide is one scale per row."""
    assert weights_bytes("--weights-format", f"int4-g{2**20}") == weights_bytes("--weights-format", "int4-grow")
    assert weights_bytes("--weights-format", "int4-g128") < weights_bytes("--weights-format", "bf16")


def test_group_size_option_is_bounded():
    refused(run_cli("memory", "-p", "llama3-8b", "--weights-dtype", "int4", "--group-size", str(2**20 + 1)),
            "--group-size", "1,048,576")


def test_weights_format_component_the_model_lacks_is_refused():
    line = refused(run_cli("memory", "-p", "llama3-8b", "--weights-format", "experts=mxfp4"), "--weights-format",
                   "no experts", "attention", "ffn")
    assert "router" not in line  # the components it has, not every component
    r = run_cli("memory", "-p", "mixtral-8x7b", "--weights-format", "experts=mxfp4", "-f", "json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("fmt, near", [("awq", "awq-int4-g128"), ("mxfp5", "mxfp4"), ("fp8-blok", "fp8-block"),
                                       ("q4", "q4_k")])
def test_unknown_weights_format_suggests_the_close_ones(fmt, near):
    line = refused(run_cli("memory", "-p", "llama3-8b", "--weights-format", fmt), "--weights-format", near,
                   "docs/formats.md")
    assert "iq1_s" not in line or near.startswith("iq")  # no dump of the whole list
    assert (ROOT / "docs" / "formats.md").is_file()


# ---- GPU files, --price, calibration profiles ------------------------------------------------------------------

def gpu_file(tmp_path: Path, **changes) -> str:
    gpu = yaml.safe_load((ROOT / "presets" / "gpus" / "h100-sxm.yaml").read_text()) | {"name": "mine"}
    for dotted, value in changes.items():
        node, *path = [gpu, *dotted.split("__")]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(gpu))
    return str(path)


@pytest.mark.parametrize("field, value", [("memory_gib", float("inf")), ("memory_gib", float("nan")),
                                          ("price_per_hour", float("inf")), ("peak_tflops__bf16", float("nan")),
                                          ("memory_bandwidth_gbs", float("-inf")), ("network_latency_us", 1e400)])
def test_gpu_file_non_finite_is_refused(tmp_path, field, value):
    path = gpu_file(tmp_path, **{field: value})
    refused(run_cli("latency", "-p", "llama3-8b", "--gpu", path), "gpu file", field.replace("__", "."), "finite")


@pytest.mark.parametrize("field", ["memory_gib", "memory_bandwidth_gbs", "peak_tflops__fp16", "interconnect_gbs",
                                   "price_per_hour"])
def test_gpu_file_absurd_figure_is_refused(tmp_path, field):
    refused(run_cli("latency", "-p", "llama3-8b", "--gpu", gpu_file(tmp_path, **{field: 1e300})), "gpu file",
            field.replace("__", "."), "smaller")


def test_gpu_model_refuses_non_finite_from_any_reader():
    """The check is the model's, not only the YAML reader's: a mapping built in code is refused too, one line
    naming the field and the file."""
    from llmcalc.errors import UserError
    from llmcalc.inputs.files import validated
    from llmcalc.model.gpu import GPU

    gpu = yaml.safe_load((ROOT / "presets" / "gpus" / "h100-sxm.yaml").read_text())
    for field in ("memory_gib", "price_per_hour", "interconnect_latency_us"):
        with pytest.raises(UserError, match=f"gpu file x.yaml: {field}: .*finite"):
            validated(GPU, gpu | {field: float("inf")}, "gpu file x.yaml", "presets/gpus/h100-sxm.yaml")


@pytest.mark.parametrize("price", ["inf", "nan", "1e999", "-inf", "1e308"])
def test_plan_price_must_be_finite(price):
    refused(run_cli("plan", "-p", "llama3-8b", "--rate", "1", "--slo-ttft", "2", "--price", f"h100-sxm={price}"),
            "--price")


@pytest.mark.parametrize("price", ["inf", "nan", "1e308"])
def test_scale_price_is_bounded(price):
    refused(run_cli("scale", "--params", "8e9", "--gpu", "h100-sxm", "--price", price), "--price")


def test_plan_with_a_gpu_files_price_writes_strict_json(tmp_path):
    r = run_cli("plan", "-p", "llama3-8b", "--rate", "1", "--slo-ttft", "2", "--gpu", gpu_file(tmp_path),
                "-f", "json")
    assert r.returncode == 0, r.stderr
    strict(r.stdout)


@pytest.mark.parametrize("field, value", [("compute_efficiency", ".nan"), ("overlap", ".inf"), ("kernel_s", "-.inf"),
                                          ("matmul_pad_rows", "1.0e999")])
def test_calibration_profile_non_finite_is_refused(tmp_path, field, value):
    text = (ROOT / "presets" / "calibration" / "h100-sxm.yaml").read_text()
    lines = [f"{field}: {value}" if line.startswith(f"{field}:") else line for line in text.splitlines()]
    path = tmp_path / "profile.yaml"
    path.write_text("\n".join(lines) + "\n")
    refused(run_cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(path)),
            "calibration file", field, "finite")


def test_calibration_profile_out_of_range_names_the_file_not_a_flag(tmp_path):
    text = (ROOT / "presets" / "calibration" / "h100-sxm.yaml").read_text()
    path = tmp_path / "profile.yaml"
    path.write_text(text.replace("\ncompute_efficiency: 0.85\n", "\ncompute_efficiency: 2\n"))
    line = refused(run_cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(path)),
                   "calibration file", "compute_efficiency: 2.0 is not in (0, 1]")
    assert "--compute-efficiency" not in line
    refused(run_cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--compute-efficiency", "2"),
            "--compute-efficiency: 2.0 is not in (0, 1]")


def test_calibration_profile_comm_overlap_out_of_range_is_refused(tmp_path):
    text = (ROOT / "presets" / "calibration" / "h100-sxm.yaml").read_text()
    path = tmp_path / "profile.yaml"
    path.write_text(re.sub(r"\noverlap: ([0-9.]+)\n", r"\noverlap: \1\ncomm_overlap: 1.5\n", text, count=1))
    refused(run_cli("train", "-p", "llama3-8b", "--gpu", "h100-sxm", "--dp", "8", "--calibration", str(path)),
            "calibration file", "comm_overlap: 1.5 is not in [0, 1]")


@pytest.mark.parametrize("model", ["TimeModel", "GPU", "PeakTflops", "Workload"])
def test_every_float_of_a_model_refuses_nan(model):
    """Frozen (the base of every model) refuses NaN and ±inf in each float field, whatever builds it."""
    from pydantic import ValidationError

    from llmcalc.model.gpu import GPU, PeakTflops
    from llmcalc.model.time_model import TimeModel
    from llmcalc.workload import Workload

    cls = {"TimeModel": TimeModel, "GPU": GPU, "PeakTflops": PeakTflops, "Workload": Workload}[model]
    floats = [n for n, f in cls.model_fields.items() if f.annotation in (float, float | None)]
    assert floats
    for name in floats:
        for value in (float("nan"), float("inf")):
            with pytest.raises(ValidationError) as e:
                cls.model_validate({name: value})
            assert any(err["loc"] == (name,) and err["type"] == "finite_number" for err in e.value.errors()), name


@pytest.mark.parametrize("option", ["--compute-efficiency", "--memory-efficiency", "--reserve"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_option_into_a_model_is_one_line(option, value):
    refused(run_cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", option, value), option)


@pytest.mark.parametrize("field, value", [("d_model", ".inf"), ("n_layers", ".nan"), ("max_seq_len", "1.0e999")])
def test_spec_non_finite_is_refused(tmp_path, field, value):
    text = (ROOT / "presets" / "llama2-7b.yaml").read_text()
    path = tmp_path / "spec.yaml"
    path.write_text("\n".join(f"{field}: {value}" if ln.startswith(f"{field}:") else ln for ln in text.splitlines()))
    refused(run_cli("params", "--config", str(path)), field)


def test_spec_non_finite_float_field_is_refused(tmp_path):
    spec = yaml.safe_load((ROOT / "presets" / "mixtral-8x7b.yaml").read_text())
    spec["ffn"]["capacity_factor"] = float("inf")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    refused(run_cli("params", "--config", str(path)), "ffn.capacity_factor", "finite")


def test_a_line_break_of_any_kind_in_a_field_stays_on_one_line(tmp_path):
    """A YAML key holding a record separator or a Unicode line separator (str.splitlines breaks at both)."""
    spec = yaml.safe_load((ROOT / "presets" / "llama2-7b.yaml").read_text())
    spec["norm"] = {"a\x1eb\u2028c": float("nan")}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    refused(run_cli("params", "--config", str(path)), "norm.a")


@pytest.mark.parametrize("value, words", [(".nan", "finite"), ("2", "is not in (0, 1]")])
def test_calibration_profile_block_scaled_share_is_bounded(tmp_path, value, words):
    """A profile's own block_fp8_efficiency (a field the bundled profiles leave to the engine) is refused when not
    a finite share, in one line naming it."""
    text = (ROOT / "presets" / "calibration" / "h100-sxm.yaml").read_text()
    path = tmp_path / "profile.yaml"
    path.write_text(text + f"block_fp8_efficiency: {value}\n")
    refused(run_cli("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(path)),
            "calibration file", "block_fp8_efficiency", words)
