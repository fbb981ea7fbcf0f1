"""Start-up hygiene and packaging: no heavy imports on the analytical path; presets ship in the wheel."""

from __future__ import annotations

import json
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
HEAVY = ("torch", "transformers", "matplotlib", "numpy")


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True,
    )
    return set(out.stdout.split())


@pytest.mark.parametrize("args", [
    ["params", "--preset", "deepseek-v3"],
    ["latency", "--preset", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "2"],
    ["fit", "--preset", "llama3-8b", "--gpu", "l4"],
    ["gpus"],
])
def test_cli_run_never_imports_torch_or_transformers(args):
    code = (
        "import sys; from llmcalc.cli import load_commands\n"
        f"sys.argv = ['llmcalc', *{args!r}]\n"
        "load_commands(sys.argv[1:])(standalone_mode=False)"
    )
    loaded = modules_after(code)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


KV_RUN = ["kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768"]
TABLE_PATH = {"llmcalc.render.console", "llmcalc.render.report_tables", "llmcalc.render.tables"}


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_command_loads_only_its_own_modules(fmt):
    """`llmcalc kv` (main(), as the `llmcalc` script runs it) loads kv's command and report and no other
    command's; JSON output imports neither rich nor the table renderers, nor the csv module."""
    from llmcalc.cli import COMMANDS

    args = [*KV_RUN, "-f", fmt]
    loaded = modules_after(
        f"import io, contextlib, sys; from llmcalc.cli import main\nsys.argv = ['llmcalc', *{args!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main()\n"
        "    except SystemExit as e:\n        assert e.code == 0, e.code"
    )
    ours = {m for m in loaded if m.startswith("llmcalc.")}
    others = set(COMMANDS) - {"kv"}
    assert {"llmcalc.cli.kv", "llmcalc.reports.kv"} <= ours
    for part in ("cli", "reports", "views"):
        assert not ours & {f"llmcalc.{part}.{c}" for c in others}, sorted(ours)
    assert not ours & {"llmcalc.render.plot", "llmcalc.inputs.hf", "llmcalc.inputs.gpus"}, sorted(ours)
    rich = {m for m in loaded if m == "rich" or m.startswith("rich.")}
    if fmt == "json":
        assert not rich and not ours & TABLE_PATH and "csv" not in loaded, sorted(rich | ours & TABLE_PATH)
    else:
        assert "rich.console" in rich and TABLE_PATH <= ours  # the json case above has teeth


VARIANT_MODULES = {"llmcalc.model.mla", "llmcalc.model.sparse_attention", "llmcalc.model.state_space",
                   "llmcalc.model.deltanet", "llmcalc.model.lightning", "llmcalc.model.cross_attention",
                   "llmcalc.model.moe", "llmcalc.model.positions", "llmcalc.model.encoders",
                   "llmcalc.model.chunked_attention"}
"""The modules of the variants llama2-7b does not use (Variant.variant_modules)."""


def test_a_spec_loads_only_the_variant_modules_of_its_kinds():
    """A variant whose module is not the family's is defined only when a spec names its kind: `llmcalc kv` of
    llama2-7b imports none of those modules; of a Reformer preset the sparse attention's (and MLA's, which DSA
    there builds on), of BART the encoders' and the learned positions', of Mixtral MoE's, and no other (the check
    has teeth)."""
    run = "import io, contextlib; from llmcalc.cli import load_commands\n" \
          "with contextlib.redirect_stdout(io.StringIO()): load_commands({0!r})({0!r}, standalone_mode=False)"
    assert not modules_after(run.format([*KV_RUN, "-f", "json"])) & VARIANT_MODULES
    reformer = ["kv", "--preset", "reformer-decoder-example", "-f", "json"]
    assert modules_after(run.format(reformer)) & VARIANT_MODULES == {"llmcalc.model.sparse_attention",
                                                                     "llmcalc.model.mla"}
    bart = ["kv", "--preset", "bart-large", "-f", "json"]
    assert modules_after(run.format(bart)) & VARIANT_MODULES == {"llmcalc.model.encoders", "llmcalc.model.positions"}
    mixtral = ["kv", "--preset", "mixtral-8x7b", "-f", "json"]
    assert modules_after(run.format(mixtral)) & VARIANT_MODULES == {"llmcalc.model.moe"}


