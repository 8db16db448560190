"""Argument validation: every public entry point rejects bad input here, at the call.

Each helper raises :class:`ValueError` whose message names the argument and the accepted range,
e.g. ``num_classes must be an integer >= 2, got 1``. The CLI turns these into one-line errors with
exit code 2.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "require_int",
    "require_real",
    "require_choice",
    "require_finite_array",
    "require_keys",
    "one_line_error",
]

_Choice = TypeVar("_Choice", bound=str)


def require_int(name: str, value: Any, *, min_value: int | None = None, max_value: int | None = None) -> int:
    """Return ``value`` as an int, or raise ValueError naming ``name`` and the accepted range."""
    rng = _range_text(min_value, max_value)
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer{rng}, got {value!r}")
    value = int(value)
    if (min_value is not None and value < min_value) or (max_value is not None and value > max_value):
        raise ValueError(f"{name} must be an integer{rng}, got {value}")
    return value


def require_real(
    name: str,
    value: Any,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float, or raise ValueError naming ``name`` and the range."""
    lo = "" if min_value is None else (f" >= {min_value}" if min_inclusive else f" > {min_value}")
    hi = "" if max_value is None else (f" <= {max_value}" if max_inclusive else f" < {max_value}")
    rng = lo + ("," if lo and hi else "") + hi
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a finite real number{rng}, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number{rng}, got {value}")
    if min_value is not None and (value < min_value or (not min_inclusive and value == min_value)):
        raise ValueError(f"{name} must be a finite real number{rng}, got {value}")
    if max_value is not None and (value > max_value or (not max_inclusive and value == max_value)):
        raise ValueError(f"{name} must be a finite real number{rng}, got {value}")
    return value


def require_choice(name: str, value: object, choices: Iterable[_Choice]) -> _Choice:
    """Return ``value`` if it is one of ``choices``, else raise ValueError listing them.

    The result has the type of the choices, so a tuple of a ``Literal`` vocabulary
    (``SETTINGS``, ``PSI_NAMES``...) narrows a plain ``str`` to that ``Literal``.
    """
    allowed = tuple(choices)
    for choice in allowed:
        if value == choice:
            return choice
    raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def require_finite_array(name: str, array: Any) -> None:
    """Raise ValueError if a numpy array or torch tensor ``array`` holds NaN or inf."""
    import numpy as np

    if hasattr(array, "detach"):  # torch tensor, without importing torch
        finite = bool(array.detach().isfinite().all())
    else:
        finite = bool(np.isfinite(np.asarray(array, dtype=float)).all())
    if not finite:
        raise ValueError(f"{name} must contain only finite values (found NaN or inf)")


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo}, {hi}]"
    if lo is not None:
        return f" >= {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""


def require_keys(kind: str, data: object, *, accepted: Iterable[str], required: Iterable[str] = ()) -> None:
    """Check a record read back from JSON: an object whose keys are all ``accepted`` and include ``required``.

    The one check behind every strict ``from_dict`` of ncgeom and proofs_check (run records, metrics,
    verify checks and reports): ValueError naming ``kind`` and the unknown or missing keys otherwise.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{kind}: expected a JSON object, got {type(data).__name__}")
    accepted = set(accepted)
    unknown = sorted(set(data) - accepted)
    if unknown:
        raise ValueError(f"{kind}: unknown key(s) {', '.join(map(str, unknown))}; accepted: {', '.join(sorted(accepted))}")
    missing = sorted(set(required) - set(data))
    if missing:
        raise ValueError(f"{kind}: missing key(s) {', '.join(missing)}")


def one_line_error(exc: BaseException, file: Path | None = None) -> str:
    """The exception as one line (at most 300 characters): its type unless a plain ValueError, without the path of
    ``file`` (the caller names the file already; its base name stays)."""
    text = str(exc) if file is None else str(exc).replace(f"{file}: ", "").replace(str(file), file.name)
    kind = "" if type(exc) is ValueError else f"{type(exc).__name__}: "
    return " ".join(f"{kind}{text}".split())[:300]
