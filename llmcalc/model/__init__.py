"""The model: `ModelSpec`, its base types, and every variant (attention, FFN, norm, position) as one class that
answers everything the rest of the code asks of it. Imports nothing else of llmcalc but errors."""
