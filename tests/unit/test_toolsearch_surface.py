"""The tool surface: core set, catalog, modes, scoping, bridges and promotion."""

import json

import pytest

from stack.config import Settings
from stack.store import Store
from stack.token_estimate import estimate_tokens
from stack.tools.base import RESERVED_NAMES, Tool, ToolContext, object_schema
from stack.tools.registry import Registry
from stack.toolsearch import promotion
from stack.toolsearch.bridges import CALL_SCHEMA, bridge_tools
from stack.toolsearch.catalog import Catalog, build_catalog
from stack.toolsearch.promotion import promoted_tools
from stack.toolsearch.surface import assemble, guessed_task

BRIDGES = ["tool_search", "tool_describe", "tool_call"]
STRING = {"type": "string"}


def echo(arguments, ctx):
    return json.dumps(arguments, sort_keys=True)


def tool(name, description, required=(), source="builtin", **props):
    properties = {p: {"type": "string"} for p in required} | props
    return Tool(name, description, object_schema(properties, list(required)), echo, source)


CORE = [tool("memory", "Save a note to memory.", ["text"]),
        tool("terminal", "Run a shell command.", ["command"])]
DEFERRED = [
    tool("github__create_issue", "Create a new issue in a GitHub repository.",
         ["owner", "repo", "title"], "github", body=STRING),
    tool("github__list_pull_requests", "List pull requests of a repository.",
         ["owner", "repo"], "github"),
    tool("slack_post_message", "Post a message to a Slack channel.", ["channel", "text"], "slack"),
    tool("weather_forecast", "Weather forecast for a city.", ["city"], "weather",
         days={"type": "integer"}),
]


@pytest.fixture
def settings(tmp_path):
    return Settings(home=tmp_path, core_tools=("memory", "terminal", "clarify"))


@pytest.fixture
def ctx(settings):
    store = Store(settings.db_path)
    session = store.create_session()
    yield ToolContext(settings, store, session)
    store.close()


def registry(extra=()):
    return Registry([*CORE, *DEFERRED, *extra])


def names(toolset):
    return [t["function"]["name"] for t in toolset.offered]


def test_on_offers_core_and_bridges_and_never_defers_core(settings):
    toolset = assemble(registry(), settings)
    assert names(toolset) == ["memory", "terminal", *BRIDGES]
    assert set(toolset.catalog.tools) == {t.name for t in DEFERRED}
    assert not {"memory", "terminal", *BRIDGES} & set(toolset.catalog.tools)


def test_off_and_full_offer_every_granted_tool_without_bridges(settings):
    everything = ["memory", "terminal", *(t.name for t in DEFERRED)]
    assert sorted(names(assemble(registry(), settings, profile="full"))) == sorted(everything)
    off = settings.with_overrides(tool_search="off")
    assert sorted(names(assemble(registry(), off))) == sorted(everything)
    with pytest.raises(ValueError, match="profile"):
        assemble(registry(), settings, profile="everything")


def test_auto_bridges_only_when_deferred_schemas_are_large(settings):
    small = settings.with_overrides(tool_search="auto", context_tokens=32768)
    assert "tool_search" not in names(assemble(registry(), small))
    tight = settings.with_overrides(tool_search="auto", context_tokens=1000,
                                    tool_search_threshold_pct=5.0)
    assert names(assemble(registry(), tight))[-3:] == BRIDGES


def test_no_deferred_tools_means_no_bridges(settings):
    assert names(assemble(Registry(CORE), settings)) == ["memory", "terminal"]


def test_reserved_names_cannot_be_registered():
    for name in RESERVED_NAMES:
        with pytest.raises(ValueError, match="reserved"):
            Registry([tool(name, "impostor")])
    sneaky = Registry(CORE, [lambda: [tool("tool_call", "impostor"), DEFERRED[0]]])
    assert "tool_call" not in sneaky.tools()


def test_catalog_follows_the_live_tool_list(settings):
    live = list(DEFERRED[:1])
    reg = Registry(CORE, [lambda: list(live)])
    assert set(assemble(reg, settings).catalog.tools) == {"github__create_issue"}
    live.append(DEFERRED[3])
    toolset = assemble(reg, settings)
    assert set(toolset.catalog.tools) == {"github__create_issue", "weather_forecast"}
    assert toolset.catalog.search("weather forecast", 1)[0][0].name == "weather_forecast"
    live.clear()
    assert names(assemble(reg, settings)) == ["memory", "terminal"]


