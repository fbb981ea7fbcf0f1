"""Reports: the typed results (Pydantic), plain data, one module per command, loaded by the command that runs.

No module here uses `from __future__ import annotations`, so Pydantic reads the field types as objects and
evaluates no strings when a report class is defined (start-up, llmcalc/model/__init__.py)."""
