"""Formula text the variants write their `llmcalc explain` terms in (llmcalc/views/explain.py evaluates it).

Symbols are names (d, H, h, …; see llmcalc/views/formula.py's LEGEND and each variant's explain_legend),
joined by · × + − / // and min, max.
"""


def prod(*factors: str) -> str:
    """Factors joined by ·, each holding a top-level + − / in parentheses."""
    return " · ".join(f"({f})" if _loose(f) else f for f in factors)


def _loose(f: str) -> bool:
    depth = 0
    for ch in f:
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and ch in "+−/":
            return True
    return False


def linear(n_in: str, n_out: str, bias: bool) -> str:
    """Parameters of a projection: n_in · n_out (+ n_out)."""
    return f"{n_in} · {n_out}" + (f" + {n_out}" if bias else "")


def cached_bytes(whole: tuple[str, ...], rounded: tuple[str, ...], layers: str, kept: str, bits: int) -> str:
    """Bytes of one layer kind's cache, `kept` tokens per sequence: the whole-byte product `whole`
    (with B, kept and bytes), or for sub-byte dtypes per layer ⌈`rounded` elements · B · kept · bits / 8⌉
    (as the variants' cache_bytes round)."""
    if bits % 8 == 0:
        return prod(*whole, "B", kept, "bytes")
    return prod(layers, f"({prod(*rounded, 'B', kept, 'bits')} + 7) // 8")
