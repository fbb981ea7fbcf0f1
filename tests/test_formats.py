"""Weight formats (llmcalc/model/formats.py) against independent sources: the published sizes of 19 real checkpoints
(tests/fixtures/checkpoint_sizes.yaml; their config.json files stay in ../shared/checkpoint-configs/ beside the
checkout, and the tests that read them skip without it), ggml's block sizes (the gguf package), bitsandbytes' own
state dicts, and the tensor shapes the quantisers document."""

import json
from pathlib import Path

import pytest
import yaml

from llmcalc.costs.checkpoint import checkpoint_bytes
from llmcalc.costs.memory import memory
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.model.formats import FORMATS, WeightFormats, weight_format
from llmcalc.workload import Workload

SIZES = yaml.safe_load((Path(__file__).parent / "fixtures" / "checkpoint_sizes.yaml").read_text())
HEADER_SHARE = 2.5e-5
"""A safetensors file's header (8 bytes and a JSON entry of ~100–130 bytes per tensor) is 2.0e-5 or less of the
files measured here (docs/formats.md); a file size may exceed the tensors' bytes by that much, never less."""


@pytest.fixture
def checkpoints(shared):
    """../shared/checkpoint-configs/: the published checkpoints' config.json files (the test skips without it)."""
    return shared("checkpoint-configs")


@pytest.mark.parametrize("name", [n for n, s in SIZES.items() if "unsupported" not in s])
def test_checkpoint_bytes_match_the_published_size(name, checkpoints):
    published = SIZES[name]
    ours, _ = checkpoint_bytes(load_hf_config(checkpoints / f"{name}.json"))
    if published["kind"] == "total_size":  # the tensors' bytes: exact
        assert ours == published["bytes"]
    elif name.endswith("GPTQ__main"):  # docs/formats.md: 2.65 MB beyond its header that no layout explains
        assert 0 < published["bytes"] - ours < 2e-4 * ours
    else:  # a file size: the tensors plus the headers
        assert 0 < published["bytes"] - ours <= HEADER_SHARE * published["bytes"]


def test_every_fixture_has_a_published_size(checkpoints):
    assert {p.stem for p in checkpoints.glob("*.json")} == set(SIZES)


def test_gguf_block_sizes_are_ggmls():
    gguf = pytest.importorskip("gguf")
    sizes = {t.name.lower(): v for t, v in gguf.GGML_QUANT_SIZES.items()}
    ggml = [f for f in FORMATS.values() if f.source.startswith("ggml")] + [FORMATS["mxfp4"]]
    assert len(ggml) >= 20
    for f in ggml:
        block, type_size = sizes[f.name]
        assert (f.group, f.matrix_bytes(block, 1)) == (block, type_size), f.name
        assert f.matrix_bytes(block * 3 + 1, 5) == 5 * 4 * type_size  # a partial block is stored whole


@pytest.mark.parametrize("d_in,d_out", [(300, 70), (4096, 1024), (130, 3)])
@pytest.mark.parametrize("quant_type,double", [("nf4", False), ("nf4", True), ("fp4", False), ("fp4", True)])
def test_bitsandbytes_4bit_state_dict_bytes(d_in, d_out, quant_type, double):
    torch = pytest.importorskip("torch")
    bnb = pytest.importorskip("bitsandbytes")
    weight = bnb.nn.Params4bit(torch.randn(d_out, d_in, dtype=torch.bfloat16), requires_grad=False,
                               compress_statistics=double, quant_type=quant_type)._quantize("cpu")
    layer = bnb.nn.Linear4bit(d_in, d_out, bias=False, compress_statistics=double, quant_type=quant_type)
    layer.weight = weight
    state = layer.state_dict()
    stored = sum(t.numel() * t.element_size() for t in state.values())
    if double:  # the nested offset, a float in the JSON quant_state, is counted as 18 characters: put its own back
        packed = next(t for k, t in state.items() if "quant_state" in k)
        offset = json.loads(bytes(packed.tolist()))["nested_offset"]
        stored += 18 - len(json.dumps(offset))
    name = ("nf4" if quant_type == "nf4" else "bnb-fp4") + ("-dq" if double else "")
    assert stored == weight_format(name).matrix_bytes(d_in, d_out, "bf16")


