"""The model: `ModelSpec`, its base types, and every variant (attention, FFN, norm, position) as one class that
answers everything the rest of the code asks of it. Imports nothing else of llmcalc but errors.

Like llmcalc/reports, these modules define their Pydantic models without `from __future__ import annotations`:
Pydantic would evaluate every string annotation of a class and of its bases when the class is defined, a
cost each command pays at start-up (docs/performance.md). A name defined later is quoted where it is used."""
