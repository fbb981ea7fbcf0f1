"""Exact linear forms: a cost written once, evaluated at one point or compiled for a grid.

A `Lin` is c + Σ kᵢ·aᵢ with int coefficients over atoms: named variables (say T, the tokens of a
forward on one GPU) or `Floor(n, m)` = ⌊n / m⌋ of another form. The cost functions are plain integer
arithmetic (+, −, × by an int, // by an int), so running them once with variables in place of the
point's counts gives each cost as a form, with every rounding kept: ceil_div(x, m) = −(−x // m)
becomes −⌊−x / m⌋. `value(env)` substitutes ints and gives what the plain ints would have given.
A floor whose divisor divides every coefficient folds away: ⌊(c + m·Σ kᵢ·xᵢ) / m⌋ = Σ kᵢ·xᵢ + ⌊c / m⌋
for integer xᵢ.

An atom may also be any hashable object with `value(env)` and `variables`: a cost that is not linear in
the variables at all (the experts T tokens hit) is kept whole and evaluated at the point.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any


class Lin:
    """const + Σ coef·atom; immutable. Arithmetic with ints and other forms; // by a positive int."""

    __slots__ = ("terms", "const", "_hash")

    def __init__(self, terms: Mapping[Hashable, int] | None = None, const: int = 0):
        self.terms = {a: k for a, k in (terms or {}).items() if k}
        self.const = const
        self._hash: int | None = None

    def __add__(self, other: Lin | int) -> Lin:
        if isinstance(other, Lin):
            terms = dict(self.terms)
            for a, k in other.terms.items():
                terms[a] = terms.get(a, 0) + k
            return Lin(terms, self.const + other.const)
        if isinstance(other, int):
            return Lin(self.terms, self.const + other)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self) -> Lin:
        return Lin({a: -k for a, k in self.terms.items()}, -self.const)

    def __sub__(self, other: Lin | int) -> Lin:
        return self + -other if isinstance(other, (Lin, int)) else NotImplemented

    def __rsub__(self, other: int) -> Lin:
        return -self + other if isinstance(other, int) else NotImplemented

    def __mul__(self, other: int) -> Lin:
        if not isinstance(other, int):
            return NotImplemented  # a product of two forms is not linear
        return Lin({a: k * other for a, k in self.terms.items()}, self.const * other)

    __rmul__ = __mul__

    def __floordiv__(self, div: int) -> Lin:
        if not isinstance(div, int) or div <= 0:
            return NotImplemented
        if all(k % div == 0 for k in self.terms.values()):
            return Lin({a: k // div for a, k in self.terms.items()}, self.const // div)
        return Lin({Floor(self, div): 1})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lin) and self.terms == other.terms and self.const == other.const

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((frozenset(self.terms.items()), self.const))
        return self._hash

    def __repr__(self) -> str:
        parts = [f"{k}·{a}" for a, k in self.terms.items()]
        return " + ".join(parts + [str(self.const)] if self.const or not parts else parts)

    @property
    def variables(self) -> set[str]:
        """The named variables this form depends on, inside floors and atoms too."""
        out: set[str] = set()
        for a in self.terms:
            out |= {a} if isinstance(a, str) else a.variables
        return out

    def linear(self) -> bool:
        """Whether every atom is a named variable (no floor, no whole cost)."""
        return all(isinstance(a, str) for a in self.terms)

    def value(self, env: Mapping[str, int]) -> Any:
        """The form at a point: ints for every variable (a whole-cost atom may give a float)."""
        total = self.const
        for a, k in self.terms.items():
            total += k * (env[a] if isinstance(a, str) else a.value(env))
        return total

    def source(self, names: Mapping[Any, str], namespace: dict[str, Any]) -> str:
        """The form as a Python expression, each variable v written names[v]; an atom in `names` (a value
        computed once before) as its name, any other atom as its own source (its objects bound in `namespace`:
        compile the expression with it)."""
        parts = [str(self.const)] if self.const else []
        for a, k in self.terms.items():
            atom = f"({names[a]})" if isinstance(a, str) or a in names else a.source(names, namespace)
            parts.append(atom if k == 1 else f"{k}*{atom}")
        return "(" + (" + ".join(parts) or "0") + ")"

    def per(self, n: int) -> Lin:
        """The form divided by `n`, which divides every coefficient and the constant."""
        assert not self.const % n and all(not k % n for k in self.terms.values()), (self, n)
        return Lin({a: k // n for a, k in self.terms.items()}, self.const // n)

    def substitute(self, env: Mapping[str, Lin | int]) -> Lin:
        """The form with some variables replaced by forms or ints (floors re-folded)."""
        out = Lin(const=self.const)
        for a, k in self.terms.items():
            if isinstance(a, str):
                out = out + (env[a] if a in env else Lin({a: 1})) * k
            else:
                out = out + a.substitute(env) * k
        return out


class Floor:
    """⌊num / div⌋, an atom of a form."""

    __slots__ = ("num", "div")

    def __init__(self, num: Lin, div: int):
        self.num, self.div = num, div

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Floor) and self.div == other.div and self.num == other.num

    def __hash__(self) -> int:
        return hash((self.num, self.div))

    def __repr__(self) -> str:
        return f"⌊({self.num}) / {self.div}⌋"

    @property
    def variables(self) -> set[str]:
        return self.num.variables

    def value(self, env: Mapping[str, int]) -> int:
        return self.num.value(env) // self.div

    def source(self, names: Mapping[str, str], namespace: dict[str, Any]) -> str:
        return f"({self.num.source(names, namespace)} // {self.div})"

    def substitute(self, env: Mapping[str, Lin | int]) -> Lin | int:
        num = self.num.substitute(env)
        return num // self.div if num.terms else num.const // self.div


class Whole:
    """fn(x, *args) of one variable x, kept whole (a cost not linear in x) and evaluated at the point: an atom
    of a form. fn is a module-level function, so atoms with equal fn, variable and args are equal."""

    __slots__ = ("fn", "variable", "args")

    def __init__(self, fn: Callable[..., Any], variable: str, *args: Hashable):
        self.fn, self.variable, self.args = fn, variable, args

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Whole) and (self.fn, self.variable, self.args) == (
            other.fn, other.variable, other.args)

    def __hash__(self) -> int:
        return hash((self.fn, self.variable, self.args))

    def __repr__(self) -> str:
        return f"{self.fn.__name__}({self.variable}, {', '.join(map(repr, self.args))})"

    @property
    def variables(self) -> set[str]:
        return {self.variable}

    def value(self, env: Mapping[str, int]) -> Any:
        return self.fn(env[self.variable], *self.args)

    def source(self, names: Mapping[str, str], namespace: dict[str, Any]) -> str:
        """A direct call: fn and any argument that is not a plain number bound in `namespace`."""
        fn = f"_{self.fn.__name__}"
        namespace[fn] = self.fn
        args = [names[self.variable]]
        for a in self.args:
            if type(a) in (int, float, bool):
                args.append(repr(a))
            else:
                args.append(f"_arg{len(namespace)}")
                namespace[args[-1]] = a
        return f"{fn}({', '.join(args)})"

    def substitute(self, env: Mapping[str, Lin | int]) -> Lin:
        """The atom itself: its variable may not be replaced (fn is not linear in it)."""
        if self.variable in env:
            raise ValueError(f"{self!r}: {self.variable} cannot be substituted in a whole cost")
        return Lin({self: 1})


def var(name: str) -> Lin:
    """The variable `name` as a form."""
    return Lin({name: 1})


def value(x: Lin | int, env: Mapping[str, int]) -> Any:
    """x at the point `env` (an int stays itself)."""
    return x.value(env) if isinstance(x, Lin) else x


def source(x: Lin | int, names: Mapping[str, str], namespace: dict[str, Any]) -> str:
    """x as a Python expression (Lin.source; an int as itself)."""
    return x.source(names, namespace) if isinstance(x, Lin) else str(x)


def per(x: Lin | int, n: int) -> Lin | int:
    """x divided by `n`, which divides it exactly (Lin.per)."""
    return x.per(n) if isinstance(x, Lin) else x // n