def test_bitsandbytes_int8_state_dict_bytes():
    torch = pytest.importorskip("torch")
    bnb = pytest.importorskip("bitsandbytes")
    layer = bnb.nn.Linear8bitLt(300, 70, bias=False, has_fp16_weights=False)
    layer.weight = bnb.nn.Int8Params(torch.randn(70, 300, dtype=torch.float16), requires_grad=False,
                                     has_fp16_weights=False)
    layer.weight = layer.weight._quantize("cpu") if hasattr(layer.weight, "_quantize") else layer.weight
    stored = sum(t.numel() * t.element_size() for t in layer.state_dict().values())
    assert stored == weight_format("bnb-int8").matrix_bytes(300, 70)


def test_gptq_and_awq_buffers_as_their_layouts_give_them():
    """AutoGPTQ QuantLinear: qweight int32 (d_in·bits/32, d_out), qzeros int32 (groups, d_out·bits/32), scales fp16
    (groups, d_out), g_idx int32 (d_in), bias fp16 (d_out). AutoAWQ GEMM: qweight int32 (d_in, d_out/8), qzeros
    int32 (groups, d_out/8), scales fp16 (groups, d_out)."""
    d_in, d_out = 17920, 6656
    for bits, g in ((4, 128), (3, 128), (8, 32), (4, None)):
        groups = d_in // g if g else 1
        by_hand = 4 * d_in * bits // 32 * d_out + 4 * groups * d_out * bits // 32 + 2 * groups * d_out
        by_hand += 4 * d_in + 2 * d_out
        assert weight_format(f"gptq-int{bits}-g{g or 'row'}").matrix_bytes(d_in, d_out) == by_hand
    groups = d_in // 128
    awq = 4 * d_in * d_out // 8 + 4 * groups * d_out // 8 + 2 * groups * d_out
    assert weight_format("awq-int4").matrix_bytes(d_in, d_out) == awq


def test_block_scaled_formats_count_partial_blocks_whole():
    """DeepSeek-V3 kv_a_proj 7168 → 576: weight_scale_inv is ⌈576/128⌉ × ⌈7168/128⌉ = 5 × 56 fp32."""
    assert weight_format("fp8-block").matrix_bytes(7168, 576) == 7168 * 576 + 4 * 5 * 56
    assert weight_format("nvfp4").matrix_bytes(40, 3) == 3 * (3 * 8 + 3) + 8  # 40 inputs: 3 blocks of 16
    assert weight_format("mxfp4").matrix_bytes(2880, 5760) == 5760 * 90 * 17  # gpt-oss: 90 blocks of 16 + 1 bytes


def test_hf_quantization_config_is_read_with_what_it_keeps(checkpoints):
    oss = load_hf_config(checkpoints / "openai__gpt-oss-20b.json").checkpoint
    assert oss.formats.of("ffn/experts").name == "mxfp4" and oss.formats.of("attention/q").name == "bf16"
    assert "model.layers.*.self_attn" in oss.kept and "lm_head" in oss.kept
    r1 = load_hf_config(checkpoints / "deepseek-ai__DeepSeek-R1.json").checkpoint
    assert r1.formats.of("ffn/experts").name == "fp8-block" and r1.formats.of("ffn/router").name == "bf16"
    assert r1.formats.of("embedding").name == "bf16" and r1.mtp_copies
    gptq = load_hf_config(checkpoints / "TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ__gptq-3bit--1g_actorder_True.json")
    assert gptq.checkpoint.formats.of("attention/q").name == "gptq-int3-grow"
    assert gptq.checkpoint.formats.dense == "fp16" and gptq.checkpoint.rotary_buffers


