"""`--hf-model ORG/NAME[@REVISION]`: a model's files fetched through huggingface_hub, from a Hub served on
127.0.0.1 by this module (no test touches the network), then read as a local folder.

The server answers the two requests huggingface_hub 2.x's hf_hub_download makes (huggingface_hub
file_download.py `get_hf_file_metadata` and `http_get`; utils/_http.py `hf_raise_for_status`): HEAD and GET of
`/{org}/{name}/resolve/{revision}/{filename}`, with `X-Repo-Commit`, `ETag` and `Content-Length`, and the Hub's
errors as that client reads them: 404 with `X-Error-Code: RepoNotFound`, `RevisionNotFound` or `EntryNotFound`,
401 / 403 with `GatedRepo`.
"""

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from llmcalc.errors import UserError

from conftest import CLI_TIMEOUT, page_server

pytest.importorskip("huggingface_hub")

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_testtoken0123456789"
"""The token that opens the gated repositories of the test Hub."""
SIZES = yaml.safe_load((Path(__file__).parent / "fixtures" / "checkpoint_sizes.yaml").read_text())


class Hub:
    """Repositories served: {"org/name": {filename: bytes}}; `gated` repositories answer 403 GatedRepo to a
    request without TOKEN."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.gated: set[str] = set()
        self.requests: list[str] = []


def _handler(hub: Hub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _answer(self, body: bool) -> None:
            hub.requests.append(f"{self.command} {self.path}")
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return self._error(404, "RepoNotFound", body)
            repo, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            if repo not in hub.repos:
                return self._error(401, "RepoNotFound", body)  # the Hub answers 401 for a missing repository
            if repo in hub.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._error(403, "GatedRepo", body)
            if revision not in ("main", COMMIT):
                return self._error(404, "RevisionNotFound", body)
            files = hub.repos[repo]
            if filename not in files:
                return self._error(404, "EntryNotFound", body)
            data = files[filename]
            self.send_response(200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _error(self, status: int, code: str, body: bool) -> None:
            text = json.dumps({"error": code}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            if code == "EntryNotFound":  # the client caches the file's absence under the commit
                self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            if body:
                self.wfile.write(text)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(True)

    return Handler


@pytest.fixture(scope="module")
def hub():
    """A Hub on 127.0.0.1 at a free port: (its state, its URL)."""
    state = Hub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run(*args: str, endpoint: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    """`llmcalc ARGS` in its own process, its Hub at `endpoint` and its cache under `home`; no token, online."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k != "TRANSFORMERS_OFFLINE"}
    clean |= {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1",
              "HF_HUB_DISABLE_XET": "1", "PYTHONPATH": str(Path(__file__).parents[1])} | env
    return subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, env=clean,
                          timeout=CLI_TIMEOUT)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    """The one line a refused command prints (exit 2, no traceback, nothing on stdout)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def serve_folder(hub, repo: str, folder: Path) -> None:
    hub.repos[repo] = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize("name", ["llama3-8b", "qwen3-30b-a3b", "gemma3-4b", "deepseek-v3"])
def test_hub_model_counts_equal_the_same_folder(name, hub, hf_fixture, tmp_path):
    state, url = hub
    folder = hf_fixture(name)
    serve_folder(state, f"test-org/{name}", folder)
    for command in (["params", "--bytes"], ["kv", "--seq", "8k", "--batch", "2"]):
        local = run(*command, "--hf-config", str(folder), "-f", "json", endpoint=url, home=tmp_path)
        remote = run(*command, "--hf-model", f"test-org/{name}", "-f", "json", endpoint=url, home=tmp_path)
        assert local.returncode == remote.returncode == 0, remote.stderr
        a, b = json.loads(local.stdout), json.loads(remote.stdout)
        a.pop("model"), b.pop("model")  # the folder's name and the repository's: the same here
        assert a == b
    assert json.loads(remote.stdout)["total_bytes"] > 0


@pytest.fixture
def published(shared, tmp_path):
    """gpt-oss-20b's config.json (../shared/checkpoint-configs) beside a model.safetensors.index.json whose
    metadata.total_size is the repository's published figure (tests/fixtures/checkpoint_sizes.yaml)."""
    name = "openai__gpt-oss-20b"
    folder = tmp_path / "gpt-oss-20b"
    folder.mkdir()
    (folder / "config.json").write_bytes((shared("checkpoint-configs") / f"{name}.json").read_bytes())
    size = SIZES[name]
    assert size["kind"] == "total_size"
    index = {"metadata": {"total_size": size["bytes"]}, "weight_map": {"lm_head.weight": "model-00001.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder, size["bytes"]


def test_index_total_size_is_shown_beside_the_checkpoint_bytes(hub, published, tmp_path):
    state, url = hub
    folder, total = published
    serve_folder(state, "openai-test/gpt-oss-20b", folder)
    for model in (["--hf-config", str(folder)], ["--hf-model", "openai-test/gpt-oss-20b"]):
        r = run("params", "--bytes", *model, "-f", "json", endpoint=url, home=tmp_path)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert data["hub_total_size_bytes"] == total == 13_761_264_768
        assert data["checkpoint_bytes"] == total  # docs/formats.md: matched to the byte
        table = run("params", "--bytes", *model, endpoint=url, home=tmp_path).stdout
        assert "total_size" in table and "match it to the byte" in " ".join(table.split())
    no_bytes = run("params", "--hf-config", str(folder), "-f", "json", endpoint=url, home=tmp_path)
    assert json.loads(no_bytes.stdout)["hub_total_size_bytes"] is None


def test_a_differing_total_size_is_stated(hub, hf_fixture, tmp_path):
    folder = tmp_path / "llama3-8b"
    folder.mkdir()
    (folder / "config.json").write_bytes((hf_fixture("llama3-8b") / "config.json").read_bytes())
    ours = json.loads(run("params", "--bytes", "--hf-config", str(folder), "-f", "json", endpoint=hub[1],
                          home=tmp_path).stdout)["checkpoint_bytes"]
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": ours - 1000}}))
    table = " ".join(run("params", "--bytes", "--hf-config", str(folder), endpoint=hub[1], home=tmp_path)
                     .stdout.split())
    assert "differ by +1,000 bytes" in table


def test_modelopt_quant_config_gives_the_formats(hub, hf_fixture, tmp_path):
    """A ModelOpt FP8 export: config.json without quantization_config, hf_quant_config.json beside it (vLLM's
    docs/features/quantization/modelopt.md: FP8 is one scale per tensor). Its weights are fp8, so the
    checkpoint's matrices are about half the bf16 ones."""
    state, url = hub
    folder = tmp_path / "llama3-8b-fp8"
    folder.mkdir()
    (folder / "config.json").write_bytes((hf_fixture("llama3-8b") / "config.json").read_bytes())
    quant = {"producer": {"name": "modelopt"},
             "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}}
    (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    serve_folder(state, "nv-test/llama3-8b-fp8", folder)
    bf16 = json.loads(run("params", "--bytes", "--hf-config", str(hf_fixture("llama3-8b")), "-f", "json",
                          endpoint=url, home=tmp_path).stdout)
    fp8 = json.loads(run("params", "--bytes", "--hf-model", "nv-test/llama3-8b-fp8", "-f", "json", endpoint=url,
                         home=tmp_path).stdout)
    assert "fp8" in fp8["checkpoint_formats"]
    assert 0.5 < fp8["checkpoint_bytes"] / bf16["checkpoint_bytes"] < 0.6


def test_errors_are_one_line_naming_the_id_and_the_fix(hub, hf_fixture, tmp_path):
    state, url = hub
    serve_folder(state, "test-org/gpt2", hf_fixture("gpt2"))
    serve_folder(state, "test-org/gated", hf_fixture("gpt2"))
    state.gated.add("test-org/gated")
    state.repos["test-org/empty"] = {"README.md": b"no config"}
    state.repos["test-org/bad-json"] = {"config.json": b'{"model_type": "llama", '}
    gpt2 = (hf_fixture("gpt2") / "config.json").read_bytes()
    state.repos["test-org/huge"] = {"config.json": gpt2[:-2] + b" " * (1 << 20) + b"}\n"}  # over 1 MiB
    state.repos["test-org/bad-index"] = {"config.json": gpt2,
                                         "model.safetensors.index.json": b'{"metadata": {"total_size": "1 GB"}}'}
    cases = {
        "test-org/missing": "check the id",
        "test-org/gated": "HF_TOKEN",
        "test-org/gpt2@no-such-branch": "revision not found",
        "test-org/empty": "no config.json",
        "test-org/bad-json": "malformed JSON",
        "test-org/huge": "more than 1,048,576",
        "test-org/bad-index": "total_size",
        "not an id": "ORG/NAME",
        "org/na--me": "ORG/NAME",
    }
    for ref, fix in cases.items():
        line = one_line_error(run("params", "--hf-model", ref, endpoint=url, home=tmp_path))
        assert fix in line and ref.split("@")[0] in line, line
        assert "--hf-model" in line
    gated = one_line_error(run("params", "--hf-model", "test-org/gated", endpoint=url, home=tmp_path))
    assert "licence" in gated
    opened = run("params", "--hf-model", "test-org/gated", "-f", "json", endpoint=url, home=tmp_path,
                 HF_TOKEN=TOKEN)  # huggingface_hub sends HF_TOKEN itself
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["total"] == 124_439_808  # GPT-2 small: transformers counts 124,439,808


def test_unreachable_hub_is_one_line(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = one_line_error(run("kv", "--hf-model", "test-org/gpt2", endpoint=f"http://127.0.0.1:{port}",
                              home=tmp_path, HF_HUB_ETAG_TIMEOUT="2"))
    assert "cannot connect" in line and "HF_HUB_OFFLINE" in line


def test_a_silent_hub_times_out_in_one_line(tmp_path):
    import socket

    with socket.socket() as s:  # accepts the connection, never answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        r = run("kv", "--hf-model", "test-org/gpt2", endpoint=f"http://127.0.0.1:{port}", home=tmp_path,
                HF_HUB_ETAG_TIMEOUT="1", HF_HUB_DOWNLOAD_TIMEOUT="1")
    line = one_line_error(r)
    assert "did not answer" in line or "cannot connect" in line, line


def test_offline_uses_the_cache_and_fails_in_one_line_before_it(hub, hf_fixture, tmp_path):
    state, url = hub
    serve_folder(state, "test-org/qwen3-8b", hf_fixture("qwen3-8b"))
    before = one_line_error(run("kv", "--hf-model", "test-org/qwen3-8b", endpoint=url, home=tmp_path,
                                HF_HUB_OFFLINE="1"))
    assert "HF_HUB_OFFLINE" in before and "test-org/qwen3-8b" in before
    online = run("kv", "--hf-model", "test-org/qwen3-8b", "-f", "json", endpoint=url, home=tmp_path)
    assert online.returncode == 0, online.stderr
    state.requests.clear()
    offline = run("kv", "--hf-model", "test-org/qwen3-8b", "-f", "json", endpoint=url, home=tmp_path,
                  HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout) == json.loads(online.stdout)
    assert state.requests == []  # nothing asked of the Hub


def test_without_huggingface_hub_one_line(tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['huggingface_hub'] = None\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocker), str(Path(__file__).parents[1])])}
    r = subprocess.run([sys.executable, "-m", "llmcalc", "params", "--hf-model", "org/name"], capture_output=True,
                       text=True, env={**os.environ, **env}, timeout=CLI_TIMEOUT)
    assert one_line_error(r) == ("error: --hf-model needs huggingface_hub: pip install 'llmcalc-cost[hub]'")


def test_generic_import_only_with_the_flag(hub, tmp_path):
    """A model_type llmcalc does not know, with the common decoder fields: refused without --hf-generic, read as llama with it and said so."""
    state, url = hub
    config = dict(model_type="exaone_test", hidden_size=2048, num_hidden_layers=4, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=64, intermediate_size=4096, vocab_size=1000,
                  max_position_embeddings=4096, tie_word_embeddings=True, hidden_act="silu")
    state.repos["test-org/unknown"] = {"config.json": json.dumps(config).encode()}
    line = one_line_error(run("params", "--hf-model", "test-org/unknown", endpoint=url, home=tmp_path))
    assert "not supported" in line and "--hf-generic" in line
    r = run("params", "--hf-model", "test-org/unknown", "--hf-generic", "-f", "json", endpoint=url, home=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["model_import"] == "best-effort" and any("llama" in a for a in data["assumed"])
    assert any(a.startswith("attention_bias absent") for a in data["assumed"])
    # the llama block by hand: tied embedding, 4 × (q, k, v, o + gate, up, down + 2 norms), final norm
    d, layers, kv = 2048, 4, 8 * 64
    per_layer = d * 32 * 64 + 2 * d * kv + 32 * 64 * d + 3 * d * 4096 + 2 * d
    assert data["total"] == 1000 * d + layers * per_layer + d
    table = run("params", "--hf-model", "test-org/unknown", "--hf-generic", endpoint=url, home=tmp_path).stdout
    assert "best-effort import" in table
    kv_json = json.loads(run("kv", "--hf-model", "test-org/unknown", "--hf-generic", "-f", "json", endpoint=url,
                             home=tmp_path).stdout)
    assert any("best-effort import" in n for n in kv_json["notes"])
    moe = dict(config, num_local_experts=8)
    state.repos["test-org/unknown-moe"] = {"config.json": json.dumps(moe).encode()}
    line = one_line_error(run("params", "--hf-model", "test-org/unknown-moe", "--hf-generic", endpoint=url,
                              home=tmp_path))
    assert "num_local_experts" in line and "plain decoder" in line


def test_huggingface_hub_is_imported_only_for_hf_model(hf_fixture):
    """The extra is optional: a command that names its model any other way never imports it."""
    folder = hf_fixture("llama3-8b")
    for args in (["params", "--hf-config", str(folder), "--bytes"], ["kv", "--preset", "llama2-7b"]):
        code = ("import sys; from llmcalc.cli import load_commands\n"
                f"sys.argv = ['llmcalc', *{args!r}]\n"
                "load_commands(sys.argv[1:])(standalone_mode=False)\n"
                "print('huggingface_hub' in sys.modules)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CLI_TIMEOUT,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[-1] == "False"


def test_generic_import_of_a_llama_shaped_model_matches_transformers(shared, tmp_path):
    """Seed-OSS-36B (../shared/model-configs-2026) is a llama-shaped decoder: under a model_type llmcalc does not
    know, read with --hf-generic, its parameters equal transformers' own `seed_oss` model on the meta device; the
    assumptions are still listed."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = json.loads((shared("model-configs-2026") / "seed-oss-36b-instruct.json").read_text())
    try:
        config = transformers.AutoConfig.for_model(**raw)
    except ValueError:
        pytest.skip("this transformers has no seed_oss")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    theirs = sum(p.numel() for p in model.parameters())
    folder = tmp_path / "seed-oss"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw | {"model_type": "seed_oss_unknown"}))
    r = run("params", "--hf-config", str(folder), "--hf-generic", "-f", "json", endpoint="http://127.0.0.1:9",
            home=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["total"] == theirs == 36_151_104_512
    assert data["model_import"] == "best-effort" and "seed_oss_unknown" in data["assumed"][0]


def test_the_python_api_takes_a_hub_id(hub, hf_fixture, tmp_path):
    """`llmcalc.params("ORG/NAME")` reads the Hub id as --hf-model does (docs/python.md)."""
    state, url = hub
    folder = hf_fixture("mistral-7b")
    serve_folder(state, "test-org/mistral-7b", folder)
    code = ("import llmcalc\n"
            "print(llmcalc.params('test-org/mistral-7b@main').total, llmcalc.params(" f"{str(folder)!r}" ").total)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CLI_TIMEOUT,
                       env=clean | {"HF_ENDPOINT": url, "HF_HOME": str(tmp_path), "HF_HUB_DISABLE_XET": "1",
                                    "PYTHONPATH": str(Path(__file__).parents[1])})
    assert r.returncode == 0, r.stderr
    hub_total, local_total = map(int, r.stdout.split())
    assert hub_total == local_total == 7_241_732_096  # Mistral-7B: transformers counts 7,241,732,096


def test_the_page_takes_a_hub_id(hub, hf_fixture, tmp_path):
    """The web page's Hub id (`llmcalc ui`, its answer route) is fetched as --hf-model fetches it."""
    pytest.importorskip("starlette")
    import urllib.request

    state, url = hub
    serve_folder(state, "test-org/mistral-7b", hf_fixture("mistral-7b"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env = clean | {"HF_ENDPOINT": url, "HF_HOME": str(tmp_path), "HF_HUB_DISABLE_XET": "1",
                   "PYTHONPATH": str(Path(__file__).parents[1])}
    before = len(state.requests)
    with page_server(env) as base:
        question = json.dumps({"argv": ["params", "--hf-model", "test-org/mistral-7b"]}).encode()
        ask = urllib.request.Request(f"{base}/api/answer", data=question, headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(ask, timeout=CLI_TIMEOUT).read())
    assert answer["command_line"] == "llmcalc params --hf-model test-org/mistral-7b"
    assert answer["report"]["total"] == 7_241_732_096  # Mistral-7B: transformers counts 7,241,732,096
    asked = [r for r in state.requests[before:] if r.endswith("/config.json")]
    assert asked == ["HEAD /test-org/mistral-7b/resolve/main/config.json",
                     "GET /test-org/mistral-7b/resolve/main/config.json"]  # once, not again by the run


def test_a_scenario_file_waits_for_an_unreachable_hub_once(tmp_path):
    """`run --keep-going` waited out the Hub's timeouts for each `hf_model` scenario (24 s each); once the Hub could
    not be reached, the later scenarios fail at once, each naming its model and why."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scenarios = tmp_path / "hub.yaml"
    scenarios.write_text(yaml.safe_dump({"scenarios": [
        {"name": n, "command": "params", "options": {"hf_model": f"test-org/model-{n}"}} for n in "abc"]}))
    r = run("run", str(scenarios), "--keep-going", "-f", "json", endpoint=f"http://127.0.0.1:{port}", home=tmp_path,
            HF_HUB_ETAG_TIMEOUT="2")
    errors = [x["error"] for x in json.loads(r.stdout)]
    assert "cannot connect" in errors[0] and "test-org/model-a" in errors[0]
    for n, e in zip("bc", errors[1:]):
        assert f"test-org/model-{n}: not fetched, the Hub could not be reached " in e
        assert " s ago (cannot connect" in e and "try again in a minute" in e


def test_an_unreachable_hub_is_tried_again_a_minute_later(monkeypatch):
    """A long-lived process (`llmcalc ui`) kept refusing every `hf_model` for its lifetime once one fetch found the
    Hub unreachable; the failure now holds for UNREACHED_S, then the Hub is tried again."""
    import time

    from llmcalc.inputs import hub

    monkeypatch.setattr(hub, "_UNREACHED", [(time.monotonic() - 10, "cannot connect")])
    with pytest.raises(UserError, match=r"could not be reached 10 s ago \(cannot connect\)"):
        hub.fetch("test-org/model-a")
    tried = []
    monkeypatch.setattr(hub, "_UNREACHED", [(time.monotonic() - hub.UNREACHED_S - 1, "cannot connect")])
    monkeypatch.setattr(hub, "bounded", lambda files, deadline, late: tried.append(late) or (_ for _ in ()).throw(
        UserError("tried")))
    with pytest.raises(UserError, match="^tried$"):
        hub.fetch("test-org/model-a")
    assert tried


def test_the_page_fetches_a_hub_model_before_it_takes_the_one_run_lock(monkeypatch):
    """The page runs one question at a time; a question whose Hub fetch waited out its timeouts held every other
    question for as long (22.7 s behind an unreachable Hub). The fetch now runs before the lock is taken; the
    run then meets the cache or the failure."""
    from llmcalc.cli import invoke
    from llmcalc.inputs import hub

    seen = []

    def fetch(ref):
        seen.append((ref, invoke._ONE_AT_A_TIME.locked()))
        raise UserError(f"`hf_model` {ref}: not fetched")

    monkeypatch.setattr(hub, "fetch", fetch)
    out = invoke.invoke(["params", "--hf-model", "test-org/a", "--bytes"])
    assert out.code == 2 and "test-org/a: not fetched" in out.error
    assert seen[0] == ("test-org/a", False)  # the page's own fetch, with the lock free
    invoke.invoke(["params", "--hf-model=test-org/b"])
    assert ("test-org/b", False) in seen
