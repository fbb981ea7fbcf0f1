"""Shared base for every spec and block: frozen, strict Pydantic models, the registry of variant kinds, and fields
whose model is defined only when a value of it is given (`Deferred`)."""

import json
from importlib import import_module
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, PydanticKnownError, core_schema

from llmcalc.errors import clip

MAX_SIZE = 2**40
"""Sanity bound on every size and count of a model or workload (≈1.1·10^12: no vocabulary, width,
context or batch comes near it); larger ones are refused, not computed."""
AMOUNT_MAX = 1e40
"""Largest model size, token count or FLOP budget read or worked out (`scale`), far past any training run's (Llama 3
405B: 3.8 × 10^25 FLOPs, Dubey et al. 2024)."""
SHARE_MIN = 1e-6
"""The smallest share of a peak or of a GPU's memory accepted (a millionth): a time divides by its share, and one
below a normal float's range (1e-320) would divide to infinity."""
PosInt = Annotated[int, Field(gt=0, le=MAX_SIZE, strict=True)]
"""A positive int up to MAX_SIZE; bools and floats are refused, never coerced."""
NonNegInt = Annotated[int, Field(ge=0, le=MAX_SIZE, strict=True)]
MAX_GROUP = 2**20
"""The largest group size of a weight format (weights per scale, llmcalc/model/formats.py): wider than any matrix's
input (the widest FFN or vocabulary is ~2^18), and a group at least a row's width is one scale per row (-grow), so a
larger one only names the same format."""

