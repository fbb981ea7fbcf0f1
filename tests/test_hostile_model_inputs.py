"""Hostile values in the files a model, a GPU and a time model are read from, and in --weights-format (hypothesis).

A valid file (a Hugging Face config.json, a spec YAML, a GPU YAML, a calibration profile) has one field, at any depth,
replaced or added with a hostile value: NaN, ±inf or an overflowing literal (1e999), a huge, negative or zero number,
the wrong type (a bool, a string, a list or an object where a scalar belongs), an oversized string; or the file gets
bytes that are not UTF-8. Whatever comes, the CLI answers (exit 0) with strict JSON whose every number is finite, or
refuses (exit 2) with one line on stderr; never a traceback. The commands run in-process through llmcalc.cli.main,
the `llmcalc` script's entry, so a traceback is an exception here. Derandomized: the same examples every run, after
the explicit ones (@example): the hostile inputs that once broke the contract.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hf_counts import fixture_config

from llmcalc.cli import main

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "presets"
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
"""Any text a file can hold (no lone surrogates: UTF-8 cannot encode them)."""
OVERFLOW = "__overflow__"
"""Stands for 1e999 in a value: written into the file's text as the literal, which a float cannot hold."""
SCALARS = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), OVERFLOW, 0, -1, -1.5, 0.5, 10**30, -(10**30),
                     2**63, 1e300, 1e-300, True, False, None, "", "auto", "x" * 100_000]),
    st.integers(), st.floats(), TEXT)
HOSTILE = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(TEXT, SCALARS, max_size=2))
EXTRA_KEYS = ["text_config", "vision_config", "quantization_config", "mamba_expand", "expand", "group_size", "bits",
              "load_in_4bit", "load_in_8bit", "modules_to_not_convert", "layer_types", "head_dim", "sliding_window",
              "num_key_value_heads", "hidden_act", "tie_word_embeddings", "model_type", "capacity_factor", "kind"]
"""Fields a hostile file may add (at any level) besides replacing the ones it has."""


def paths(data, at=()) -> list[tuple]:
    """Every (dotted) place in `data`: its mappings' keys and its lists' items, at every depth."""
    found = []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found += [(*at, key), *paths(value, (*at, key))]
    return found


@st.composite
def mutated(draw, base: dict) -> dict:
    """`base` with one place replaced by a hostile value, or one field added to one of its mappings."""
    data = json.loads(json.dumps(base))
    places = paths(data)
    if draw(st.booleans()) or not places:
        parents = [()] + [p for p in places if isinstance(_at(data, p), dict)]
        parent = draw(st.sampled_from(parents))
        place = (*parent, draw(st.sampled_from(EXTRA_KEYS)))
    else:
        place = draw(st.sampled_from(places))
    node = _at(data, place[:-1])
    node[place[-1]] = draw(HOSTILE)
    return data


def _at(data, place: tuple):
    for key in place:
        data = data[key]
    return data


CORRUPT = st.one_of(st.none(), st.none(), st.none(), st.floats(0, 1))
"""Where in a file (a share of its length) bytes that are not UTF-8 go; None (most often): nowhere."""


def as_bytes(data: dict, kind: str, corrupt: float | None) -> bytes:
    """The file's bytes (JSON or YAML), with bytes that are not UTF-8 put in at `corrupt` of its length."""
    if kind == "json":
        text = json.dumps(data)  # NaN and Infinity as Python's json writes them
    else:
        text = yaml.safe_dump(data, allow_unicode=True)
    raw = text.replace(json.dumps(OVERFLOW), "1e999").replace(OVERFLOW, "1.0e999").encode()
    if corrupt is not None:
        at = int(corrupt * len(raw))
        raw = raw[:at] + b"\xff\xfe\xc3" + raw[at:]
    return raw


