"""``valid-after`` / ``valid-before`` times, parsed as OpenSSH does.

Layer: signing (pure but for the local time zone).  OpenSSH
``parse_absolute_time`` (misc.c): ``YYYYMMDD``, ``YYYYMMDDHHMM`` or
``YYYYMMDDHHMMSS``, then an optional ``Z`` or ``UTC`` (any case) meaning UTC;
without it the time is local (``mktime``).  A time before the epoch is
invalid.  Times are kept as integer seconds since the epoch, so a date near
year 9999 never overflows a ``datetime`` in any time zone; one beyond what
the platform's ``mktime`` can represent is clamped to ``FAR_FUTURE``.
"""

from __future__ import annotations

import calendar
import time

FAR_FUTURE = 253402300799  # 9999-12-31T23:59:59Z
_FORMATS = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}


def parse_ssh_time(text: str) -> int:
    """Seconds since the epoch; ``ValueError`` says why ``text`` is not a time."""
    body, utc = text, False
    if len(body) > 1 and body[-1] in "Zz":
        body, utc = body[:-1], True
    elif len(body) > 3 and body[-3:].upper() == "UTC":
        body, utc = body[:-3], True
    fmt = _FORMATS.get(len(body))
    if fmt is None or not body.isascii() or not body.isdigit():
        raise ValueError(f"time {text!r} is not YYYYMMDD[HHMM[SS]][Z]")
    try:
        parts = time.strptime(body, fmt)
    except ValueError:
        raise ValueError(f"time {text!r} is not a calendar date and time") from None
    if utc:
        seconds = calendar.timegm(parts)
    else:
        try:
            seconds = int(time.mktime((*parts[:8], -1)))
        except (OverflowError, ValueError):
            seconds = FAR_FUTURE if parts.tm_year > 1970 else -1
    if seconds < 0:
        raise ValueError(f"time {text!r} is before 1970")
    return min(seconds, FAR_FUTURE)
