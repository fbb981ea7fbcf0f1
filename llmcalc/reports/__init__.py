"""Reports: the typed results (Pydantic), plain data, one module per command, loaded by the command that runs."""
