"""The layers point one way (docs/architecture.md): cli → views → costs → model; reports are plain data;
render reads reports and never imports costs; reference (torch) depends on the model, never the reverse.
Every import of the package is read from the source, those inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "llmcalc"
ALLOWED = {
    "errors": set(),
    "model": {"errors"},
    "workload": {"errors", "model"},
    "reports": set(),
    "inputs": {"errors", "model"},
    "costs": {"errors", "model", "workload", "reports"},
    "reference": {"errors", "model"},
    "views": {"errors", "model", "workload", "reports", "inputs", "costs", "reference"},
    "render": {"errors", "reports"},
    "api": {"errors", "model", "workload", "reports", "inputs", "costs", "views"},
    "ui": {"errors", "render"},
    "cli": {"errors", "model", "workload", "reports", "inputs", "costs", "views", "render", "api", "ui"},
    "__main__": {"cli"},
    "__init__": {"api", "errors", "inputs", "model"},
}
"""What each part of llmcalc may import besides itself."""


def part(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def imports() -> dict[str, set[str]]:
    """module → the llmcalc modules it imports, anywhere in its source."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        modules = {m.removesuffix(".py") for m in found if m.startswith("llmcalc.")}
        out[name] = {m for m in modules if (PACKAGE.parent / m.replace(".", "/")).with_suffix(".py").exists()
                     or (PACKAGE.parent / m.replace(".", "/") / "__init__.py").exists()}
    return out


GRAPH = imports()


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_one_way(module):
    here = part(module)
    wrong = {m for m in GRAPH[module] if part(m) != here and part(m) not in ALLOWED.get(here, set())}
    assert not wrong, f"{module} ({here}) imports {sorted(wrong)}; {here} may import {sorted(ALLOWED.get(here, []))}"


def test_no_import_circles():
    """No module reaches itself through the imports (package __init__ files that only document are leaves)."""
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for m in GRAPH.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    circles = sorted(m for m in GRAPH if m in reach(m))
    assert not circles, circles


def test_every_part_is_known():
    assert {part(m) for m in GRAPH} - {"__init__"} <= set(ALLOWED)


def variant_names() -> set[str]:
    """Every attention and FFN variant class (all_kinds loads the modules that define them)."""
    from llmcalc.model.attention import Attention
    from llmcalc.model.ffn import FFN

    Attention.all_kinds(), FFN.all_kinds()

    def below(cls: type) -> set[type]:
        return {cls} | {c for sub in cls.__subclasses__() for c in below(sub)}

    return {c.__name__ for base in (Attention, FFN) for c in below(base) if c.__module__.startswith("llmcalc.")}


def test_no_code_outside_the_model_asks_a_variant_its_type():
    """Variants own their behaviour: outside llmcalc/model/ no isinstance/issubclass names a variant class, and
    no cost or view compares a variant's `kind` (the torch reference maps kinds to its modules; render reads
    the `kind` fields of reports, not variants; a class may read its own, as the step form's Op its kind of work)."""
    names, found = variant_names(), []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("model/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
                used = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                used |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                found += [f"{rel}:{node.lineno} {name}" for name in used & names]
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "kind"
                    and getattr(node.left.value, "id", None) != "self"  # a class reading its own field (Op's kind)
                    and not rel.startswith(("reference/", "render/"))):  # render reads report fields
                found.append(f"{rel}:{node.lineno} .kind compared")
    assert names >= {"GQA", "MLA", "DSA", "MoE", "Dense"} and not found, found


def _texts(node: ast.AST) -> list[str]:
    """The literal text of every string in an expression (f-strings' literal parts too)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_errors_below_the_cli_name_fields_not_flags():
    """Below the CLI a user error names the field in the domain's words, marked `kv_dtype` (llmcalc/errors.py);
    the CLI writes its own flag there. No error raised outside cli/ spells a flag (--kv-dtype)."""
    import re

    flag = re.compile(r"(?<![\w-])--[a-z]")
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                    and getattr(node.exc.func, "id", None) == "UserError":
                found += [f"{path.name}:{node.lineno}" for t in _texts(node.exc) if flag.search(t)]
    assert not found, found


def test_the_cli_writes_its_flags_where_the_library_names_fields():
    import subprocess
    import sys

    from llmcalc.costs.parallel import Layout
    from llmcalc.errors import UserError
    from llmcalc.inputs.presets import load_preset

    with pytest.raises(UserError, match=r"^`tp`: 3 does not divide the 32 attention heads"):
        Layout(tp=3).check(load_preset("llama2-7b"), 1)
    r = subprocess.run([sys.executable, "-m", "llmcalc", "latency", "--preset", "llama2-7b", "--gpu", "h100-sxm",
                        "--tp", "3"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == "error: --tp: 3 does not divide the 32 attention heads; use a divisor of 32\n"