def test_scoping_hides_and_refuses_out_of_scope_tools(settings, ctx):
    narrow = settings.with_overrides(tools_subset=("memory", "weather_forecast", "slack_post_message"))
    toolset = assemble(registry(), narrow)
    assert names(toolset) == ["memory", *BRIDGES]
    assert set(toolset.catalog.tools) == {"weather_forecast", "slack_post_message"}
    found = toolset.dispatch("tool_search", {"query": "create a github issue"}, ctx).output
    assert "github__create_issue" not in found
    through = toolset.dispatch("tool_call", {"name": "github__create_issue", "arguments": {
        "owner": "o", "repo": "r", "title": "t"}}, ctx)
    assert (through.tool_name, through.status) == ("tool_call", "refused")
    direct = toolset.dispatch("github__create_issue", {"owner": "o", "repo": "r", "title": "t"}, ctx)
    assert direct.status == "refused"
    assert toolset.dispatch("terminal", {"command": "ls"}, ctx).status == "refused"
    described = toolset.dispatch("tool_describe", {"name": "github__create_issue"}, ctx)
    assert described.status == "error" and "no hidden tool" in described.output


def test_bridge_schemas_are_small_and_the_no_tool_surface_fits(settings):
    bridges = [t.openai_schema() for t in bridge_tools(Catalog({}), settings).values()]
    assert estimate_tokens(bridges + [CALL_SCHEMA]) < 400
    for schema in bridges + [CALL_SCHEMA]:
        assert schema["function"]["description"]


def test_tool_search_returns_signatures_and_descriptions(settings, ctx):
    toolset = assemble(registry(), settings)
    result = toolset.dispatch("tool_search", {"query": "open a github issue", "limit": 2}, ctx)
    assert result.status == "ok" and result.tool_name == "tool_search"
    first = result.output.splitlines()[0]
    assert first.startswith("- github__create_issue(owner: string, repo: string, title: string")
    assert "optional: body" in first and "Create a new issue" in first
    assert len([line for line in result.output.splitlines() if line.startswith("- ")]) <= 2


def test_hopeless_search_is_flagged_with_closest_tools_and_sources(settings, ctx):
    toolset = assemble(registry(), settings)
    output = toolset.dispatch("tool_search", {"query": "qqzx vvkp"}, ctx).output
    assert output.startswith("Low confidence")
    # The nearest tools by whatever faint similarity there is (or by name when there is none).
    assert output.count("\n- ") >= 3
    assert "Connected sources: github, slack, weather" in output


def test_search_limit_is_capped(settings, ctx):
    capped = settings.with_overrides(max_search_limit=2)
    toolset = assemble(registry(), capped)
    output = toolset.dispatch("tool_search", {"query": "repository", "limit": 50}, ctx).output
    assert sum(line.startswith("- ") for line in output.splitlines()) <= 2


def test_tool_describe_gives_the_full_schema(settings, ctx):
    toolset = assemble(registry(), settings)
    described = json.loads(toolset.dispatch("tool_describe", {"name": "weather_forecast"}, ctx).output)
    assert described["parameters"]["properties"]["days"] == {"type": "integer"}


def test_tool_call_runs_the_tool_under_its_own_name(settings, ctx):
    toolset = assemble(registry(), settings)
    outcome = toolset.dispatch("tool_call", json.dumps({
        "name": "weather_forecast", "arguments": {"city": "Oslo", "days": "3"}}), ctx)
    assert (outcome.tool_name, outcome.status, outcome.via_bridge) == ("weather_forecast", "ok", True)
    assert json.loads(outcome.output) == {"city": "Oslo", "days": 3}  # "3" coerced safely


def test_tool_call_accepts_flattened_and_string_arguments(settings, ctx):
    toolset = assemble(registry(), settings)
    flat = toolset.dispatch("tool_call", {"name": "weather_forecast", "city": "Rome"}, ctx)
    assert flat.status == "ok" and json.loads(flat.output) == {"city": "Rome"}
    text = toolset.dispatch("tool_call", {"name": "weather_forecast",
                                          "arguments": '{"city": "Lima"}'}, ctx)
    assert text.status == "ok" and json.loads(text.output) == {"city": "Lima"}


