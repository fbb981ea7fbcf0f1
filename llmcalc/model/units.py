"""The arithmetic every count shares: a multiply-add's FLOPs, rounding a share up, the bytes of packed elements.

Each works on plain ints and on the exact linear forms the step cost is written in (llmcalc/costs/form.py):
ceil_div(x, m) = −⌊−x / m⌋ keeps its rounding in either.
"""

MAC = 2
"""FLOPs per multiply-add."""


def ceil_div(a, b: int):
    """⌈a / b⌉ for a positive b: the larger share when `a` is split `b` ways (an int, or a form)."""
    return -(-a // b)


def packed_bytes(elements, bits: int):
    """Bytes that `elements` values of `bits` bits each take, packed and rounded up to a whole byte."""
    return ceil_div(elements * bits, 8)
