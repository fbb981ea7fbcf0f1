"""`llmcalc run`: each scenario's report is exactly its command's own JSON; bad scenarios are refused in one line
naming the scenario and the option, before anything runs; a failed check does not stop the others; the table and
the CSV hold one row per scenario."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
import yaml

GPU = ["--gpu", "h100-sxm"]
SCENARIOS = [  # name, command, options in the file, the same on the command line (the defaults: llama3-8b, h100-sxm)
    ("kv long", "kv", {"batch": 64, "seq": "32k", "kv-dtype": "fp8"},
     ["kv", "-p", "llama3-8b", "--batch", "64", "--seq", "32k", "--kv-dtype", "fp8"]),
    ("params bytes", "params", {"preset": "mixtral-8x7b", "bytes": True},
     ["params", "-p", "mixtral-8x7b", "--bytes"]),
    ("memory train", "memory", {"train": True, "batch": 8, "flash": False, "zero": 1, "dp": 4},
     ["memory", "-p", "llama3-8b", "--train", "--batch", "8", "--no-flash", "--zero", "1", "--dp", "4"]),
    ("latency tp2", "latency", {"batch": 8, "seq": 2048, "gen": 64, "gpus": 2, "compute_efficiency": 0.7,
                                "time_model": "roofline"},
     ["latency", "-p", "llama3-8b", *GPU, "--batch", "8", "--seq", "2048", "--gen", "64", "--gpus", "2",
      "--compute-efficiency", "0.7", "--time-model", "roofline"]),
    ("flops", "flops", {"gen": 16, "attention": "dense", "recompute": "selective"},
     ["flops", "-p", "llama3-8b", "--gen", "16", "--attention", "dense", "--recompute", "selective"]),
    ("fit 128k", "fit", {"batch": 32, "seq": "128k", "gpu": "a100-80gb"},
     ["fit", "-p", "llama3-8b", "--gpu", "a100-80gb", "--batch", "32", "--seq", "128k"]),
    ("moe", "moe", {"preset": "mixtral-8x7b", "batch": 8, "seq": 512, "capacity_factor": 1.25},
     ["moe", "-p", "mixtral-8x7b", "--batch", "8", "--seq", "512", "--capacity-factor", "1.25"]),
    ("train", "train", {"gpus": 8, "batch": 64, "zero": 1, "auto": True},
     ["train", "-p", "llama3-8b", *GPU, "--gpus", "8", "--batch", "64", "--zero", "1", "--auto"]),
    ("mfu", "mfu", {"tokens_per_s": 20000, "gpus": 8, "recompute": "selective"},
     ["mfu", "-p", "llama3-8b", *GPU, "--tokens-per-s", "20000", "--gpus", "8", "--recompute", "selective"]),
    ("scale", "scale", {"flops": "1e21", "gpus": 64},
     ["scale", *GPU, "--flops", "1e21", "--gpus", "64"]),
    ("explain", "explain", {"topic": "kv", "batch": 2},
     ["explain", "kv", "-p", "llama3-8b", *GPU, "--batch", "2"]),
    ("compare models", "compare", {"preset": ["llama3-8b", "mistral-7b"], "gpu": None},
     ["compare", "-p", "llama3-8b", "-p", "mistral-7b"]),
]


def write(tmp_path, scenarios, defaults=None, name="runs.yaml"):
    data = {"defaults": defaults} if defaults is not None else {}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data | {"scenarios": scenarios}, sort_keys=False), encoding="utf-8")
    return path


def file_of(tmp_path):
    return write(tmp_path, [{"name": n, "command": c, "options": o} for n, c, o, _ in SCENARIOS],
                 {"preset": "llama3-8b", "gpu": "h100-sxm"})


def test_each_report_is_its_commands_own_json(tmp_path, cli, cli_json):
    out = cli_json("run", str(file_of(tmp_path)))
    assert [(r["index"], r["name"], r["command"]) for r in out] == [
        (i, n, c) for i, (n, c, _, _) in enumerate(SCENARIOS, 1)]
    assert {r["command"] for r in out} >= {"kv", "params", "memory", "latency", "flops", "fit"}
    for r, (name, _, _, argv) in zip(out, SCENARIOS):
        assert r["error"] is None
        assert r["report"] == cli_json(*argv), name


def test_table_and_csv_one_row_per_scenario(tmp_path, cli, cli_json):
    path = file_of(tmp_path)
    reports = {r["name"]: r["report"] for r in cli_json("run", str(path))}
    table = cli("run", str(path))
    assert table.returncode == 0, table.stderr
    for name, command, _, _ in SCENARIOS:
        assert name in table.stdout
    assert "does not fit" in table.stdout  # fit 128k on one A100: a figure, not an error
    r = cli("run", str(path), "-f", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [(x["index"], x["name"], x["command"]) for x in rows] == [
        (str(i), n, c) for i, (n, c, _, _) in enumerate(SCENARIOS, 1)]
    kv = next(x for x in rows if x["name"] == "kv long")
    assert int(kv["total_bytes"]) == reports["kv long"]["total_bytes"] and kv["kv_dtype"] == "fp8"
    fit = next(x for x in rows if x["name"] == "fit 128k")
    assert fit["fits"] == "False" and int(fit["smallest_fit.gpus"]) == reports["fit 128k"]["smallest_fit"]["gpus"]
    assert "per_layer" not in rows[0] and "notes" not in rows[0] and "formula" not in rows[0]


def test_csv_of_names_with_a_carriage_return_or_a_formula_stays_one_row_each(tmp_path, cli):
    """A scenario named with a bare carriage return broke its CSV row in two (csv quotes only the line break it
    ends rows with); a name starting = is a formula to a spreadsheet. One row each, as escaped text."""
    path = write(tmp_path, [{"name": "a\rb", "command": "kv", "options": {"preset": "gpt2"}},
                            {"name": "=HYPERLINK(1)", "command": "kv", "options": {"preset": "gpt2"}},
                            {"name": "-1.5", "command": "kv", "options": {"preset": "gpt2"}}])
    r = cli("run", str(path), "-f", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout, newline="")))
    assert [x[2] for x in rows] == ["name", "a\\x0db", "'=HYPERLINK(1)", "-1.5"]
    assert len({len(x) for x in rows}) == 1


def test_a_failed_check_does_not_stop_the_others(tmp_path, cli_json):
    path = write(tmp_path, [
        {"name": "too big", "command": "fit", "options": {"preset": "llama2-70b", "gpu": "l4"}},
        {"name": "small", "command": "kv", "options": {"preset": "gpt2"}},
    ])
    out = cli_json("run", str(path))
    assert out[0]["report"]["fits"] is False and out[1]["report"]["total_bytes"] > 0


def refusal(cli, path, *args):
    r = cli("run", str(path), *args)
    assert r.returncode == 2, r.stdout
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    return r.stderr


@pytest.mark.parametrize("scenario, defaults, expected", [
    ({"name": "a", "command": "kvv"}, None, ['scenario 1 "a"', "did you mean kv?"]),
    ({"name": "a", "command": "serve"}, None, ['scenario 1 "a"', "serve is not run from a scenario file",
                                                "run it on its own"]),
    ({"name": "a", "command": "kv", "options": {"gen": 4}}, {"preset": "gpt2"},
     ['scenario 1 "a" (kv): gen: not an option of kv', "kv takes"]),
    ({"name": "a", "command": "kv", "options": {"kv_dtpye": "fp8"}}, {"preset": "gpt2"},
     ["kv_dtpye: not an option of kv; did you mean kv_dtype?"]),
    ({"name": "a", "command": "kv", "options": {"kv_dtype": "bf17"}}, {"preset": "gpt2"},
     ["(kv): kv_dtype: 'bf17' is not one of", "use one of the listed values"]),
    ({"name": "a", "command": "kv", "options": {"batch": "lots"}}, {"preset": "gpt2"},
     ["(kv): batch: 'lots' is not a whole number; give"]),
    ({"name": "a", "command": "kv", "options": {"batch": 0}}, {"preset": "gpt2"}, ["(kv): batch: must be > 0"]),
    ({"name": "a", "command": "kv", "options": {"preset": "llama3-9b"}}, None,
     ["(kv): preset: unknown preset 'llama3-9b'; did you mean"]),
    ({"name": "a", "command": "memory", "options": {"flash": "no"}}, {"preset": "gpt2"},
     ["flash: 'no' is not true or false; give flash: true or flash: false"]),
    ({"name": "a", "command": "kv", "options": {"batch": [1, 2]}}, {"preset": "gpt2"},
     ["batch: a list; it takes one value"]),
    ({"name": "a", "command": "kv", "options": {"format": "json"}}, {"preset": "gpt2"},
     ["format: the output of the whole run"]),
    ({"name": "tp 3", "command": "latency"}, {"preset": "llama3-8b", "gpu": "h100-sxm", "tp": 3},
     ['scenario 1 "tp 3" (latency): tp (from defaults): 3 does not divide the 32 attention heads']),
    ({"name": "a", "command": "latency"}, {"preset": "llama3-8b"}, ["(latency): gpu: latency needs a GPU"]),
    ({"name": "a", "command": "kv"}, {"gpuu": "h100-sxm"}, ["defaults: gpuu: an option of none of the commands"]),
    ({"name": "a", "command": "kv", "optoins": {}}, None,
     ["scenario 1: unknown field 'optoins'; did you mean options"]),
    ({"command": "kv"}, None, ["scenario 1: name: missing"]),
    ({"name": "a", "command": "memory", "options": {"recompute": "full"}}, {"preset": "gpt2"},
     ["(memory): recompute shapes a training step's memory; add train"]),  # its own option that nothing reads
])
def test_bad_scenario_is_one_line_naming_it(tmp_path, cli, scenario, defaults, expected):
    path = write(tmp_path, [scenario], defaults)
    err = refusal(cli, path)
    assert f"scenario file {path}: " in err
    for text in expected:
        assert text in err, err


def test_every_scenario_is_parsed_before_any_runs(tmp_path, cli):
    """Scenario 1 would fail only when run (its preset is looked up then); scenario 2's option fails to parse:
    scenario 2's error is the one reported, and nothing was written."""
    path = write(tmp_path, [{"name": "first", "command": "kv", "options": {"preset": "no-such-model"}},
                            {"name": "second", "command": "kv", "options": {"preset": "gpt2", "seq": "long"}}])
    assert 'scenario 2 "second" (kv): seq:' in refusal(cli, path)


