"""Settings precedence: defaults < lane.yaml < LANE_* environment."""

from pathlib import Path

import pytest

from stack.config import DEFAULT_CORE_TOOLS, ConfigError, Settings, load_settings


def test_defaults_match_design():
    settings = load_settings(environ={}, config_path=None)
    assert settings.llm_url == "http://127.0.0.1:8081/v1"
    assert settings.max_tokens == 4096 and settings.port == 8642
    assert settings.tool_search == "on" and settings.core_tools == DEFAULT_CORE_TOOLS
    assert settings.db_path == Path(".lane/state.db") and settings.tools_subset is None


def test_yaml_then_environment(tmp_path):
    config = tmp_path / "lane.yaml"
    config.write_text(
        "max_tokens: 512\nport: 9000\n"
        "tool_search: {enabled: auto, threshold_pct: 5, max_search_limit: 3}\n"
        "core_tools: [memory, terminal]\n"
    )
    settings = load_settings(environ={"LANE_CONFIG": str(config), "LANE_PORT": "9100",
                                      "LANE_TOOLS_SUBSET": "memory, terminal,,nope"})
    assert settings.max_tokens == 512 and settings.port == 9100
    assert settings.tool_search == "auto" and settings.tool_search_threshold_pct == 5.0
    assert settings.max_search_limit == 3
    assert settings.core_tools == ("memory", "terminal")
    assert settings.tools_subset == ("memory", "terminal", "nope")


def test_db_follows_home_unless_set():
    assert load_settings(environ={"LANE_HOME": "/x"}).db_path == Path("/x/state.db")
    assert load_settings(environ={"LANE_HOME": "/x", "LANE_DB": "/y.db"}).db_path == Path("/y.db")


@pytest.mark.parametrize("environ, message", [
    ({"LANE_MAX_TOKENS": "lots"}, "max_tokens"),
    ({"LANE_MAX_TOKENS": "0"}, "max_tokens"),
    ({"LANE_TOOL_SEARCH": "sometimes"}, "tool_search"),
    ({"LANE_PORT": "70000"}, "port"),
    ({"LANE_TOOL_EXAMPLES": "perhaps"}, "tool_examples"),
])
def test_bad_values_name_the_setting(environ, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(environ=environ)


def test_unknown_yaml_key_and_bad_yaml_are_clear_errors(tmp_path):
    config = tmp_path / "lane.yaml"
    config.write_text("max_tokenz: 5\n")
    with pytest.raises(ConfigError, match="max_tokenz"):
        load_settings(environ={}, config_path=config)
    config.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(environ={}, config_path=config)


def test_overrides_ignore_none_and_validate():
    settings = Settings().with_overrides(port=9001, llm_url=None)
    assert settings.port == 9001 and settings.llm_url == Settings().llm_url
    with pytest.raises(ConfigError):
        Settings().with_overrides(max_tokens=-1)


def test_example_requests_are_on_by_default_and_switch_off_in_yaml_or_environment(tmp_path):
    assert load_settings(environ={}, config_path=None).tool_examples is True
    config = tmp_path / "lane.yaml"
    config.write_text("tool_search: {examples: false}\n")
    assert load_settings(environ={}, config_path=config).tool_examples is False
    assert load_settings(environ={"LANE_TOOL_EXAMPLES": "false"}).tool_examples is False
    assert load_settings(environ={"LANE_HOME": "/x"}).examples_path == Path("/x/tool_examples.json")
    with pytest.raises(ConfigError, match="tool_examples"):
        load_settings(environ={"LANE_TOOL_EXAMPLES": "sometimes"})


def test_allowed_hosts_and_origins_are_lists_from_yaml_or_environment(tmp_path):
    assert load_settings(environ={}, config_path=None).allowed_hosts == ()
    config = tmp_path / "lane.yaml"
    config.write_text("allowed_hosts: [shim, lane.example.com]\n"
                      "allowed_origins: https://app.example.com\n")
    settings = load_settings(environ={"LANE_CONFIG": str(config)})
    assert settings.allowed_hosts == ("shim", "lane.example.com")
    assert settings.allowed_origins == ("https://app.example.com",)
    settings = load_settings(environ={"LANE_CONFIG": str(config), "LANE_ALLOWED_HOSTS": "a, b",
                                      "LANE_ALLOWED_ORIGINS": "http://x:3000,https://y"})
    assert settings.allowed_hosts == ("a", "b")
    assert settings.allowed_origins == ("http://x:3000", "https://y")