def test_tool_call_validation_error_returns_schema_path_and_example(settings, ctx):
    toolset = assemble(registry(), settings)
    outcome = toolset.dispatch("tool_call", {"name": "weather_forecast",
                                             "arguments": {"city": "Oslo", "days": "soon"}}, ctx)
    assert (outcome.tool_name, outcome.status, outcome.via_bridge) == ("weather_forecast", "error", True)
    assert "at days" in outcome.output
    assert '"required":["city"]' in outcome.output
    assert 'example: {"name": "weather_forecast", "arguments": {"city": "<city>"}}' in outcome.output


def test_tool_call_refuses_bridges_core_and_unknown_names(settings, ctx):
    toolset = assemble(registry(), settings)
    for name, reason in (("tool_call", "recursion"), ("tool_search", "bridge"),
                         ("terminal", "call it directly"), ("no_such_tool", "no hidden tool")):
        outcome = toolset.dispatch("tool_call", {"name": name, "arguments": {}}, ctx)
        assert (outcome.tool_name, outcome.status, outcome.via_bridge) == \
            ("tool_call", "refused", False), name
        assert reason in outcome.output
    missing = toolset.dispatch("tool_call", "{broken", ctx)
    assert (missing.tool_name, missing.status) == ("tool_call", "error")


def test_deferred_tool_called_by_name_runs_and_parameters_of_follows_offer(settings, ctx):
    toolset = assemble(registry(), settings)
    outcome = toolset.dispatch("weather_forecast", {"city": "Oslo"}, ctx)
    assert (outcome.tool_name, outcome.status, outcome.via_bridge) == ("weather_forecast", "ok", False)
    assert toolset.parameters_of("tool_call") == CALL_SCHEMA["function"]["parameters"]
    assert toolset.parameters_of("memory")["required"] == ["text"]
    assert toolset.parameters_of("weather_forecast") is None


def test_promotion_offers_a_clear_winner_directly(settings, ctx):
    toolset = assemble(registry(), settings, query="What is the weather forecast for Oslo?")
    assert toolset.promoted == ["weather_forecast"]
    # offered in a message of the turn, not in the tools block that opens every prompt
    assert names(toolset) == ["memory", "terminal", *BRIDGES]
    assert [s["function"]["name"] for s in toolset.promoted_schemas] == ["weather_forecast"]
    assert toolset.parameters_of("weather_forecast")["required"] == ["city"]
    assert toolset.dispatch("weather_forecast", {"city": "Oslo"}, ctx).status == "ok"
    through = toolset.dispatch("tool_call", {"name": "weather_forecast",
                                             "arguments": {"city": "Oslo"}}, ctx)
    assert through.status == "ok" and through.via_bridge


def test_promotion_stays_out_of_vague_queries_and_within_its_budget(settings, monkeypatch):
    assert assemble(registry(), settings, query="hello there").promoted == []
    assert assemble(registry(), settings, query="").promoted == []
    vague = "any chance the forecast ruins our picnic at the lake this weekend?"
    assert assemble(registry(), settings, query=vague).promoted == []  # one word in common does not vouch
    monkeypatch.setattr(promotion, "BUDGET_TOKENS", 10)
    _, catalog = build_catalog(registry(), settings)
    assert promoted_tools(catalog, "What is the weather forecast for Oslo?") == []


def test_warm_up_indexes_the_deferred_catalog(settings):
    from stack.toolsearch.catalog import warm_up

    assert warm_up(registry(), settings) == len(DEFERRED)
    assert warm_up(Registry(CORE), settings) == 0


def test_a_guessed_call_is_searched_as_its_name_argument_names_and_value_words():
    assert guessed_task("playwright", {"path": "screenshot.png", "full_page": True}) == \
        "playwright path screenshot png full page"
    assert guessed_task("calendarCreate", '{"title": "Team standup"}') == \
        "calendar create title team standup"
    assert guessed_task("x", '{"broken": ') == "x"
    assert guessed_task("notes", {"text": "word " * 50}) == "notes text"  # long values stay out