def test_keep_going_runs_the_good_scenarios(tmp_path, cli):
    path = write(tmp_path, [{"name": "good", "command": "kv", "options": {"preset": "gpt2"}},
                            {"name": "bad value", "command": "kv", "options": {"preset": "gpt2", "seq": "long"}},
                            {"name": "bad model", "command": "kv", "options": {"preset": "no-such-model"}}])
    r = cli("run", str(path), "--keep-going", "-f", "json")
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and 'scenario 2 "bad value"' in lines[0] and 'scenario 3 "bad model"' in lines[1]
    out = json.loads(r.stdout)
    assert out[0]["report"]["model"] == "gpt2" and out[0]["error"] is None
    assert out[1]["report"] is None and out[1]["error"].startswith("seq: 'long' is not a whole number")
    assert out[2]["report"] is None and "unknown preset" in out[2]["error"]


def test_scenario_options_follow_the_command_line(tmp_path, cli_json):
    """`-` or `_` alike; an on/off option under either of its names; a scenario's model replaces the defaults';
    null is the command's default."""
    path = write(tmp_path, [
        {"name": "inference", "command": "memory", "options": {"inference": True, "kv_dtype": "fp8"}},
        {"name": "own model", "command": "memory", "options": {"config": None, "preset": "gpt2", "kv-dtype": None}},
    ], {"preset": "llama3-8b", "train": True})
    out = cli_json("run", str(path))
    assert out[0]["report"] == cli_json("memory", "-p", "llama3-8b", "--kv-dtype", "fp8")
    assert out[1]["report"] == cli_json("memory", "-p", "gpt2", "--train")