def run(*args: str) -> tuple[int, str, str]:
    """llmcalc `args` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["llmcalc", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


def refuse(token: str):
    raise AssertionError(f"{token} in the JSON output")


def check(code: int, out: str, err: str) -> None:
    """The contract: exit 0 with strict JSON, every number finite; or exit 2 with one line on stderr."""
    assert "Traceback" not in err, err
    if code == 0:
        json.loads(out, parse_constant=refuse)
        return
    assert code == 2, (code, err)
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and out == "", (out, err)


HF_BASES = {name: fixture_config(name)
            for name in ("llama3-8b", "mixtral-8x7b", "gemma3-4b", "jamba-v0.1", "gpt-oss-20b",
                         "llama-3.2-11b-vision", "qwen2.5-vl-7b", "mamba-codestral-7b")}
HF_BASES["llama3-8b-gptq"] = HF_BASES["llama3-8b"] | {"quantization_config": {
    "quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}}
HF_BASES["llama3-8b-bnb"] = HF_BASES["llama3-8b"] | {"quantization_config": {
    "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True}}


def changed(config: dict, **fields) -> dict:
    """`config` with `fields` replaced (a `quantization_config__modules_to_not_convert` one level down)."""
    config = json.loads(json.dumps(config))
    for dotted, value in fields.items():
        *parents, leaf = dotted.split("__")
        _at(config, tuple(parents))[leaf] = value
    return config


@SETTINGS
@given(st.sampled_from(sorted(HF_BASES)).flatmap(lambda name: mutated(HF_BASES[name])), CORRUPT)
@example(changed(HF_BASES["jamba-v0.1"], mamba_expand=OVERFLOW), None)
@example(changed(HF_BASES["jamba-v0.1"], mamba_expand=float("nan")), None)
@example(changed(HF_BASES["llama-3.2-11b-vision"], vision_config=[1]), None)
@example(changed(HF_BASES["gpt-oss-20b"], quantization_config__modules_to_not_convert=5), None)
def test_hostile_hf_config(tmp_path_factory, config, corrupt):
    path = tmp_path_factory.mktemp("hf") / "config.json"
    path.write_bytes(as_bytes(config, "json", corrupt))
    check(*run("params", "--hf-config", str(path), "--bytes", "-f", "json"))


SPEC_BASES = {name: yaml.safe_load((PRESETS / f"{name}.yaml").read_text())
              for name in ("llama2-7b", "mixtral-8x7b", "deepseek-v2-lite", "gemma2-9b", "jamba-v0.1")}


@SETTINGS
@given(st.sampled_from(sorted(SPEC_BASES)).flatmap(lambda name: mutated(SPEC_BASES[name])), CORRUPT)
@example(changed(SPEC_BASES["mixtral-8x7b"], ffn__capacity_factor=float("inf")), None)
@example(changed(SPEC_BASES["llama2-7b"], norm={"\x1e": float("nan")}), None)
@example(SPEC_BASES["llama2-7b"] | {"vision": {"kind": ["vit"]}}, None)  # a TypeError (unhashable) once
@example(SPEC_BASES["llama2-7b"] | {"vision": {"kind": {}}}, None)
def test_hostile_spec_yaml(tmp_path_factory, spec, corrupt):
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_bytes(as_bytes(spec, "yaml", corrupt))
    check(*run("memory", "--config", str(path), "--seq", "512", "-f", "json"))


GPU_BASE = yaml.safe_load((PRESETS / "gpus" / "h100-sxm.yaml").read_text()) | {"name": "hostile"}


@SETTINGS
@given(mutated(GPU_BASE), CORRUPT)
@example(changed(GPU_BASE, memory_gib=float("inf")), None)
@example(changed(GPU_BASE, memory_bandwidth_gbs=1e300), None)
def test_hostile_gpu_yaml(tmp_path_factory, gpu, corrupt):
    path = tmp_path_factory.mktemp("gpu") / "gpu.yaml"
    path.write_bytes(as_bytes(gpu, "yaml", corrupt))
    check(*run("latency", "-p", "llama3-8b", "--gpu", str(path), "--seq", "512", "-f", "json"))


PROFILE_BASE = yaml.safe_load((PRESETS / "calibration" / "h100-sxm.yaml").read_text())


@SETTINGS
@given(mutated(PROFILE_BASE), CORRUPT)
@example(changed(PROFILE_BASE, overlap=float("nan")), None)
def test_hostile_calibration_profile(tmp_path_factory, profile, corrupt):
    path = tmp_path_factory.mktemp("profile") / "profile.yaml"
    path.write_bytes(as_bytes(profile, "yaml", corrupt))
    check(*run("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(path), "--seq", "512",
               "-f", "json"))


FORMATS = ["int4", "gptq-int4", "gptq-int8-g128", "awq-int4-g128", "awq", "mxfp4", "nf4-dq", "q4_k", "fp8-block",
           "bf16", "fp8-row"]
COMPONENTS = ["experts", "attention", "ffn", "default", "head", "norms", "router", "shared_experts", "mtp", "expert"]
FORMAT = st.builds("{}{}".format, st.sampled_from(FORMATS), st.one_of(
    st.just(""), st.sampled_from(["-g0", "-grow", "-g-1", "-g", "-g" + "9" * 5000]),
    st.integers(-5, 2**21).map("-g{}".format), TEXT))
ITEM = st.one_of(FORMAT, st.builds("{}={}".format, st.sampled_from(COMPONENTS), FORMAT))


@SETTINGS
@given(st.one_of(st.lists(ITEM, min_size=1, max_size=4).map(",".join), TEXT),
       st.sampled_from(["llama3-8b", "mixtral-8x7b"]))
@example("gptq-int4-g" + "9" * 5000, "llama3-8b")
@example("mxfp4-grow", "mixtral-8x7b")
def test_hostile_weights_format(text, preset):
    check(*run("memory", "-p", preset, f"--weights-format={text}", "-f", "json"))


def test_a_safetensors_index_of_too_many_objects_is_refused_before_it_is_parsed(tmp_path):
    """A model folder's index (read up to 64 MiB) of a million empty objects would take gigabytes to parse."""
    from llmcalc.inputs.files import MAX_CONTAINERS

    (tmp_path / "config.json").write_text(json.dumps(HF_BASES["llama3-8b"]))
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": {}, "x": [' + "{}," * MAX_CONTAINERS
                                                           + "{}]}")
    code, out, err = run("params", "--hf-config", str(tmp_path))
    check(code, out, err)
    assert code == 2 and "model.safetensors.index.json" in err and "JSON objects and arrays" in err