TRACKERS = [
    tool("atlassian__jira_create_issue", "Create a new Jira issue.", ["project", "summary"], "atlassian"),
    tool("atlassian__jira_get_issue", "Get a Jira issue by its key.", ["key"], "atlassian"),
    tool("atlassian__jira_search", "Search Jira issues with JQL.", ["jql"], "atlassian"),
    tool("atlassian__confluence_get_page", "Get a Confluence page.", ["page_id"], "atlassian"),
    *(tool(f"kubernetes__pods_{verb}", f"{verb.title()} a pod.", ["name"], "kubernetes")
      for verb in ("list", "get", "delete")),
    tool("google_calendar__create-event", "Create a calendar event.", ["summary", "start"],
         "google_calendar"),
    tool("linear__save_issue", "Save an issue of a team.", ["team", "title"], "linear"),
    tool("linear__get_team", "Get a team.", ["id"], "linear"),
    *(tool(f"{source}__create_issue", "Create a new issue for a bug.", ["title"], source)
      for source in ("alpha", "bravo", "delta")),
]


def test_a_request_names_a_source_by_its_name_or_a_word_only_its_tool_names_begin_with(settings):
    _, catalog = build_catalog(registry(TRACKERS), settings)
    assert catalog.named_sources("file a Jira ticket for the crash") == {"atlassian"}
    assert catalog.named_sources("what's on my Google Calendar tomorrow?") == {"google_calendar"}
    assert catalog.named_sources("post it on slack and open a github issue") == {"slack", "github"}
    # neither one tool's first word nor an English word is a product word; a value is no name;
    # core tools are no source
    assert catalog.named_sources("open the confluence page") == frozenset()
    assert catalog.named_sources("restart the pods") == frozenset()
    assert catalog.named_sources("summarise slack.com/blog and github.com/acme/api") == frozenset()
    assert catalog.named_sources("save it to memory in the terminal") == frozenset()
    # shorthand names its product: gh is GitHub, k8s Kubernetes, gcal Google Calendar
    assert catalog.named_sources("open a gh issue for the flaky k8s pods") == {"github", "kubernetes"}
    assert catalog.named_sources("put it in my gcal") == {"google_calendar"}


def test_a_source_singled_out_gets_its_best_tools_when_no_clear_winner_does(settings):
    # BM25 alone, so the scores (three tools of unnamed sources tie) do not depend on an embedder
    pages = [*(tool(f"pages__save_{kind}", f"Save the page as a {kind.upper()} file.", ["url"], "pages")
               for kind in ("pdf", "png")),
             tool("notes__keep_page", "Save a web page as a file for later.", ["url"], "notes")]
    catalog = Catalog({t.name: t for t in [*DEFERRED, *TRACKERS, *pages]}, method="bm25")
    query = "create a new issue for the login bug"
    assert promoted_tools(catalog, query) == []  # the best three: three sources'
    # the two best are one source's, a third close behind: which product is settled, the model
    # picks the tool
    assert promoted_tools(catalog, "save the page as a file") == [
        "pages__save_pdf", "pages__save_png"]
    # the user said which product: its best tool, though three others fit the words better
    assert promoted_tools(catalog, f"in linear, {query}") == ["linear__save_issue"]
    assert promoted_tools(catalog, "what is the weather forecast for Oslo, linear?") == [
        "weather_forecast"]  # a clear winner stays the winner


def test_a_description_s_first_line_does_not_end_at_an_abbreviation():
    from stack.toolsearch.catalog import one_line

    assert one_line("Evaluate an expression exactly, e.g. '17 * 23'. Then more.") == \
        "Evaluate an expression exactly, e.g. '17 * 23'."
    assert one_line("Read a file. Optionally a range.") == "Read a file."


def test_a_number_keeps_the_kind_it_was_written_in():
    """JSON's number admits integers: a whole number is sent whole (Codex reads its "number"
    fields as unsigned integers and rejects 10000.0), a real one as real; strings are read."""
    from stack.tools.validation import validate_arguments

    schema = {"type": "object", "properties": {
        "numbers": {"type": "array", "items": {"type": "number"}}, "count": {"type": "integer"},
        "ratio": {"type": "number"}, "max_output_tokens": {"type": "number"}, "flag": {"type": "boolean"}}}
    arguments = validate_arguments("f", schema, {"numbers": [12, 15.5], "count": "3", "ratio": "0.5",
                                                 "max_output_tokens": 10000, "flag": True})
    assert json.dumps(arguments) == ('{"numbers": [12, 15.5], "count": 3, "ratio": 0.5, '
                                     '"max_output_tokens": 10000, "flag": true}')
