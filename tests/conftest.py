"""Shared helpers: run the CLI as a user would (a separate process) and read its output; find the files from public
repositories that stay outside the project, in ../shared/ beside the checkout."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
"""../shared/ beside the checkout root: files copied whole from public repositories (checkpoint-configs/,
model-configs-2026/, benchmark-runs/) stay there and are never committed; CI has it beside its clone, a user's own
clone usually does not, and the tests that read it then skip."""
SHARED_FOLDERS = ("checkpoint-configs", "model-configs-2026", "benchmark-runs")

CLI_TIMEOUT = 900
"""Seconds before a CLI subprocess counts as hung: a guard against a hang only, generous enough for a busy machine."""


def run_cli(*args: str, cwd: Path | None = None, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess:
    """`llmcalc ARGS` in a process of its own; a run past `timeout` seconds (a hang) fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def shared_folder(name: str) -> Path:
    """../shared/NAME/, or skip the calling test with the reason when it is not beside the checkout."""
    if name not in SHARED_FOLDERS:
        raise ValueError(f"{name}: not a folder of ../shared/ ({', '.join(SHARED_FOLDERS)})")
    folder = SHARED / name
    if not folder.is_dir():
        pytest.skip(f"../shared/{name}/ not found beside the checkout: {folder} (files from public repositories "
                    "stay outside the project; CI has them)")
    return folder


@pytest.fixture(scope="session")
def shared():
    """The one way a test reaches ../shared/: `shared("checkpoint-configs")` is that folder, or the test skips."""
    return shared_folder


@pytest.fixture(scope="session")
def hf_fixture(tmp_path_factory):
    """`hf_fixture("gpt2")`: a folder holding gpt2's config.json, written once per session from the architecture
    that tests/fixtures/hf_architectures.yaml records (tests/hf_counts.py: write_fixture); pass it as `--hf-config`
    or to load_hf_config, as the model's Hugging Face folder."""
    from hf_counts import write_fixture

    root = tmp_path_factory.mktemp("hf")
    return functools.cache(lambda name: write_fixture(name, root))


@functools.cache
def benchmark_script(path: str, name: str):
    """A script of benchmarks/ (no package) as a module, `path` relative to the checkout; registered under
    `name`, as its NamedTuples and dataclasses look their module up."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_config(parent, raw: dict, name: str = "tiny"):
    """A folder `parent`/`name` holding `raw` as its config.json, as --hf-config reads a checkpoint's folder."""
    import json

    folder = Path(parent) / name
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(raw))
    return folder


def explain_checks(report) -> list[bool]:
    """Every `matches` an explain report's JSON holds, at any depth: each total's agreement with its command."""
    if isinstance(report, dict):
        return ([report["matches"]] if "matches" in report else []) + [m for v in report.values()
                                                                        for m in explain_checks(v)]
    if isinstance(report, list):
        return [m for v in report for m in explain_checks(v)]
    return []


def assert_reference_counts(spec, batch: int = 2, seq: int = 19) -> None:
    """The reference decoder under FakeTensorMode against the estimators: parameters, prefill, decode and
    training FLOPs (dense attention, the last position's logits), cache bytes."""
    from llmcalc.costs.flops import flops
    from llmcalc.costs.kv import kv_cache
    from llmcalc.costs.params import params
    from llmcalc.reference.measure import measure
    from llmcalc.workload import Workload

    m = measure(spec, batch, seq, "fake")
    f = flops(spec, Workload(batch=batch, seq=seq, gen=1, attention_core="dense", logits="last"))
    want = dict(params_total=params(spec).language, prefill_flops=f.prefill_flops, decode_flops=f.decode_flops,
                train_flops=f.train_flops, kv_bytes=kv_cache(spec, Workload(batch=batch, seq=seq)).total_bytes)
    got = {k: getattr(m, k) for k in want}
    assert got == want, {k: (got[k], want[k], got[k] - want[k]) for k in want if got[k] != want[k]}


@contextmanager
def page_server(env: dict[str, str] | None = None):
    """`llmcalc ui` in a process of its own on a free port of 127.0.0.1 (with `env`, its whole environment), once
    it answers: yields its base URL; stopped after the block."""
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "llmcalc", "ui", "--port", str(port)], cwd=ROOT,
                               stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{base}/api/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the page's server did not start")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def settings(name: str = "reference", gpu: str = "h100-sxm", **given):
    """An engine's settings on a GPU preset (presets/engines/), `given` in place of its own. The reference
    engine's are the simulator's plain loop: decode-first, chunked prefill, 256 sequences and 8,192 tokens per
    step, 16-token blocks, 0.9 of the memory, no CUDA graphs."""
    from llmcalc.inputs.engines import load_engine
    from llmcalc.inputs.gpus import load_gpu

    return load_engine(name).settings(load_gpu(gpu), **given)


def strict_json(text: str):
    """JSON as the standard has it: NaN, Infinity and a number past a float's range (1e999) refused."""
    def refuse(name):
        raise ValueError(f"{name} in the JSON output")

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{text} overflows a float")
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def cli_json():
    def call(*args: str):
        r = run_cli(*args, "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    return call


SLOW_MODULES = {
    # the torch reference model or transformers' models, built and run (on fake tensors or a CPU)
    "test_validate", "test_flop_counter", "test_reference", "test_hybrid_reference", "test_vision",
    "test_bucketed_bias", "test_reference_encoders", "test_sparse_attention", "test_transformers_parity",
    "test_encoder_decoder_costs", "test_encoder_decoder_time", "test_cross_attention_reference",
    "test_gpu_validation", "test_calibrate", "test_reference_engine", "test_reference_training", "test_hf_2026_text",
    "test_hf_2026_multimodal", "test_hf_llama4", "test_hf_internvl", "test_hf_minimax", "test_hf_longcat",
    "test_hf_gemma3n",
    # hundreds of CLI processes: the examples of every page, the bad-input catalogue, exit codes, packaging
    "test_readme", "test_bad_input", "test_exit_codes", "test_imports_and_packaging", "test_properties",
    "test_input_boundaries", "test_hostile_model_inputs", "test_schema", "test_terminal", "test_run",
    "test_python_api",
    # a Hub on 127.0.0.1 and forty CLI processes, two of them waiting out an unreachable Hub's retries
    "test_hub",
    # a headless Chromium driving the page, a dozen views each checked against a CLI process
    "test_ui_browser",
    # a hundred serving simulations of the published runs
    "test_serving_published",
}
"""Modules whose tests are `slow`: the inner loop (`pytest -m "not slow"`) leaves them to CI and the full run."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rpartition(".")[2] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
