"""Retrieval: tokenisation, BM25 ranking with its name corrections, embeddings and fusion."""

import json
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from stack.toolsearch import embedding, retrieval
from stack.toolsearch.retrieval import ToolDoc, ToolIndex
from stack.toolsearch.tokens import split_words, stem, tokens

# The benchmark catalog inside the repository: 1,016 real MCP tool definitions.
CATALOG_FILE = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "data" / "catalog.json"


def fn(name, description="", **params):
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {p: {"type": t} for p, t in params.items()},
                       "required": list(params)}}}


CATALOG = [
    fn("get_accounts", "Accounts of the current user."),
    fn("get_accounts_list", "Paged list of accounts with filters.", page="integer"),
    fn("github__create_issue", "Create a new issue in a GitHub repository.",
       owner="string", repo="string", title="string"),
    fn("github__list_pull_requests", "List pull requests of a repository.",
       owner="string", repo="string"),
    fn("slack_post_message", "Post a message to a Slack channel.", channel_id="string",
       text="string"),
    fn("browser_take_screenshot", "Take a screenshot of the current page.", fullPage="boolean"),
    fn("calendar_create_event", "Create an event in Google Calendar.", summary="string",
       start="string"),
]


def test_words_split_snake_camel_and_server_prefix():
    assert split_words("github__createIssue") == ["github", "create", "issue"]
    assert split_words("HTTPServerURL get_accounts_list") == \
        ["http", "server", "url", "get", "accounts", "list"]
    assert tokens("Creating the issues") == [stem("create"), stem("issue")]
    assert stem("created") == stem("creates") == stem("creating") == stem("create")


def test_short_exact_name_beats_longer_variant():
    index = ToolIndex.from_openai(CATALOG)
    assert [h.name for h in index.search("get accounts", 2)] == ["get_accounts", "get_accounts_list"]
    assert index.search("get accounts list", 1)[0].name == "get_accounts_list"


def test_exact_name_in_query_wins():
    index = ToolIndex.from_openai(CATALOG)
    assert index.search("please run get_accounts_list now", 1)[0].name == "get_accounts_list"
    assert index.search("github__list_pull_requests", 1)[0].name == "github__list_pull_requests"


def test_lexical_queries_find_the_tool():
    index = ToolIndex.from_openai(CATALOG)
    assert index.search("open a ticket on github", 1)[0].name == "github__create_issue"
    assert index.search("send a message to the team channel", 1)[0].name == "slack_post_message"
    assert index.search("schedule a meeting", 1)[0].name == "calendar_create_event"


def test_typos_are_read_as_the_catalog_word():
    index = ToolIndex.from_openai(CATALOG)
    assert index.search("screnshot of the pgae", 1)[0].name == "browser_take_screenshot"
    assert index.search("creat a githb isue", 1)[0].name == "github__create_issue"


def test_no_evidence_means_no_hits_but_closest_still_answers():
    index = ToolIndex.from_openai(CATALOG)
    assert index.search("zzqx vvkp", 5) == []
    assert len(index.closest("zzqx vvkp", 3)) == 3


def test_mcp_tools_list_items_and_extra_keys():
    index = ToolIndex.from_openai([
        {"name": "read_file", "description": "Read a file.", "inputSchema": {
            "type": "object", "properties": {"path": {"type": "string"}}}, "annotations": {}},
        {"type": "function", "function": {"name": "x", "parameters": {}}, "x-server": "srv"},
    ])
    assert index.docs[0].parameter_names == ["path"]
    assert index.docs[1].source == "srv"
    assert index.search("read a file", 1)[0].name == "read_file"


def test_bad_definitions_are_clear_errors():
    with pytest.raises(ValueError, match="no name"):
        ToolIndex.from_openai([{"description": "nameless"}])
    with pytest.raises(ValueError, match="unknown retrieval method"):
        ToolIndex.from_openai(CATALOG, method="magic")


def test_hybrid_without_embedder_degrades_to_bm25(monkeypatch):
    monkeypatch.setattr(retrieval, "_default_embedder", lambda: None)
    index = ToolIndex.from_openai(CATALOG, method="hybrid")
    assert index.method == "bm25"
    assert index.search("get accounts", 1)[0].name == "get_accounts"