def test_explain_that_does_not_match_exits_1_after_the_output(tmp_path, cli):
    """explain's own exit code 1 (a total off) carries through; here every total matches: exit 0."""
    path = write(tmp_path, [{"name": "e", "command": "explain", "options": {"topic": "params", "preset": "gpt2"}}])
    r = cli("run", str(path), "-f", "json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["report"]["matches"] is True


def test_bounds(tmp_path, cli):
    many = write(tmp_path, [{"name": f"s{i}", "command": "kv"} for i in range(1001)], {"preset": "gpt2"})
    assert "1,001 scenarios, more than 1,000; split the file" in refusal(cli, many)
    big = tmp_path / "big.yaml"
    big.write_text("scenarios:\n" + "# padding\n" * 120_000, encoding="utf-8")
    assert "more than 1,048,576" in refusal(cli, big)
    twice = write(tmp_path, [{"name": "a", "command": "kv"}, {"name": "a", "command": "params"}], {"preset": "gpt2"})
    assert 'scenario 2 "a": the name of scenario 1 too' in refusal(cli, twice)
    assert "not a finite number" in refusal(cli, write(tmp_path, [
        {"name": "a", "command": "fit", "options": {"reserve": float("nan")}}], {"preset": "gpt2"}))
    # 1,000 compares of 60 presets each ran for minutes within the scenario bound: the models named are counted too
    presets = ["gpt2", "llama2-7b", "llama3-8b", "mistral-7b", "qwen3-8b"]
    wide = write(tmp_path, [{"name": f"c{i}", "command": "compare", "options": {"preset": presets}}
                            for i in range(400)] + [{"name": "k", "command": "kv"}], {"preset": "gpt2"})
    assert "its scenarios name 2,001 models in all, more than 2,000" in refusal(cli, wide)


def test_run_never_imports_torch(tmp_path):
    path = file_of(tmp_path)
    code = ("import io, sys, contextlib; from llmcalc.cli import load_commands\n"
            f"args = ['run', {str(path)!r}, '-f', 'json']\n"
            "with contextlib.redirect_stdout(io.StringIO()): load_commands(args)(args, standalone_mode=False)\n"
            "print(' '.join(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "llmcalc.cli.latency" in loaded and not loaded & {"torch", "transformers", "matplotlib"}


def test_a_default_applies_only_where_it_does_something(tmp_path, cli_json):
    """A shared default that one scenario's command does not read there (recompute on an inference memory, an
    engine on compare without a GPU, an expert skew on a latency without expert parallelism) is left out of that
    scenario, which then gives the same report as its command without it, where the command line would refuse it."""
    defaults = {"preset": "llama3-8b", "recompute": "selective", "engine": "vllm", "expert_skew": 1.0}
    path = write(tmp_path, [{"name": "mem", "command": "memory"},
                            {"name": "cmp", "command": "compare", "options": {"variants": ["gqa", "mla"]}},
                            {"name": "lat", "command": "latency", "options": {"gpu": "h100-sxm"}},
                            {"name": "train", "command": "memory", "options": {"train": True}}], defaults)
    out = cli_json("run", str(path))
    assert [r["error"] for r in out] == [None] * 4
    assert out[0]["report"] == cli_json("memory", "-p", "llama3-8b")
    assert out[1]["report"] == cli_json("compare", "gqa", "mla", "-p", "llama3-8b")
    assert out[2]["report"] == cli_json("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--engine", "vllm")
    assert out[3]["report"] == cli_json("memory", "-p", "llama3-8b", "--train", "--recompute", "selective")
