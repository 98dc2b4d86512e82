"""The field types of the config tables (:mod:`.config`, :mod:`.samplers`): each says in words what it allows, for
the error messages, and :class:`Table`, the base of every table (unknown keys refused, values strict)."""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field


def expect(text: str) -> dict:
    """A Field's keyword arguments that say, for the error messages, what it allows."""
    return {"json_schema_extra": {"expect": text}}


Count = Annotated[int, Field(ge=1, **expect("an integer >= 1"))]
Count0 = Annotated[int, Field(ge=0, **expect("an integer >= 0"))]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, **expect("a finite number > 0"))]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False, **expect("a finite number >= 0"))]
Probability = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False, **expect("a finite number > 0 and <= 1"))]
Shift = Annotated[float, Field(ge=0, lt=2, allow_inf_nan=False, **expect("a number >= 0 and < 2"))]
Text = Annotated[str, Field(min_length=1, **expect("a non-empty string"))]
Flag = Annotated[bool, Field(**expect("true or false"))]


def _listed(value):
    return value if isinstance(value, list) else [value]


def _distinct(values: list) -> list:
    if not values:
        raise ValueError("expected an integer or a non-empty list of integers")
    if len(set(values)) != len(values):
        raise ValueError("the list has repeated entries")
    return values


def OneOrMany(item):
    """One value or a non-empty list of distinct values (a sweep), read as a list."""
    return Annotated[list[item], BeforeValidator(_listed), AfterValidator(_distinct)]


class Table(BaseModel):
    """A table of a config: unknown keys are refused, values are not coerced, defaults are checked."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True)
