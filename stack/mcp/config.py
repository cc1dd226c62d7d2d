"""The `mcp_servers` block of lane.yaml, checked and turned into one ServerConfig per server.

A server is either a subprocess spoken to over stdio (`command`, `args`, `env`, `cwd`) or a
streamable-HTTP endpoint (`url`, `headers`). A bad entry is a ConfigError naming the server and the
key, raised before anything starts, so a typo never turns into a silently missing tool family.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from ..config import ConfigError

# Server names become tool-name prefixes (`time__get_current_time`), and OpenAI function names
# only admit [A-Za-z0-9_-]; a double underscore would make the prefix ambiguous.
_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
_MAX_SERVER_NAME = 32

_COMMON_KEYS = {"enabled", "tools", "startup_timeout_s", "call_timeout_s"}
_STDIO_KEYS = {"command", "args", "env", "cwd"}
_HTTP_KEYS = {"url", "headers"}

DEFAULT_STARTUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # Remote tool names to keep (None keeps all); names may carry the `server__` prefix too.
    tools: frozenset[str] | None = None
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    call_timeout_s: float = 120.0

    def allows(self, remote_name: str) -> bool:
        return self.tools is None or remote_name in self.tools


def parse_servers(raw: Mapping[str, Any], *, call_timeout_s: float = 120.0) -> list[ServerConfig]:
    """The enabled servers of an `mcp_servers` mapping, in configuration order."""
    if not isinstance(raw, Mapping):
        raise ConfigError("mcp_servers must be a mapping of server name to settings")
    servers = []
    for name, entry in raw.items():
        server = _parse_one(str(name), entry, call_timeout_s)
        if server is not None:
            servers.append(server)
    return servers


def _parse_one(name: str, entry: Any, call_timeout_s: float) -> ServerConfig | None:
    where = f"mcp_servers.{name}"
    if not _SERVER_NAME.match(name) or len(name) > _MAX_SERVER_NAME:
        raise ConfigError(f"{where}: a server name is 1-{_MAX_SERVER_NAME} characters of "
                          "[A-Za-z0-9_-] without a double underscore")
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be a mapping with `command` (stdio) or `url` (HTTP)")
    unknown = set(entry) - _COMMON_KEYS - _STDIO_KEYS - _HTTP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if not _boolean(entry.get("enabled", True), f"{where}.enabled"):
        return None
    has_command, has_url = entry.get("command") is not None, entry.get("url") is not None
    if has_command == has_url:
        raise ConfigError(f"{where}: give exactly one of `command` (stdio) or `url` (streamable HTTP)")
    mixed = set(entry) & (_HTTP_KEYS if has_command else _STDIO_KEYS)
    if mixed:
        raise ConfigError(f"{where}: {', '.join(sorted(mixed))} does not apply to a "
                          f"{'stdio' if has_command else 'HTTP'} server")
    common: dict[str, Any] = {
        "name": name,
        "tools": _allow_list(name, entry.get("tools"), where),
        "startup_timeout_s": _seconds(entry.get("startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S),
                                      f"{where}.startup_timeout_s"),
        "call_timeout_s": _seconds(entry.get("call_timeout_s", call_timeout_s), f"{where}.call_timeout_s"),
    }
    if has_command:
        return ServerConfig(
            transport="stdio",
            command=_text(entry["command"], f"{where}.command"),
            args=tuple(_text(a, f"{where}.args") for a in _list(entry.get("args", []), f"{where}.args")),
            env=_string_map(entry.get("env", {}), f"{where}.env"),
            cwd=None if entry.get("cwd") is None else os.path.expanduser(_text(entry["cwd"], f"{where}.cwd")),
            **common,
        )
    url = _text(entry["url"], f"{where}.url")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}.url must be an http:// or https:// URL, not {url!r}")
    return ServerConfig(transport="http", url=url,
                        headers=_string_map(entry.get("headers", {}), f"{where}.headers"), **common)


def _allow_list(server: str, value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    names = [_text(item, f"{where}.tools") for item in _list(value, f"{where}.tools")]
    prefix = f"{server}__"
    return frozenset(n[len(prefix):] if n.startswith(prefix) else n for n in names)


def _string_map(value: Any, where: str) -> dict[str, str]:
    """Values may name environment variables (`${GITHUB_TOKEN}`) so secrets stay out of lane.yaml."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of names to strings")
    return {str(k): os.path.expandvars(_text(v, f"{where}.{k}")) for k, v in value.items()}


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{where} must be a list")
    return list(value)


def _text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value) == "":
        raise ConfigError(f"{where} must be a non-empty string")
    return str(value)


def _seconds(value: Any, where: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be a number of seconds") from None
    if seconds <= 0:
        raise ConfigError(f"{where} must be positive")
    return seconds


def _boolean(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{where} must be true or false")
