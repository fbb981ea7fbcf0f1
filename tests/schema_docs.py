"""Writes docs/schemas.md from the JSON Schemas `llmcalc schema` publishes (run this file to refresh
it; tests/test_schema.py fails while the page is stale)."""

from __future__ import annotations

from pathlib import Path

from llmcalc.cli import commands
from llmcalc.reports.schema import COMMAND_REPORTS, command_schema

PAGE = Path(__file__).parents[1] / "docs" / "schemas.md"
HEAD = """# JSON output

Every command's `--format json` output is a Pydantic model from `llmcalc/reports/base.py`; `llmcalc schema
COMMAND` prints its JSON Schema (draft 2020-12) and `llmcalc schema` all of them. Counts, bytes and
FLOPs are exact integers (bytes in bytes, never GB); times are seconds; rates per second. YAML carries
the same tree; CSV carries the report's main list of rows (the first list below) as `item` rows, each led
by the report's model and workload fields, then one `summary` row of its scalar fields
([commands/README.md](commands/README.md#output)). This page is generated from the schemas by `tests/schema_docs.py`.
"""


def _type(prop: dict | bool) -> str:
    if prop is True:
        return "any"
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[1]
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if prop.get("type") == "array":
        return f"list of {_type(prop['items'])}"
    if prop.get("type") == "object" and "additionalProperties" in prop:
        return f"map of {_type(prop['additionalProperties'])}"
    return prop.get("type", "any")


def _fields(schema: dict) -> list[str]:
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, prop in schema["properties"].items():
        text = " ".join(prop.get("description", "").split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(prop)} | {text} |")
    return rows


def render() -> str:
    out = [HEAD]
    shown: dict[str, str] = {}  # a report shown under an earlier command (run's reports): name ↦ that command
    order = [c for c in commands() if c in COMMAND_REPORTS]  # as `llmcalc --help` and `llmcalc schema` list them
    for command in order:
        schema = command_schema(command)
        defs = schema.get("$defs", {})
        forms = schema.get("anyOf", [schema])  # a command with a one-item form (presets NAME) has two
        out += [f"## `llmcalc {command}`", ""]
        tops = []
        for i, form in enumerate(forms):
            top = form["items"] if form.get("type") == "array" else form
            if "$ref" in top:
                top = defs[top["$ref"].rsplit("/", 1)[1]]
            shape = "a list of " if form.get("type") == "array" else ""
            lead = ("with a NAME: " if i else "") + f"{shape}`{top['title']}`: "
            out += [lead + " ".join(top.get("description", "").split()), "", *_fields(top), ""]
            tops.append(top)
            shown.setdefault(top["title"], command)
        earlier = sorted({shown[name] for name in defs if shown.get(name, command) != command},
                         key=order.index)
        for name, sub in defs.items():
            if all(sub is not top for top in tops) and name not in shown:
                out += [f"`{name}`: " + " ".join(sub.get("description", "").split()), "", *_fields(sub), ""]
                shown[name] = command
        if earlier:
            out += ["Its reports are described above, as the JSON of " + ", ".join(f"`llmcalc {c}`" for c in earlier)
                    + ".", ""]
    return "\n".join(out)


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE}")
