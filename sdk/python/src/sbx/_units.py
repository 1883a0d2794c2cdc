"""Sizes, durations and times in the forms the REST API uses.

Requests carry durations as Go duration strings ("10m", "1.5s") and sizes as
integer bytes; the SDK also accepts Python's forms (seconds, ``timedelta``)
and size strings with a binary unit ("512m", "1GiB"), parsed the way the
server parses them, so a bad value fails here, before any request is sent.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Union

#: A size: bytes, or a string with a binary unit ("512m", "1GiB", "64k").
Size = Union[int, str]
#: A duration: seconds, a ``timedelta``, or a Go duration string ("90s", "1h30m").
Duration = Union[int, float, timedelta, str]

_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]?)(i?b)?\s*$")
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_DURATION_UNIT = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}

_TIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$")


def parse_size(value: Size, what: str = "size") -> int:
    """Bytes of ``value``: an int, or a string with an optional binary unit
    (k, m, g, t, with or without "b" or "ib"; "512m" is 512 MiB).

    Raises ValueError for negative or malformed values and TypeError for
    other types."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{what}: want bytes (int) or a string like '512m', not {type(value).__name__}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what} {value}: must not be negative")
        return value
    m = _SIZE_RE.match(value.lower())
    if not m:
        raise ValueError(f"{what} {value!r}: want bytes or a number with k, m, g or t, like '512m'")
    n = float(m.group(1)) * _SIZE_MULT[m.group(2)]
    if n > 1 << 62:
        raise ValueError(f"{what} {value!r} is too large")
    return int(n)


def duration_seconds(value: Duration, what: str = "duration") -> float:
    """Seconds of ``value``: seconds, a ``timedelta`` or a Go duration string.

    Raises ValueError for negative or malformed values and TypeError for
    other types."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: want seconds, a timedelta or a string like '10m', not bool")
    if isinstance(value, timedelta):
        secs = value.total_seconds()
    elif isinstance(value, (int, float)):
        secs = float(value)
    elif isinstance(value, str):
        secs = _parse_go_duration(value, what)
    else:
        raise TypeError(f"{what}: want seconds, a timedelta or a string like '10m', not {type(value).__name__}")
    if math.isnan(secs) or math.isinf(secs) or secs < 0:
        raise ValueError(f"{what} {value!r}: must be a finite, non-negative duration")
    return secs


def _parse_go_duration(s: str, what: str) -> float:
    text = s.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if not m or m.group(1) in ("", "."):
            raise ValueError(f"{what} {s!r}: want a duration like '90s', '10m' or '1h30m'")
        total += float(m.group(1)) * _DURATION_UNIT[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError(f"{what} {s!r}: want a duration like '90s', '10m' or '1h30m'")
    return total


def lease_seconds(value: Duration) -> float:
    """Seconds of an owner lease: a duration of at least 1 s (the server's
    shortest)."""
    secs = duration_seconds(value, "lease")
    if secs < 1:
        raise ValueError(f"lease {value!r}: must be at least 1 s")
    return secs


def go_duration(value: Duration, what: str = "duration") -> str:
    """``value`` as a Go duration string, the form requests carry ("3600s")."""
    secs = duration_seconds(value, what)
    text = f"{secs:.9f}".rstrip("0").rstrip(".")
    return (text or "0") + "s"


def parse_time(value: object) -> datetime | None:
    """A timezone-aware datetime of an RFC 3339 time as the server writes it
    (any number of fraction digits), or None for a missing or zero time."""
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None
    m = _TIME_RE.match(value)
    if not m:
        return None
    base, frac, zone = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    dt = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(microsecond=micro)
    if zone == "Z":
        return dt.replace(tzinfo=timezone.utc)
    sign = 1 if zone[0] == "+" else -1
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    return dt.replace(tzinfo=timezone(sign * timedelta(hours=hours, minutes=minutes)))