def test_main_runs_without_the_cyclic_collector_and_freezes_before_exit():
    """main() turns the cyclic garbage collector off while the command runs and freezes what it built before
    the exit, so neither the collections importing triggers nor the exit's full one walk the objects
    pydantic, typer and rich built (docs/performance.md); it gives the collector back."""
    code = ("import atexit, gc, sys\nimport llmcalc.cli as cli\nrun = cli._run\n\n"
            "def spy():\n    sys.stderr.write(f'during {gc.isenabled()}\\n')\n    run()\n\n"
            "cli._run = spy\n"
            "atexit.register(lambda: sys.stderr.write(f'after {gc.isenabled()} {gc.get_freeze_count() > 10_000}\\n'))\n"
            f"sys.argv = ['llmcalc', *{KV_RUN!r}, '-f', 'json']\ncli.main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr.split() == ["during", "False", "after", "True", "True"], r.stderr


def test_main_runs_pydantic_without_plugins():
    """main() puts a plugin loader that finds none in the place of pydantic's, which imports importlib.metadata and
    reads every installed distribution's entry points (docs/performance.md): a run imports neither, and still
    validates and prints. The installed pydantic still takes its plugins from that loader, so the stand-in is used
    rather than left aside (a pydantic that moves it fails here)."""
    import inspect

    import pydantic.plugin._schema_validator as schema_validator

    assert "from ._loader import get_plugins" in inspect.getsource(schema_validator.create_schema_validator)
    code = ("import atexit, sys\nfrom llmcalc.cli import main\n"
            "atexit.register(lambda: sys.stderr.write(' '.join(m for m in ('importlib.metadata', 'email') "
            "if m in sys.modules) + '|' + repr(tuple(sys.modules['pydantic.plugin._loader'].get_plugins()))))\n"
            f"sys.argv = ['llmcalc', *{KV_RUN!r}, '-f', 'json']\nmain()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "|()", r.stderr
    assert json.loads(r.stdout)["total_bytes"] > 0
    # the check has teeth: the library alone, outside main(), loads pydantic's own loader
    r = subprocess.run([sys.executable, "-c", "import sys; from llmcalc.inputs.presets import load_preset\n"
                        "load_preset('llama2-7b'); print('importlib.metadata' in sys.modules)"],
                       capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["True"]


def test_a_spec_loads_the_vision_and_format_models_only_when_it_has_them():
    """ModelSpec's `vision` and `checkpoint` and Workload's `weights_format` are Deferred (llmcalc/model/base.py):
    `llmcalc kv` of llama2-7b defines neither the vision tower's nor the weight formats' classes; a vision model
    defines the tower's, and a workload given a weights format the formats'."""
    run = "import io, contextlib; from llmcalc.cli import load_commands\n" \
          "with contextlib.redirect_stdout(io.StringIO()): load_commands({0!r})({0!r}, standalone_mode=False)"
    deferred = {"llmcalc.model.vision", "llmcalc.model.formats"}
    assert not modules_after(run.format([*KV_RUN, "-f", "json"])) & deferred
    assert "llmcalc.model.vision" in modules_after(run.format(["kv", "--preset", "llava-1.5-7b", "-f", "json"]))
    assert "llmcalc.model.formats" in modules_after(
        "from llmcalc.workload import Workload\nWorkload(weights_format={'default': 'int4'})")


def _run_json(code: str):
    """What `code`, run in a fresh interpreter, prints as JSON."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


FAMILIES = "import llmcalc.model.base as b\nfamilies = [f for f in b.Variant.__subclasses__() if 'kinds' in vars(f)]\n"
"""Code that finds every variant family (a direct subclass of Variant with its own `kinds`)."""


def test_variant_registry_lists_every_kind_with_its_module():
    """Each family's variant_modules names every kind defined anywhere in llmcalc/model/ with the module that
    defines it, and nothing else: a variant added without its line there (or with the wrong module) fails here."""
    defined, listed = _run_json(
        "import importlib, json, pkgutil, llmcalc.model as m\n"
        "for mod in pkgutil.iter_modules(m.__path__):\n    importlib.import_module(f'llmcalc.model.{mod.name}')\n"
        + FAMILIES + "print(json.dumps([{f.__name__: {k: c.__module__ for k, c in f.kinds.items()} for f in families},"
        "{f.__name__: f.variant_modules for f in families}]))")
    assert {"Attention", "FFN", "Positions", "Stack", "Projector"} <= set(defined)
    assert {"longformer", "dsa", "mamba2", "gated_deltanet", "cross"} <= set(defined["Attention"])
    assert defined == listed


def test_each_registered_kind_loads_from_its_module_alone():
    """From a process that imported only the spec (and the vision tower), every registered kind is found (variant)
    as a class of that kind defined in the module listed for it; looking one up imports that module and no other
    variant module; listing a family's kinds (errors, the JSON Schema) loads them all, in variant_modules' order."""
    first, found, ordered = _run_json(
        "import json, sys, llmcalc.model.spec, llmcalc.model.vision\n" + FAMILIES +
        f"lazy = {sorted(VARIANT_MODULES)!r}\n"
        "from llmcalc.model.embedding import Positions\n"
        "before = [m for m in lazy if m in sys.modules]\nPositions.variant('alibi')\n"
        "after = [m for m in lazy if m in sys.modules]\n"
        "found = [[f.__name__, k, m, c.__module__, c.model_fields['kind'].default] for f in families "
        "for k, m in f.variant_modules.items() for c in [f.variant(k)]]\n"
        "print(json.dumps([[before, after], found, [list(f.all_kinds()) == list(f.variant_modules) "
        "for f in families]]))")
    assert first == [[], ["llmcalc.model.positions"]]
    assert {f for f, *_ in found} == {"Attention", "FFN", "Positions", "Stack", "Projector"}
    assert all(module == where and kind == named for _, kind, module, where, named in found), found
    assert all(ordered)
    err = subprocess.run(  # an unknown kind's error lists every kind
        [sys.executable, "-c", "from llmcalc.inputs.presets import load_preset, spec_from_data\n"
         "data = load_preset('llama2-7b').model_dump(); data['attention']['kind'] = 'strode'\n"
         "spec_from_data(data, 'test')"],
        capture_output=True, text=True).stderr
    from llmcalc.model.attention import Attention

    assert ", ".join(map(repr, Attention.variant_modules)) in err, err


def test_model_and_report_modules_keep_annotations_as_objects():
    """Pydantic evaluates each string annotation of a class and its bases when the class is defined, at every
    command's start-up: the modules that define specs and reports do not turn annotations into strings."""
    modules = [*(ROOT / "llmcalc" / "model").glob("*.py"), *(ROOT / "llmcalc" / "reports").glob("*.py")]
    assert len(modules) > 20
    stringified = [p.name for p in modules if "from __future__ import annotations" in p.read_text().splitlines()]
    assert not stringified, stringified


def test_reports_leave_field_docstrings_to_the_schema():
    """Report classes are defined without reading their source: Pydantic's use_attribute_docstrings does it
    at class creation through inspect.getmodule (a scan of every loaded module, on every command's start-up);
    the docstrings become descriptions when `llmcalc schema` writes the schema (tests/test_schema.py checks
    the published schema, docs/schemas.md)."""
    from llmcalc.reports.base import Report
    from llmcalc.reports.gpus import GPURow

    assert not Report.model_config.get("use_attribute_docstrings")
    row = GPURow.model_json_schema(mode="serialization")["properties"]
    assert row["ridge_point"]["description"].startswith("bf16 FLOPs per byte")  # inherited from GPUFigures
    assert "description" not in row["bf16_flops"]


def test_core_imports_no_ui_or_torch():
    loaded = modules_after("import llmcalc.model.spec, llmcalc.costs.params, llmcalc.reports.base, llmcalc.inputs.hf, llmcalc.inputs.presets")
    assert not loaded & {"rich", "typer", *HEAVY}


def test_spec_is_frozen_and_workload_separate():
    from pydantic import ValidationError

    from llmcalc.inputs.presets import load_preset
    from llmcalc.model.spec import ModelSpec
    from llmcalc.workload import Workload

    spec = load_preset("llama2-7b")
    with pytest.raises(ValidationError):
        spec.d_model = 1
    assert not set(Workload.model_fields) & set(ModelSpec.model_fields)


def test_wheel_ships_presets(tmp_path: Path):
    """The wheel builds as a user's pip builds it (build isolation fetches the backend that pyproject.toml
    names) and carries every preset."""
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    presets = {"llmcalc/" + p.relative_to(ROOT).as_posix() for p in (ROOT / "presets").rglob("*.yaml")}
    assert any("/gpus/" in p for p in presets) and presets <= names
    packages = {p.parent.relative_to(ROOT).as_posix() + "/__init__.py" for p in (ROOT / "llmcalc").rglob("*.py")}
    assert packages <= names, packages - names  # every package of the checkout is in the wheel
    page = {"llmcalc/" + p.relative_to(ROOT / "llmcalc").as_posix() for p in (ROOT / "llmcalc" / "ui" / "static")
            .rglob("*") if p.is_file()}
    assert any(p.endswith("LICENSE") for p in page) and page <= names, page - names  # the page, its vendored files
    # installed in a fresh venv and run from elsewhere, it finds its presets inside the package
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    # the dependencies (typer, pydantic, ...) from this interpreter's site-packages, whether it is a venv or not;
    # a plain path line, so the checkout's editable-install hook there is not run
    site_dir = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    Path(site_dir, "parent_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check", str(wheel)],
                   check=True, timeout=300)
    r = subprocess.run([py, "-c", "import llmcalc.inputs.files as f, sys; from llmcalc.cli import main; "
                        "print(f.PRESETS); sys.argv = ['llmcalc', 'presets', '-f', 'json']; main()"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    where, listing = r.stdout.split("\n", 1)
    assert where.startswith(str(venv)) and where.endswith("llmcalc/presets"), where
    assert {row["name"] for row in json.loads(listing)} == {p.stem for p in (ROOT / "presets").glob("*.yaml")}


def test_the_test_extra_brings_no_torch():
    """`pip install -e ".[test]"` on a CPU-only machine must not pull a CUDA build of PyTorch: neither torch nor a
    package that requires it (bitsandbytes) is in the test extra; CI installs the CPU torch, then bitsandbytes."""
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["test"]
    names = {re.split(r"[<>=!\[ ;]", req, maxsplit=1)[0].lower() for req in extra}
    assert not names & {"torch", "bitsandbytes", "triton"}, names