def _printable(text: str) -> str:
    """`text` when it holds no control character (an escape sequence would drive the terminal a table is printed
    on, a newline split its line), else a PydanticCustomError naming the first."""
    bad = next((c for c in text if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        raise PydanticCustomError("name_text", "holds the control character {char}; write it in printable characters",
                                  {"char": repr(bad)})
    return text


Name = Annotated[str, AfterValidator(_printable)]
"""A name printed in tables and headlines: text with no control character."""

Parts = dict[str, int]
"""Named parameter counts of one block, e.g. {"q": 16777216, "k": ...}."""


class Frozen(BaseModel):
    """Immutable, rejects unknown fields, validates defaults too; every float field refuses NaN and ±inf (whatever
    reader or caller built it), so no non-finite figure reaches a cost or an output, and a bool or a string where
    only a number goes (lax validation would read `true` as 1.0 and "80" as 80.0)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, defer_build=True,
                              allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _a_number_is_a_number(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, key, within in _number_fields(cls):
                value = data.get(key, data.get(name))
                entries = ([(f"{key}.{k}", v) for k, v in value.items()] if within is dict and isinstance(value, dict)
                           else [(f"{key}[{i}]", v) for i, v in enumerate(value)]
                           if within is list and isinstance(value, list) else [] if within else [(key, value)])
                for at, v in entries:
                    if isinstance(v, (bool, str)):
                        raise PydanticCustomError("number_type", "{value} is not a number",  # errors.py names it
                                                  {"field": at, "value": clip(json.dumps(v))})
        return data


_NUMBER_FIELDS: dict[type, tuple[tuple[str, str, type | None], ...]] = {}


def _number_fields(cls: type[BaseModel]) -> tuple[tuple[str, str, type | None], ...]:
    """The fields of `cls` that take a float and neither a bool nor a string, each (name, the key a mapping gives
    it by, dict or list where the floats are a mapping's values or a list's items, else None), worked out once per
    class."""
    got = _NUMBER_FIELDS.get(cls)
    if got is None:
        def kinds(t: Any) -> set:
            args = get_args(t)
            return set().union(*map(kinds, args)) if args and get_origin(t) is not Literal else {t}

        def within(t: Any) -> type | None:
            origin = get_origin(t)
            if origin in (dict, list):
                return origin
            return next((w for a in get_args(t) if (w := within(a))), None) if origin is not Literal else None

        def numbers(t: Any) -> set:  # the kinds of a container's values, or of the field itself
            args = get_args(t)
            if get_origin(t) is dict:
                return kinds(args[1])
            return set().union(*map(numbers, args)) if args and get_origin(t) is not Literal else {t}

        got = _NUMBER_FIELDS[cls] = tuple(
            (name, f.alias or name, within(f.annotation)) for name, f in cls.model_fields.items()
            if float in (k := numbers(f.annotation)) and not k & {bool, str})
    return got


class Variant(Frozen):
    """One kind of a block family (attention, FFN): a class whose `kind` Literal names it.

    Defining a subclass registers it in its family's `kinds` under its kind, so a spec accepts it
    (`ByKind`); a subclass that keeps its parent's kind is that kind, not a new one. `explain_legend` gives
    the meaning of the explain symbols the variant adds.

    A family's `variant_modules` names, for each kind of the package, the module that defines its class: that
    module is imported only when a spec names the kind (`variant`) or every kind is listed (`all_kinds`), so a
    spec never pays for defining the classes of kinds it does not use (start-up, docs/performance.md). A variant
    of the package is its class plus its one line there (tests/test_imports_and_packaging.py checks that every
    kind is listed with its module); one defined elsewhere registers itself when its module is imported. `kinds`
    holds the kinds registered so far."""

    kinds: ClassVar[dict[str, type["Variant"]]]
    variant_modules: ClassVar[dict[str, str]] = {}
    """Every kind of the family in the package: the module defining its class (see the class), in the order
    errors list the kinds."""
    explain_legend: ClassVar[dict[str, str]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        field = cls.model_fields.get("kind")
        if field is None:  # a family's root
            return
        kind, taken = field.default, cls.kinds.get(field.default)
        if taken is not None and issubclass(cls, taken):
            return
        if taken is not None:
            raise TypeError(f"kind {kind!r} of {cls.__qualname__} is taken by {taken.__qualname__}; pick another")
        cls.kinds[kind] = cls

    @classmethod
    def all_kinds(cls) -> dict[str, type["Variant"]]:
        """Every kind of the family, by name, in variant_modules' order (then any defined outside the package):
        every variant module imported first."""
        for module in dict.fromkeys(cls.variant_modules.values()):
            import_module(module)
        return {kind: cls.kinds[kind] for kind in cls.variant_modules if kind in cls.kinds} | cls.kinds

    @classmethod
    def variant(cls, kind: str) -> type["Variant"] | None:
        """The class of `kind` in this family (None: no such kind); the module variant_modules names for it is
        imported if it is not registered yet, and no other."""
        if kind not in cls.kinds and kind in cls.variant_modules:
            import_module(cls.variant_modules[kind])
        return cls.kinds.get(kind)


class ByKind:
    """Annotation of a field that holds any registered variant of its family, picked by the input's `kind`:
    `Annotated[Attention, ByKind()]`. Errors read as pydantic's discriminated unions' (the field, then
    the valid kinds); the JSON Schema is the union of the family's kinds when it is generated. Only the
    class of the kind given is built, and the family's variant modules are loaded only for a kind not yet
    registered (Variant)."""

    def __get_pydantic_core_schema__(self, family: type[Variant], handler: GetCoreSchemaHandler) -> CoreSchema:
        def validate(value: Any) -> Variant:
            if isinstance(value, family):
                return value
            if not isinstance(value, dict):
                raise PydanticKnownError("model_attributes_type")
            if "kind" not in value:
                raise PydanticKnownError("union_tag_not_found", {"discriminator": "'kind'"})
            tag = value["kind"]
            cls = family.variant(tag) if isinstance(tag, str) else None
            if cls is None:
                raise PydanticKnownError("union_tag_invalid", {
                    "discriminator": "'kind'", "tag": str(tag),
                    "expected_tags": ", ".join(map(repr, family.all_kinds()))})
            return cls.model_validate(value)

        return core_schema.no_info_plain_validator_function(validate, metadata={"family": family})

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        family = schema["metadata"]["family"]
        choices = {kind: cls.__pydantic_core_schema__ for kind, cls in family.all_kinds().items()}
        return handler(core_schema.tagged_union_schema(choices, discriminator="kind"))


class Deferred:
    """Annotation of an optional field whose model lives in a module of its own, imported only when a value other
    than None is validated or the JSON Schema is written: `vision: Annotated[object, Deferred("llmcalc.model.vision",
    "VisionTowerSpec")] = None` holds None or what `VisionTowerSpec | None` holds, validated, reported (errors under
    the field) and dumped as that type would be; its JSON Schema is that type's or null (titled with the field's
    name). A spec or workload without one never pays for defining the module's classes (start-up,
    docs/performance.md); `target` is the type itself."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name
        self._adapter: Any = None

    @property
    def target(self) -> Any:
        """The type named, its module imported."""
        return getattr(import_module(self.module), self.name)

    @property
    def adapter(self) -> Any:
        """A pydantic TypeAdapter of `target`, built on first use."""
        if self._adapter is None:
            from pydantic import TypeAdapter

            self._adapter = TypeAdapter(self.target)
        return self._adapter

    def validate(self, value: Any) -> Any:
        """None as it is; anything else validated as `target`: a model by its own model_validate, which builds the
        class (a dump reads an instance's own serializer), another type by its TypeAdapter."""
        if value is None:
            return None
        target = self.target
        if isinstance(target, type) and issubclass(target, BaseModel):
            return target.model_validate(value)
        return self.adapter.validate_python(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(self.validate)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(core_schema.nullable_schema(self.adapter.core_schema))
