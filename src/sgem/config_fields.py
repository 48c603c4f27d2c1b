"""Typed, range-checked config fields shared by every config dataclass (TrainConfig,
SurrogateConfig, SearchConfig): a YAML slip (a quoted number, null, 3e-3 read as a string)
fails with a message naming the field, the allowed values and the fix."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .errors import SgemUserError


def _default_of(cfg: object, name: str) -> object:
    f = cfg.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if f.default is not dataclasses.MISSING:
        return f.default
    return None


def _field_error(cfg: object, name: str, value: object, allowed: str) -> SgemUserError:
    """'TrainConfig.lr = 0 is not allowed: it must be a number > 0' plus a hint for the
    usual YAML slips (a quoted number, null, a float where an integer is needed)."""
    hint = ""
    if value is None:
        hint = (
            f"; null/None is not a value here: remove the key to use the default "
            f"({_default_of(cfg, name)!r})"
        )
    elif isinstance(value, str):
        try:
            float(value)
        except ValueError:
            pass
        else:
            hint = " (a quoted string: write the number without quotes)"
            if "e" in value.lower() and "." not in value:
                hint = (
                    " (a string: YAML reads an exponent without a dot, like 3e-3, as a string; "
                    "write 3.0e-3 or 0.003)"
                )
    elif isinstance(value, float | np.floating) and "integer" in allowed:
        hint = f" (write {int(value)})" if float(value).is_integer() else " (a whole number)"
    kind = type(value).__name__
    return SgemUserError(
        f"{type(cfg).__name__}.{name} = {value!r} ({kind}) is not allowed: it must be "
        f"{allowed}{hint}"
    )


def check_int(cfg: object, name: str, minimum: int, optional: bool = False) -> None:
    """`cfg.name` is an integer (not a bool, float or string) >= `minimum` (or None)."""
    value = getattr(cfg, name)
    allowed = f"an integer >= {minimum}" + (" or null (None)" if optional else "")
    if value is None and optional:
        return
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise _field_error(cfg, name, value, allowed)
    if value < minimum:
        raise _field_error(cfg, name, value, allowed)
    if not isinstance(value, int):  # a numpy integer: a plain int serialises everywhere
        object.__setattr__(cfg, name, int(value))


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
    if high == math.inf:
        return f"{'>' if low_open else '>='} {low:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def check_float(
    cfg: object,
    name: str,
    low: float,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
    optional: bool = False,
) -> None:
    """`cfg.name` is a finite real number (int or float, not a bool or string) in the
    interval from `low` to `high` (open ends where asked), or None when `optional`."""
    value = getattr(cfg, name)
    allowed = f"a finite number {_interval(low, high, low_open, high_open)}" + (
        " or null (None)" if optional else ""
    )
    if value is None and optional:
        return
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise _field_error(cfg, name, value, allowed)
    v = float(value)
    if (
        not math.isfinite(v)
        or (v <= low if low_open else v < low)
        or (v >= high if high_open else v > high)
    ):
        raise _field_error(cfg, name, value, allowed)
    if isinstance(value, np.number):  # numpy scalars: plain Python numbers serialise everywhere
        object.__setattr__(cfg, name, value.item())


def check_bool(cfg: object, name: str) -> None:
    """`cfg.name` is a real boolean: the string "no" is not False."""
    value = getattr(cfg, name)
    if not isinstance(value, bool | np.bool_):
        raise _field_error(cfg, name, value, "true or false (a boolean, not a string or number)")
    object.__setattr__(cfg, name, bool(value))


def check_choice(cfg: object, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, str) or value not in choices:
        raise _field_error(cfg, name, value, f"one of {list(choices)}")


def config_from_dict(cls: type, data: object, where: str):
    """Build the config dataclass `cls` from a mapping (a YAML section), refusing unknown
    keys by name; `where` names the section in messages (e.g. "search.train")."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise SgemUserError(
            f"{where} must be a mapping of {cls.__name__} fields, got {data!r} "
            f"({type(data).__name__})"
        )
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in known]
    if unknown:
        raise SgemUserError(
            f"unknown key(s) {sorted(map(str, unknown))} in {where}; known keys: {known}"
        )
    try:
        return cls(**data)
    except SgemUserError as exc:
        if "(config section " in str(exc):  # a nested section already said where
            raise
        raise SgemUserError(f"{exc} (config section '{where}')") from None
