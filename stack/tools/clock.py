"""`world_clock` and `convert_timezone`: the clock and IANA time zones, offline (zoneinfo).

A model has no clock and guesses offsets badly, so both tools return the wall time with its zone,
UTC offset, weekday and whether daylight saving applies. The time leads, on both clocks: given only
"2026-11-28T01:23:38+09:00", the 1.5B model answered "1:23 PM (13:23 in 24-hour format)".
"""

from __future__ import annotations

import difflib
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from .base import Tool, ToolContext, ToolError, object_schema

_ZONE = {"type": "string", "description": "IANA time zone, e.g. 'Asia/Tokyo', 'Europe/Paris', 'UTC'."}


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(name.strip(), _zone_names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; use an IANA name like 'Asia/Tokyo'"
        raise ToolError(f"unknown time zone {name!r}{hint}") from None


def describe(moment: datetime) -> str:
    """"01:23 (1:23 AM), Saturday 28 November 2026, in Asia/Tokyo (JST, UTC+09:00, daylight saving
    off); ISO 2026-11-28T01:23:38+09:00"."""
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    hours, minutes = divmod(abs(int(offset.total_seconds())) // 60, 60)
    dst = bool(moment.dst())
    twelve = f"{moment.hour % 12 or 12}:{moment:%M} {'AM' if moment.hour < 12 else 'PM'}"
    return (f"{moment:%H:%M} ({twelve}), {moment:%A} {moment.day} {moment:%B %Y}, in {moment.tzinfo} "
            f"({moment.tzname()}, UTC{sign}{hours:02d}:{minutes:02d}, daylight saving {'on' if dst else 'off'}); "
            f"ISO {moment.isoformat(timespec='seconds')}")


def _current_time(arguments: dict[str, Any], ctx: ToolContext) -> str:
    name = arguments.get("timezone")
    now = datetime.now(_zone(name)) if name else datetime.now().astimezone()
    return describe(now)


def _convert_time(arguments: dict[str, Any], ctx: ToolContext) -> str:
    source, target = _zone(arguments["source_timezone"]), _zone(arguments["target_timezone"])
    text = arguments["time"].strip()
    try:
        if len(text) <= 5 and ":" in text:
            hour, minute = (int(part) for part in text.split(":"))
            moment = datetime.now(source).replace(hour=hour, minute=minute, second=0, microsecond=0)
        else:
            moment = datetime.fromisoformat(text)
            moment = moment.replace(tzinfo=source) if moment.tzinfo is None else moment.astimezone(source)
    except ValueError:
        raise ToolError(f"time {text!r} is neither HH:MM nor an ISO 8601 date-time") from None
    converted = moment.astimezone(target)
    shift = ((converted.utcoffset() or timedelta(0)) - (moment.utcoffset() or timedelta(0))).total_seconds() / 3600
    return f"source: {describe(moment)}\ntarget: {describe(converted)}\ndifference: {shift:+g} h"


TOOLS: list[Tool] = [
    Tool(
        name="world_clock",
        description="Current date and time in a time zone (the machine's own zone if none is given).",
        parameters=object_schema({"timezone": _ZONE}),
        run=_current_time,
    ),
    Tool(
        name="convert_timezone",
        description="Convert a time of day (HH:MM, today) or an ISO 8601 date-time from one time zone to another.",
        parameters=object_schema(
            {
                "time": {"type": "string", "description": "'14:30' (today) or '2025-03-09T08:00'."},
                "source_timezone": _ZONE,
                "target_timezone": _ZONE,
            },
            ["time", "source_timezone", "target_timezone"],
        ),
        run=_convert_time,
    ),
]
