"""The `mcp_servers` block: what is accepted, what is refused, and with which message."""

from __future__ import annotations

import pytest

from stack.config import ConfigError
from stack.mcp.config import parse_servers


def test_stdio_and_http_servers_parse(monkeypatch):
    monkeypatch.setenv("TOKEN", "s3cret")
    servers = parse_servers({
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"], "env": {"TZ": "UTC"},
                 "cwd": "~/x", "tools": ["get_current_time", "time__convert_time"], "call_timeout_s": 5},
        "remote": {"url": "http://mcp:8000/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "off": {"command": "whatever", "enabled": False},
    }, call_timeout_s=42)
    assert [s.name for s in servers] == ["time", "remote"]
    time_server, remote = servers
    assert time_server.transport == "stdio" and time_server.args == ("--local-timezone", "UTC")
    assert time_server.tools == {"get_current_time", "convert_time"}
    assert time_server.allows("convert_time") and not time_server.allows("other")
    assert time_server.call_timeout_s == 5 and not time_server.cwd.startswith("~")
    assert remote.transport == "http" and remote.headers == {"Authorization": "Bearer s3cret"}
    assert remote.call_timeout_s == 42 and remote.allows("anything")


@pytest.mark.parametrize("entry, message", [
    ({"args": []}, "exactly one of"),
    ({"command": "x", "url": "http://y"}, "exactly one of"),
    ({"command": "x", "headers": {}}, "does not apply"),
    ({"url": "ftp://y"}, "http:// or https://"),
    ({"command": "x", "colour": "red"}, "unknown key"),
    ({"command": "x", "enabled": "yes"}, "true or false"),
    ({"command": "x", "args": "--flag"}, "must be a list"),
    ({"command": "x", "startup_timeout_s": 0}, "positive"),
    ({"command": ""}, "non-empty string"),
    ("mcp-server-time", "must be a mapping"),
])
def test_bad_entries_name_the_server_and_key(entry, message):
    with pytest.raises(ConfigError, match=message) as caught:
        parse_servers({"srv": entry})
    assert "mcp_servers.srv" in str(caught.value)


@pytest.mark.parametrize("name", ["a__b", "has space", "dots.no", "x" * 40, ""])
def test_server_names_must_make_clean_prefixes(name):
    with pytest.raises(ConfigError, match="server name"):
        parse_servers({name: {"command": "x"}})