def test_memory_follows_the_checkpoint_formats_unless_told_otherwise(checkpoints):
    spec = load_hf_config(checkpoints / "openai__gpt-oss-20b.json")
    shipped = memory(spec, Workload(batch=1, seq=128)).weights_bytes
    assert shipped == checkpoint_bytes(spec)[0]  # the checkpoint's formats, no MTP or buffers here
    bf16 = memory(spec, Workload(batch=1, seq=128, weights_dtype="bf16")).weights_bytes
    assert bf16 == 2 * 20_914_757_184  # every parameter in bf16 (transformers' count of gpt-oss-20b)
    told = Workload(batch=1, seq=128, weights_format=WeightFormats.parse("experts=mxfp4"))
    assert memory(load_preset("gpt-oss-20b"), told).weights_bytes == shipped


def test_weights_dtype_int4_is_the_int4_format():
    spec = load_preset("llama2-7b")
    legacy = memory(spec, Workload(batch=1, seq=1, weights_dtype="int4", group_size=64)).weights_bytes
    told = Workload(batch=1, seq=1, weights_format=WeightFormats.parse("int4-g64,embedding=bf16,head=bf16"))
    assert memory(spec, told).weights_bytes == legacy


def test_a_checkpoint_and_a_weights_format_dump_and_load_back():
    """A spec's checkpoint and a workload's weights format are validated only when given (Deferred,
    llmcalc/model/base.py); in a fresh process, where nothing built their classes before, both dump their own
    fields and load back equal."""
    import subprocess
    import sys

    code = """import json
from llmcalc.inputs.presets import load_preset, spec_from_data
from llmcalc.workload import Workload
checkpoint = {"formats": {"default": "fp8-block"}, "kept": ["lm_head"]}
spec = spec_from_data(load_preset("llama2-7b").model_dump() | {"checkpoint": checkpoint}, "test")
work = Workload(weights_format={"default": "int4-g64", "components": {"head": "bf16"}})
again = (spec_from_data(spec.model_dump(mode="json"), "again"),
         Workload(weights_format=work.model_dump()["weights_format"]))
print(json.dumps([spec.model_dump(mode="json")["checkpoint"], work.model_dump(mode="json")["weights_format"],
                  again == (spec, work), type(spec.checkpoint).__name__, type(work.weights_format).__name__]))"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [
        {"formats": {"default": "fp8-block", "components": {}, "dense": "bf16"}, "rotary_buffers": False,
         "router_buffers": False, "mtp_copies": False, "kept": ["lm_head"], "kv_dtype": None, "kv_quantizer": None,
         "index_total_size": None},
        {"default": "int4-g64", "components": {"head": "bf16"}, "dense": "bf16"}, True, "Checkpoint", "WeightFormats"]


@pytest.mark.parametrize("args,words", [
    (["--weights-format", "experts=mxfp5"], ["--weights-format", "mxfp5"]),
    (["--weights-format", "expert=mxfp4"], ["--weights-format", "expert"]),
    (["--weights-format", "bf16-g64"], ["--weights-format", "no group"]),
])
def test_bad_formats_are_one_line_errors(cli, args, words):
    r = cli("memory", "-p", "gpt-oss-20b", *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert all(w in r.stderr for w in words)


def test_params_bytes_json(cli_json, checkpoints):
    out = cli_json("params", "--hf-config", str(checkpoints / "openai__gpt-oss-20b.json"), "--bytes")
    assert out["checkpoint_bytes"] == 13_761_264_768 and "mxfp4" in out["checkpoint_formats"]


def test_params_bytes_of_a_preset_json_and_table(cli_json, cli):
    assert cli_json("params", "-p", "llama2-7b")["checkpoint_bytes"] is None
    table = cli("params", "-p", "llama2-7b", "--bytes").stdout
    assert "checkpoint as shipped" in table and "13,476,831,232" in table


def test_compute_follows_the_format_where_the_gpu_has_the_unit(cli_json):
    args = ("latency", "-p", "gpt-oss-20b", "--batch", "64", "--seq", "2048", "--weights-format", "experts=mxfp4")
    b200 = cli_json(*args, "--gpu", "b200")
    assert any("ffn/experts in fp4" in n for n in b200["notes"])
    bf16 = cli_json(*args, "--gpu", "b200", "--compute-dtype", "bf16")
    assert b200["ttft_s"] < bf16["ttft_s"]  # the experts' matmuls at the fp4 peak
    h100 = cli_json(*args, "--gpu", "h100-sxm")  # no fp4 unit: dequantised to bf16, as with --compute-dtype bf16
    assert not any("in fp4" in n for n in h100["notes"]) and any("experts dequantized" in n for n in h100["notes"])
    assert not any("dequantized" in n for n in b200["notes"])
    assert h100["ttft_s"] == cli_json(*args, "--gpu", "h100-sxm", "--compute-dtype", "bf16")["ttft_s"]


def test_an_unquantised_checkpoint_runs_in_the_weights_dtype(hf_fixture):
    """gemma2-9b's config.json says float32: its checkpoint is counted so, but memory sizes it in bf16 (the
    default weights dtype) as serving runs it; only a quantised checkpoint's formats apply unasked."""
    spec = load_hf_config(hf_fixture("gemma2-9b") / "config.json")
    n = 9_241_705_984  # transformers' parameter count of Gemma-2-9B
    assert checkpoint_bytes(spec)[0] == 4 * n
    assert memory(spec, Workload(batch=1, seq=128)).weights_bytes == 2 * n


