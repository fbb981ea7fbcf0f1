"""A PyTorch reference decoder built from a ModelSpec, and measurements of it (needs torch)."""
