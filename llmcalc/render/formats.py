"""JSON, YAML and CSV: the report's fields as they are (exact ints, UTF-8 text)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence

from pydantic import BaseModel

ROW_CONTEXT = ("model", "batch", "seq", "gen", "gpu", "kv_dtype", "mode", "device", "reference", "preset")
"""A report's scalar fields that lead each of its CSV rows."""


def write_data(report: BaseModel | Sequence[BaseModel], fmt: str) -> None:
    """JSON (indented) or YAML (block style, fields in order, Unicode as is). A preset in full is written as
    YAML that `--config` loads: its spec, the derived figures as comments above it."""
    data = [r.model_dump(mode="json") for r in report] if isinstance(report, list) else report.model_dump(mode="json")
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif type(report).__name__ == "PresetReport":
        sys.stdout.write(spec_document(report))
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True))


def spec_document(r) -> str:
    """A preset as a spec file: `name`, `source` and every field, led by comments with what follows from it."""
    import yaml

    kv = (f"# KV cache: {r.kv_elements_per_token:,} elements, {r.kv_bytes_per_token:,} bytes (bf16) per token, "
          "all layers" if r.kv_bytes_per_token is not None else "# KV cache: not modelled for this model")
    head = [f"# {r.name}: {r.total:,} parameters, {r.active:,} active per token", kv,
            "# save this and edit it, then: llmcalc params --config FILE.yaml"]
    body = yaml.safe_dump({"name": r.name, "source": r.source} | r.spec, sort_keys=False, width=120,
                          allow_unicode=True)
    return "\n".join(head) + "\n" + body


def csv_rows(report: BaseModel | Sequence[BaseModel]) -> list[dict]:
    """The report's table rows as flat dicts: a list of rows as it is; a report's main list of rows
    (its first list of models, e.g. `breakdown`) each led by the report's scalar fields that
    identify it (model, batch, seq, ...); a report with no such list as one row of its scalars."""
    if isinstance(report, list):
        return [_flat(r.model_dump(mode="json")) for r in report]
    data = report.model_dump(mode="json")
    lists = [k for k, v in data.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    scalars = {k: v for k, v in data.items() if not isinstance(v, (list, dict)) and k != "formula"}
    if not lists:
        return [scalars]
    key = lists[0]
    keep = {k: v for k, v in scalars.items() if k in ROW_CONTEXT}
    return [keep | _flat(row) for row in data[key]] if isinstance(getattr(report, key)[0], BaseModel) else [scalars]


def _flat(row: dict) -> dict:
    """Nested mappings become `outer.inner` columns; lists become `;`-joined text."""
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out |= {f"{k}.{kk}": vv for kk, vv in _flat(v).items()}
        elif isinstance(v, list):
            out[k] = ";".join(map(str, v))
        else:
            out[k] = v
    return out


def write_csv(report: BaseModel | Sequence[BaseModel]) -> None:
    """RFC 4180 CSV with a header of every column seen, in first-seen order."""
    rows = csv_rows(report)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    w = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
