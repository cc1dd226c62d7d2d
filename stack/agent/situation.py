"""What a person at this computer sees without asking: the date, the time, the machine.

A 1.5B model asked "how many days until new year?" or "how many cores does this machine have?"
with nothing in front of it invents a value (365 days on 28 November; 4 cores on a 2-core machine).
A person would glance at the clock or the system panel, so the lane writes those facts itself,
each turn, after the cached prefix: the decision and the answer read them, and questions they
answer need no tool and get no invented value.
"""

from __future__ import annotations

import calendar
import getpass
import os
import platform
import socket
from datetime import date, datetime
from functools import lru_cache


@lru_cache(maxsize=1)
def machine() -> str:
    """The machine's basics, read once: they do not change while the lane runs."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    system = f"{platform.system()} {platform.release()}".strip() or "unknown"
    cores = os.cpu_count() or 0
    return (f"This computer: user {user}, host name {socket.gethostname()}, {system} "
            f"({platform.machine()}), {cores} CPU cores, Python {platform.python_version()}.")


def clock(now: datetime | None = None) -> str:
    """Today's date, weekday, time and time zone, with the days left in the month and the year
    (a calendar's glance; the model's own subtraction of dates is unreliable)."""
    now = (now or datetime.now().astimezone())
    zone = now.tzname() or "local time"
    offset = now.strftime("%z")
    today = now.date()
    month_end = date(today.year, today.month, calendar.monthrange(today.year, today.month)[1])
    year_end = date(today.year, 12, 31)
    return (f"Now: {now:%A} {today.isoformat()} ({now:%d %B %Y}), {now:%H:%M} {zone} (UTC{offset[:3]}:{offset[3:]}); "
            f"day {today.timetuple().tm_yday} of the year; {(month_end - today).days} days left in "
            f"{now:%B}, {(year_end - today).days + 1} days until 1 January {today.year + 1}.")


def situation(now: datetime | None = None) -> str:
    """Both, as one block for the lane's questions."""
    return f"{clock(now)}\n{machine()}"
