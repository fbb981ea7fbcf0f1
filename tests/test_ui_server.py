"""The page's server (llmcalc ui): its answers are the command line's own (the same report a subprocess prints as
JSON, the same one-line error and exit code), malformed requests get a 4xx and a one-line JSON error, the page
reads no file but the pasted one and writes none, and every script and style comes from the package."""

import builtins
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from llmcalc.cli import page  # noqa: E402
from llmcalc.cli.page import PAGE_COMMANDS  # noqa: E402
from llmcalc.ui.questions import MAX_REQUEST_BYTES  # noqa: E402
from llmcalc.ui.server import STATIC, create_app  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(page), base_url="http://127.0.0.1")


def ask(client, argv, file=None):
    body = {"argv": argv} | ({"file": file} if file else {})
    r = client.post("/api/answer", json=body)
    assert r.status_code == 200, r.text
    return r.json()


# --- the answers are the command line's ---------------------------------------------------------------------------
QUESTIONS = [
    ["kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768"],
    ["params", "--preset", "deepseek-v3"],
    ["memory", "--preset", "llama3-8b", "--batch", "8", "--seq", "8k", "--train"],
    ["flops", "--preset", "qwen3-30b-a3b", "--seq", "2048", "--attention", "dense"],
    ["params", "--preset", "gpt-oss-20b", "--bytes"],  # an output option that adds to the report
    ["latency", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--batch", "8", "--interval"],
]


@pytest.mark.parametrize("argv", QUESTIONS, ids=lambda a: "-".join(w.lstrip("-") for w in a[:1] + a[-1:]))
def test_answer_is_the_command_lines_json(client, argv):
    answer = ask(client, argv)
    cli = run_cli(*argv, "--format", "json")
    assert cli.returncode == 0 and answer["code"] == 0
    assert answer["report"] == json.loads(cli.stdout)
    assert answer["command_line"] == "llmcalc " + " ".join(argv)


def test_bad_input_is_the_command_lines_line_and_code(client):
    argv = ["kv", "--preset", "llama2-7b", "--batch", "-3"]
    answer = ask(client, argv)
    cli = run_cli(*argv)
    assert cli.returncode == answer["code"] == 2
    assert cli.stderr == f"error: {answer['error']}\n"
    assert answer["field"] == "--batch" and "report" not in answer


def test_error_names_a_missing_option_as_its_field(client):
    answer = ask(client, ["latency", "--preset", "llama3-8b"])
    assert answer["code"] == 2 and answer["field"] == "--gpu", answer


@pytest.mark.parametrize("option", ["--gpu", "--engine"])
def test_the_page_does_not_say_which_folders_its_server_has(client, tmp_path, monkeypatch, option):
    """`--gpu docs` on the page said "docs is a folder" where the server's working folder held one, and "unknown
    GPU" elsewhere: a visitor could probe the server's folders by name. The page answers as for any unknown name;
    the command line still says it is a folder."""
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    argv = ["serve", "--preset", "llama3-8b", "--requests", "5"] + ([] if option == "--gpu" else ["--gpu", "h100-sxm"])
    folder, other = ask(client, [*argv, option, "docs"]), ask(client, [*argv, option, "nowhere"])
    assert folder["code"] == other["code"] == 2
    assert folder["error"] == other["error"].replace("nowhere", "docs") and "folder" not in folder["error"]
    assert "is a folder" in run_cli(*argv, option, "docs", cwd=tmp_path).stderr


def test_pasted_config_is_read_from_memory_and_nothing_is_written(client, tmp_path, monkeypatch):
    """A pasted config.json gives what --hf-config of the same file gives; no file is opened for writing."""
    config = json.dumps({"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
                         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
                         "max_position_embeddings": 2048})
    (tmp_path / "config.json").write_text(config)
    cli = run_cli("params", "--hf-config", str(tmp_path / "config.json"), "--format", "json")
    opened = builtins.open

    def no_writes(file, mode="r", *args, **kwargs):
        assert not set(mode) & set("wax+"), f"the page opened {file} to write"
        return opened(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_writes)
    monkeypatch.setattr(Path, "write_text", lambda *a, **k: pytest.fail("the page wrote a file"))
    answer = ask(client, ["params", "--hf-config", "pasted/config.json"],
                 {"name": "pasted/config.json", "text": config})
    expected = json.loads(cli.stdout)
    assert answer["report"]["total"] == expected["total"] == 2 * 1000 * 256 + 2 * (
        256 * 256 * 2 + 2 * 256 * 128 + 3 * 256 * 688 + 2 * 256) + 256


@pytest.mark.parametrize("name", ["kimi-k2-instruct.json", "llama-4-scout-17b-16e-instruct.json"])
def test_a_real_pasted_config_is_the_command_lines(client, shared, name):
    """A real config.json pasted (a 1T-parameter MLA MoE, a vision-language MoE) gives what --hf-config of the
    file gives, byte for byte."""
    path = shared("model-configs-2026") / name
    argv = ["memory", "--batch", "8", "--seq", "32k", "--kv-dtype", "fp8"]
    answer = ask(client, [*argv, "--hf-config", "config.json"], {"name": "config.json", "text": path.read_text()})
    cli = run_cli(*argv, "--hf-config", str(path), "--format", "json")
    assert cli.returncode == 0 and answer["code"] == 0, answer
    expected = json.loads(cli.stdout)
    assert answer["report"] | {"model": expected["model"]} == expected  # the model is named by its file's name


def test_pasted_file_errors_name_it(client):
    answer = ask(client, ["kv", "--config", "mine.yaml"], {"name": "mine.yaml", "text": "a: [1"})
    assert answer["code"] == 2 and answer["error"].startswith("config mine.yaml: malformed YAML"), answer
    assert answer["field"] == "--config"


# --- malformed requests: 4xx, one line of JSON --------------------------------------------------------------------
MALFORMED = [
    (b"{", 400, "not valid UTF-8 JSON"),
    (b"[]", 400, "give a JSON object"),
    (b'{"argv": "kv"}', 400, "argv: give a list"),
    (b'{"argv": []}', 400, "argv: give a list"),
    (b'{"argv": ["rm", "-rf"]}', 400, "not a command of the page"),
    (b'{"argv": ["calibrate"]}', 400, "not a command of the page"),
    (b'{"argv": ["kv", "--format", "yaml"]}', 400, "--format is not an option the page offers"),
    (b'{"argv": ["serve", "--trace", "t.jsonl"]}', 400, "--trace is not an option the page offers"),
    (b'{"argv": ["kv", "--config", "/etc/passwd"]}', 400, "the page reads only the pasted file"),
    (b'{"argv": ["latency", "--gpu", "../gpu.yaml"]}', 400, "looks like a file"),
    (b'{"argv": ["gpus", "/tmp/secret.yaml"]}', 400, "looks like a file"),  # a command's own word too
    (b'{"argv": ["gpus", "gpu.json"]}', 400, "looks like a file"),
    (b'{"argv": ["compare", "gqa", "../mla"]}', 400, "looks like a file"),
    (b'{"argv": ["kv"], "file": {"name": "x"}}', 400, "file: give"),
    (b'{"argv": ["kv", "--batch", NaN]}', 400, "NaN is not JSON"),
    (b'{"argv": ["kv"], "extra": 1}', 400, "give a JSON object"),
    (b'{"argv": ["latency"], "argv": ["kv"]}', 400, "'argv' is given twice"),  # json kept the last
    (b'\xff\xfe', 400, "not valid UTF-8 JSON"),
    (b'{"argv": ["kv", "--preset", "\\ud800"]}', 400, "lone surrogate"),
    (b'{"argv": ["kv"], "file": {"name": "c.json", "text": "\\udfff"}}', 400, "lone surrogate"),
]


@pytest.mark.parametrize(("body", "status", "says"), MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_request_is_4xx_one_line_json(client, body, status, says):
    r = client.post("/api/answer", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status
    error = r.json()["error"]
    assert says in error and "\n" not in error


@pytest.mark.parametrize("kind", ["text/plain; x=application/json", "application/jsonx",
                                  "multipart/form-data; boundary=application/json", "text/plain"])
def test_another_media_type_is_415_even_if_it_mentions_json(client, kind):
    r = client.post("/api/answer", content=b'{"argv": ["kv"]}', headers={"Content-Type": kind})
    assert r.status_code == 415 and "\n" not in r.json()["error"]


def test_json_with_a_charset_is_json(client):
    r = client.post("/api/answer", content=b'{"argv": ["kv", "--preset", "llama2-7b"]}',
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200 and r.json()["code"] == 0


def test_oversized_request_refused_before_it_is_read(client):
    body = json.dumps({"argv": ["kv"], "file": {"name": "c.json", "text": "x" * MAX_REQUEST_BYTES}})
    r = client.post("/api/answer", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "bytes" in r.json()["error"]


def test_pasted_file_over_the_bound_refused(client):
    r = client.post("/api/answer", json={"argv": ["kv"], "file": {"name": "c.json", "text": "x" * (1 << 20 | 1)}})
    assert r.status_code == 400 and "1,048,576 bytes" in r.json()["error"]


@pytest.mark.parametrize(("method", "path", "status", "headers"), [
    ("post", "/api/answer", 415, {"Content-Type": "text/plain"}),
    ("get", "/api/answer", 405, {}),
    ("get", "/nothing-here", 404, {}),
    ("get", "/static/../pyproject.toml", 404, {}),
])
def test_other_bad_requests_are_json(client, method, path, status, headers):
    r = getattr(client, method)(path, headers=headers, **({"content": b"{}"} if method == "post" else {}))
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json") and r.json()["error"]


def test_a_foreign_host_name_is_refused(client):
    """Bound to this machine, the server answers only requests addressed to it (no DNS rebinding)."""
    r = client.get("/api/health", headers={"Host": "attacker.example"})
    assert r.status_code == 400 and "host" in r.json()["error"].lower()


# --- the page: its views, its files --------------------------------------------------------------------------------
def test_schema_offers_every_view_without_output_or_file_options(client):
    views = client.get("/api/schema").json()["commands"]
    assert [v["name"] for v in views] == list(PAGE_COMMANDS)
    for v in views:
        flags = {o["flag"] for o in v["options"]}
        assert not flags & {"--format", "--units", "--plot", "--calibration", "--trace", "--emit"}, v["name"]
        assert ("--bytes" in flags) == (v["name"] == "params"), v["name"]
        assert all(o["help"] for o in v["options"]), v["name"]  # a label for every control
    sweep = next(v for v in views if v["name"] == "sweep")
    assert {"--seq", "--batch", "--gpu"} <= {o["flag"] for o in sweep["options"]}


def test_an_option_left_none_shows_the_default_the_command_applies(client):
    """Options whose default is None (so that leaving them out can be told from giving them) show, as their
    placeholder, the default their command applies: the one its help states."""
    from llmcalc.api import DEFAULT_LENGTHS
    from llmcalc.workload import EXPERT_SKEW, Workload

    views = {v["name"]: {o["flag"]: o["default"] for o in v["options"]}
             for v in client.get("/api/schema").json()["commands"]}
    assert views["serve"]["--prompt"] == DEFAULT_LENGTHS[0] and views["serve"]["--output"] == DEFAULT_LENGTHS[1]
    assert views["memory"]["--optimizer"] == Workload().optimizer
    for command in ("latency", "serve", "plan"):
        assert float(views[command]["--expert-skew"]) == EXPERT_SKEW, command


def test_every_script_and_style_is_served_from_the_package(client):
    html = client.get("/").text
    referenced = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert referenced and all(u.startswith("/static/") or u.startswith("data:") for u in referenced), referenced
    for u in referenced:
        if u.startswith("/static/"):
            assert client.get(u).status_code == 200, u
    policy = client.get("/").headers["content-security-policy"]
    assert "default-src 'self'" in policy and "http" not in policy
    for f in STATIC.rglob("*"):
        if f.suffix in (".js", ".css", ".html") and "vendor" not in f.parts:
            assert not re.search(r"https?://", f.read_text()), f"{f} names another host"


def test_vendored_libraries_keep_their_licence_and_source():
    readme = (STATIC / "vendor" / "README.md").read_text()
    for folder in (p for p in (STATIC / "vendor").iterdir() if p.is_dir()):
        assert (folder / "LICENSE").is_file(), folder
        name, version = folder.name.rsplit("-", 1)
        assert f"registry.npmjs.org/{name.lower()}/-/{name.lower()}-{version}.tgz" in readme.lower(), folder


# --- the command -------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ui_without_the_extra_is_one_line(tmp_path):
    code = ("import sys; sys.modules['starlette'] = None; sys.modules['uvicorn'] = None; "
            "sys.argv = ['llmcalc', 'ui']; from llmcalc.cli import main; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 2
    assert r.stderr == "error: llmcalc ui needs starlette and uvicorn: pip install 'llmcalc-cost[ui]'\n"


def test_ui_port_in_use_and_bad_port_are_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli("ui", "--port", str(port))
    assert r.returncode == 2 and r.stderr.startswith(f"error: --host 127.0.0.1 --port {port}: cannot listen there")
    assert r.stderr.count("\n") == 1
    r = run_cli("ui", "--port", "70000")
    assert r.returncode == 2 and "--port 70000: not a TCP port" in r.stderr


def test_ui_on_another_address_warns_and_serves():
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "llmcalc", "ui", "--host", "0.0.0.0", "--port", str(port)],
                         stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        first = p.stderr.readline()
        assert first.startswith("warning: listening on 0.0.0.0: anyone who can reach this machine")
        assert f"http://127.0.0.1:{port}/" in p.stderr.readline()
    finally:
        p.terminate()
        p.wait(timeout=30)
