"""Inputs: the safe YAML/JSON reader, model and GPU presets, Hugging Face config.json import, count and grid
parsing."""