def gptq_llama(tmp_path) -> Path:
    """llama3-8b's config.json with a GPTQ quantization_config: its formats name the router and the MTP module, as
    every GPTQ checkpoint's do, though a dense LLaMA has neither."""
    from hf_counts import fixture_config

    config = fixture_config("llama3-8b") | {"quantization_config": {"quant_method": "gptq", "bits": 4,
                                                                   "group_size": 128}}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path / "config.json"


def test_the_formats_label_names_only_the_components_the_model_has(tmp_path, cli_json):
    spec = load_hf_config(gptq_llama(tmp_path))
    assert {"mtp", "router"} <= set(spec.checkpoint.formats.components)  # the checkpoint's formats name them
    how = next(r.note for r in memory(spec, Workload(batch=1, seq=128)).breakdown if r.component == "weights")
    assert how == "gptq-int4-g128; embedding, head, norms bf16"
    assert checkpoint_bytes(spec)[1] == "gptq-int4-g128; embedding, head, norms bf16"
    out = cli_json("latency", "--hf-config", str(tmp_path), "--gpu", "h100-sxm")
    assert out["weights_dtype"] == "gptq-int4-g128; embedding, head, norms bf16"
    assert WeightFormats.parse("int4,router=bf16,mtp=bf16").label_for({"attention", "ffn"}) == "int4"


def test_a_formats_label_reads_apart_from_the_sentence(cli):
    """The label's `; ` and commas once ran into the sentence: 'needs 72.7 GB of fp8; embedding, head, norms bf16
    weights per GPU'."""
    r = cli("latency", "-p", "llama3.1-70b", "--gpu", "l4", "--weights-dtype", "fp8")
    assert r.returncode == 2
    assert "GB of weights per GPU (fp8; embedding, head, norms bf16) with" in r.stderr
    table = cli("latency", "-p", "llama2-7b", "--gpu", "l4", "--weights-dtype", "fp8").stdout
    assert "(fp8 weights (embedding, head, norms bf16), bf16 KV, bf16 matmuls)" in " ".join(table.split())
    r = cli("memory", "-p", "llama2-7b", "--train", "--weights-dtype", "fp8")
    assert "training quantised weights (fp8; embedding, head, norms bf16) is not modelled" in r.stderr


@pytest.mark.parametrize("args, says", [
    (["latency", "-p", "llama2-7b", "--gpu", "h100-sxm", "--weights-format", "bf16", "--weights-dtype", "fp8"],
     "--weights-dtype gives every weight one dtype"),
    (["memory", "-p", "llama2-7b", "--weights-format", "bf16", "--group-size", "64"],
     "a format names its own group (gptq-int4-g64), so leave it out beside --weights-format")])
def test_a_dtype_beside_a_format_is_refused_not_dropped(args, says):
    """`--weights-format bf16 --weights-dtype fp8` answered for bf16, the dtype dropped unread; with `--group-size`
    the error asked for the `--weights-dtype int4` already given."""
    from conftest import run_cli

    r = run_cli(*args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