class BagOfWordsEmbedder:
    """A deterministic stand-in: vectors from hashed words, enough to test the fusion plumbing."""

    name = "bag-of-words"

    def embed(self, texts):
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in tokens(text):
                rows[row, zlib.crc32(word.encode()) % 64] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.maximum(norms, 1e-9)


def test_hybrid_fuses_both_rankings_and_keeps_exact_names_first():
    index = ToolIndex.from_openai(CATALOG, method="hybrid", embedder=BagOfWordsEmbedder())
    assert index.method == "hybrid"
    assert index.search("post message slack", 1)[0].name == "slack_post_message"
    assert index.search("get_accounts_list", 1)[0].name == "get_accounts_list"
    embed_only = ToolIndex.from_openai(CATALOG, method="embed", embedder=BagOfWordsEmbedder())
    assert embed_only.search("screenshot page", 1)[0].name == "browser_take_screenshot"


needs_model = pytest.mark.skipif(embedding.default_embedder() is None,
                                 reason="the embed extra (onnxruntime + MiniLM) is not installed")


@needs_model
def test_minilm_embeddings_match_sentence_transformers_behaviour():
    model = embedding.default_embedder()
    vectors = model.embed(["A man is eating food.", "A man is eating a piece of bread.",
                           "The girl is carrying a baby."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > 0.6 and unrelated < 0.2


def test_texts_batch_by_token_count_within_the_slack():
    lengths = [3, 40, 9, 12, 41, 5, *[20] * 70]
    encoded = {f"text {i}": list(range(n)) for i, n in enumerate(lengths)}
    batches = embedding._batches(encoded)
    assert sorted(t for b in batches for t in b) == sorted(encoded)
    for batch in batches:
        counts = [len(ids) for ids in batch.values()]
        assert len(batch) <= embedding.BATCH_SIZE
        assert max(counts) - min(counts) <= embedding.BATCH_SLACK
    assert [len(b) for b in batches] == [3, 32, 32, 7, 2]  # 3 5 9 | 12 20.. | 20.. | 20.. | 40 41


@needs_model
def test_an_embedding_does_not_depend_on_its_batch():
    model = embedding.OnnxMiniLM(embedding.onnx_model_path())
    long = "list every open pull request in the acme api repository that changes the billing code"
    together = model.embed([long, "merge it", "close the issue"])
    alone = [embedding.OnnxMiniLM(embedding.onnx_model_path()).embed([t])[0]
             for t in (long, "merge it", "close the issue")]
    assert np.allclose(together, np.stack(alone), atol=1e-5)


@needs_model
def test_hybrid_finds_paraphrases_bm25_misses():
    index = ToolIndex.from_openai(CATALOG, method="hybrid")
    assert index.method == "hybrid"
    hits = [h.name for h in index.search("grab an image of what the browser shows", 3)]
    assert "browser_take_screenshot" in hits


def test_wordpiece_matches_bert_uncased_ids():
    tokenizer = embedding.WordPiece()
    # [CLS] hello , world ! [SEP] in bert-base-uncased's vocabulary.
    assert tokenizer.encode("Hello, world!") == [101, 7592, 1010, 2088, 999, 102]
    assert tokenizer.encode("Café") == tokenizer.encode("cafe")
    assert len(tokenizer.encode("word " * 500)) == embedding.MAX_TOKENS


def test_bm25_latency_at_a_thousand_tools():
    docs = [ToolDoc.from_definition(item) for item in json.loads(CATALOG_FILE.read_text())[:1000]]
    index = ToolIndex(docs, method="bm25")
    queries = ["create an issue", "list pull requests for my repo", "search the code",
               "send a notification", "generate an image of a cat"] * 20
    timings = []
    for query in queries:
        start = time.perf_counter()
        index.search(query, 5)
        timings.append(time.perf_counter() - start)
    # Measured p95 here: median 0.13 ms over seven runs (2026-11-26, two shared cores); the bound
    # is far above 10x that, room for a busy CI box, and still catches a linear scan gone wrong.
    assert np.percentile(timings, 95) < 0.010


def test_speller_fixes_swaps_and_drops_but_leaves_unknown_real_words():
    from stack.toolsearch.spelling import Speller, edit_distance

    speller = Speller(["list", "list", "merge", "large", "large", "large", "namespaces", "delete"])
    assert speller.correct("lsit") == "list"          # swapped letters share no trigram
    assert speller.correct("lerge") == "large"        # first letter breaks the tie with merge
    assert speller.correct("marge") is None           # a real word (the name), not a typo
    assert speller.correct("namespases") == "namespaces"
    assert speller.correct("delte") == "delete"
    assert speller.correct("acme") is None            # nothing one edit away
    assert speller.correct("list") is None            # known words stay
    assert edit_distance("abcd", "badc", 1) == 2


def test_bare_tool_name_without_server_prefix_is_exact():
    index = ToolIndex.from_openai([fn("cloudflare__kv_put", "Put a value."),
                                   fn("cloudflare__kv_get", "Get a value."),
                                   fn("github__get_me", "The authenticated user.")])
    assert index.search("kv_put", 1)[0].name == "cloudflare__kv_put"
    assert index.search("get_me", 1)[0].name == "github__get_me"


def test_foreign_task_words_are_read_in_english():
    from stack.toolsearch.glossary import english, english_gloss

    assert english("Lösche") == ("delete",)
    assert english_gloss(["crea", "una", "rama"]) == ["create", "branch"]
    index = ToolIndex.from_openai(CATALOG)
    assert index.search("crea un evento en el calendario", 1)[0].name == "calendar_create_event"
    assert index.search("envoie un message dans le canal", 1)[0].name == "slack_post_message"


def test_requests_with_several_tasks_find_a_tool_for_each():
    from stack.toolsearch.tokens import clauses

    assert clauses("go to example.com and then take a screenshot") == \
        ["go to example.com", "take a screenshot"]
    assert clauses("list branches and tags") == []  # one task, two objects
    index = ToolIndex.from_openai(CATALOG)
    names = [h.name for h in index.search(
        "open an issue on github for the outage, then post a message to the ops channel", 2)]
    assert set(names) == {"github__create_issue", "slack_post_message"}


class RecordingEmbedder(BagOfWordsEmbedder):
    def __init__(self):
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        return super().embed(texts)


def test_a_tool_is_embedded_once_from_its_name_and_description_opening():
    embedder = RecordingEmbedder()
    description = "Create a new issue. " + " ".join(f"detail{i}" for i in range(40))
    docs = [ToolDoc("github__create_issue", description), ToolDoc("time__now", ""),
            ToolDoc("slack__post", "Post a message.", examples=("tell the team",))]
    ToolIndex(docs, method="hybrid", embedder=embedder)
    opening = " ".join(description.split()[:retrieval.EMBED_WORDS])
    assert embedder.seen == [f"github create issue: {opening}", "time now",
                             "slack post: Post a message.", "tell the team"]


def test_a_request_of_several_tasks_costs_no_model_pass_of_its_own():
    from stack.toolsearch.tokens import clauses

    embedder = RecordingEmbedder()
    index = ToolIndex.from_openai(CATALOG, method="hybrid", embedder=embedder)
    embedder.seen.clear()
    request = "open an issue on github for the outage, then post a message to the ops channel"
    names = [h.name for h in index.search(request, 2)]
    assert set(names) == {"github__create_issue", "slack_post_message"}
    assert sorted(embedder.seen) == sorted(clauses(request))  # the tasks, never the whole
    assert index.cosine(request, "slack_post_message") > 0
    assert request not in embedder.seen
    embedder.seen.clear()
    index.search("post a message to the ops channel", 1)
    assert embedder.seen == ["post a message to the ops channel"]


def test_each_task_of_a_request_gets_its_best_tool_on_the_first_page(monkeypatch):
    names = [f"sentry__tool_{i}" for i in range(12)] + ["linear__create_issue"]
    index = ToolIndex([ToolDoc(n, "") for n in names])
    request = "find the sentry issues with the most errors and file a linear issue for the worst"
    # The request and its first task rank seven sentry tools above Linear's (8th); the second
    # task ranks Linear's first. Merged by best score, Linear's tool would be 8th of 13.
    whole = np.array([1.0 - 0.05 * i for i in range(12)] + [0.68])
    first, second = whole.copy(), np.full(13, 0.1)
    second[12] = 0.68
    monkeypatch.setattr(index, "_scores", lambda query, tasks: [whole, first, second])
    hits = [h.name for h in index.search(request, 5)]
    assert hits == [*names[:4], "linear__create_issue"]  # page order: merged rank
    assert [h.name for h in index.search(request, 13)][5:] == names[4:12]  # nothing lost
    # Five tasks whose best tools rank 6th-10th: the page shows them, after the overall best.
    tasks = [np.where(np.arange(13) == 5 + t, 2.0, 0.0) for t in range(5)]
    merged = np.array([3.0 - 0.1 * i for i in range(13)])
    monkeypatch.setattr(index, "_scores", lambda query, texts: [merged, *tasks])
    assert [h.name for h in index.search(request, 5)] == [names[0], *names[5:9]]
    monkeypatch.setattr(index, "_scores", lambda query, tasks: [whole, first, second])
    # A "task" whose best tool ranks below the first ten is left where it is (chatter).
    whole[12] = first[12] = second[12] = 0.3
    assert "linear__create_issue" not in [h.name for h in index.search(request, 5)]


def test_slugs_and_paths_are_values_not_task_words():
    index = ToolIndex.from_openai([
        fn("github__get_latest_release", "Get the latest release in a GitHub repository.",
           owner="string", repo="string"),
        fn("kubernetes__pods_list", "List Kubernetes pods."),
        fn("kubernetes__resources_get", "Get a Kubernetes resource."),
    ])
    assert index.search("get the latest release of kubernetes/kubernetes", 1)[0].name == \
        "github__get_latest_release"
    assert "kubernet" not in index.query_terms("release of kubernetes/kubernetes")


def test_file_names_and_domains_are_values_not_task_words():
    # Their kind ("file", "website") is a task word; what they are called is not.
    index = ToolIndex.from_openai([
        fn("filesystem__read_text_file", "Read a text file from disk.", path="string"),
        fn("circleci__config_helper", "Validate a CircleCI config."),
    ])
    assert index.query_terms("read config.json and notes-old.txt from example.com") == \
        ["read", "file", "file", "websit"]
    assert index.search("read config.json", 1)[0].name == "filesystem__read_text_file"
    assert index.search("filesystem__read_text_file", 1)[0].name == "filesystem__read_text_file"


def test_urls_addresses_files_issue_keys_and_channels_are_read_as_their_kind_by_both_halves():
    tools = [fn("stripe__list_prices", "List the prices of your products."),
             fn("browser__navigate", "Navigate the browser to a web page URL.", url="string"),
             fn("gmail__send_email", "Send an email to an address.", to="string"),
             fn("filesystem__read_text_file", "Read a text file from disk.", path="string")]
    index = ToolIndex.from_openai(tools)
    assert index.query_terms("go to example.com/pricing") == ["go", "web", "page"]
    assert index.query_terms("mail bob@example.com") == ["mail", "email", "address"]
    assert index.query_terms("open https://news.ycombinator.com") == ["open", "web", "page"]
    assert index.query_terms("open archive/a.txt") == ["open", "file"]
    assert index.query_terms("list acme/api") == ["list"]  # a slug has no kind to read
    assert index.query_terms("log 2 hours on PROJ-88") == ["log", "2", "hour", "issu"]
    assert index.query_terms("post it in #dev-ops about PR #42") == \
        ["post", "channel", "pr", "42"]
    assert index.search("go to example.com/pricing", 1)[0].name == "browser__navigate"
    embedder = RecordingEmbedder()
    index = ToolIndex.from_openai(tools, method="hybrid", embedder=embedder)
    embedder.seen.clear()
    index.search("screenshot example.com/pricing", 1)
    assert embedder.seen == ["screenshot the web page"]


@pytest.mark.parametrize("hostile", [
    "a" * 40_000,                  # an email pattern tried from each of 40,000 starts
    "a" * (1 << 20),               # 1 MiB
    "a." * 20_000 + "b",           # a domain of 20,000 labels, no known ending
    "x/" * 20_000,                 # a path with no end
    " " * 40_000 + "x",            # blanks before the clause breaks' words
])
def test_an_unbroken_word_is_read_in_linear_time(hostile):
    """One 40,000-character word took the value patterns (`[\\w.+-]+@...`, the file and domain
    kinds) time in the square of its length; bounded (stack/text_bounds.py) it is linear."""
    index = ToolIndex.from_openai(CATALOG)
    started = time.perf_counter()
    index.search(f"post {hostile} to slack", 3)
    index.query_coverage(f"post {hostile}", "slack_post_message")
    assert retrieval.task_words(f"read {hostile} now")[0] == "read"
    assert time.perf_counter() - started < 1.0
