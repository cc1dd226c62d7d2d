"""The SQLite session store: schema, migrations, durability, search."""

import sqlite3

import pytest

from stack.store import Store, StoreError
from stack.store.schema import MIGRATIONS


def test_schema_is_the_public_contract(tmp_path):
    Store(tmp_path / "s.db").close()
    db = sqlite3.connect(tmp_path / "s.db")
    columns = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")]
               for t in ("sessions", "messages", "tool_executions")}
    assert columns["sessions"][:5] == ["id", "created_at", "source", "title", "model"]
    assert columns["messages"][:10] == [
        "id", "session_id", "role", "content", "tool_calls", "tool_call_id", "tool_name",
        "prompt_tokens", "completion_tokens", "created_at"]
    assert columns["tool_executions"][:13] == [
        "id", "session_id", "message_id", "tool_call_id", "tool_name", "via_bridge", "origin",
        "arguments", "status", "result", "error", "started_at", "duration_ms"]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_reopening_migrates_nothing_twice_and_keeps_data(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session(title="first")
    store.add_message(session, "user", "hello")
    store.close()
    again = Store(tmp_path / "s.db")
    assert [m["content"] for m in again.messages(session)] == ["hello"]


def test_a_newer_store_is_refused(tmp_path):
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path / "s.db")


def test_not_a_database_is_a_clear_error(tmp_path):
    (tmp_path / "s.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        Store(tmp_path / "s.db")


def test_each_write_is_visible_to_another_reader_at_once(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    store.add_message(session, "user", "durable")
    reader = sqlite3.connect(f"file:{tmp_path / 's.db'}?mode=ro", uri=True)
    assert reader.execute("SELECT content FROM messages").fetchall() == [("durable",)]


def test_search_finds_phrase_excludes_caller_and_ignores_fts_syntax(tmp_path):
    store = Store(tmp_path / "s.db")
    old = store.create_session()
    store.add_message(old, "user", "the marker is HELLO_7F3K2_BASELINE, keep it")
    other = store.create_session()
    store.add_message(other, "user", "nothing to see")
    me = store.create_session()
    store.add_message(me, "user", "search for HELLO_7F3K2_BASELINE")
    hits = store.search_messages("HELLO_7F3K2_BASELINE", exclude_session=me)
    assert [h.session_id for h in hits] == [old]
    assert "HELLO_7F3K2_BASELINE" in hits[0].snippet and hits[0].created_at
    assert store.search_messages('"unbalanced AND (OR', exclude_session=me) == []
    assert {h.session_id for h in store.search_messages("HELLO_7F3K2_BASELINE")} == {old, me}


def test_search_reads_the_conversation_not_calls_or_the_lanes_words(tmp_path):
    store = Store(tmp_path / "s.db")
    past = store.create_session()
    call = '{"name": "memory", "arguments": {"content": "PLUM-7"}}'
    store.add_message(past, "assistant", call, tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": "{}"}}])
    store.add_message(past, "system", "The latest tool result was: PLUM-7", lane_note=True)
    assert store.search_messages("PLUM-7") == []
    store.add_message(past, "tool", "saved to memory: 'PLUM-7'", tool_call_id="c1",
                      tool_name="memory")
    [hit] = store.search_messages("PLUM-7")
    assert (hit.role, hit.snippet) == ("tool", "saved to memory: 'PLUM-7'")
    store.add_message(past, "assistant", '{"name": "memory", "arguments": {"content": "PLUM-7"')
    store.add_message(past, "user", "a long note: my locker code is PLUM-7, keep it " + "x " * 40)
    [hit] = store.search_messages("PLUM-7")
    assert hit.role == "user" and "my locker code is PLUM-7, keep it" in hit.snippet


def test_unknown_role_is_rejected_by_the_schema(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    with pytest.raises(sqlite3.IntegrityError):
        store.add_message(session, "wizard", "x")


def test_many_messages_are_one_transaction(tmp_path):
    """add_messages writes every row or none: a bad row anywhere leaves nothing behind."""
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    many = [{"role": "user", "content": f"message {i}"} for i in range(5000)]
    with pytest.raises(sqlite3.IntegrityError):
        store.add_messages(session, [*many, {"role": "narrator", "content": "bad"}])
    assert store.messages(session) == []
    store.add_messages(session, many)
    assert [m["content"] for m in store.messages(session)] == [m["content"] for m in many]


def test_the_store_and_its_wal_files_are_private(tmp_path):
    store = Store(tmp_path / "lane" / "s.db")
    store.add_message(store.create_session(), "user", "secret")
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "lane").iterdir()}
    assert modes == {"s.db": 0o600, "s.db-wal": 0o600, "s.db-shm": 0o600}
    assert (tmp_path / "lane").stat().st_mode & 0o777 == 0o700


def test_an_older_store_is_made_private_when_opened(tmp_path):
    path = tmp_path / "s.db"
    Store(path).close()
    path.chmod(0o644)
    Store(path).close()
    assert path.stat().st_mode & 0o777 == 0o600


def test_executions_of_an_older_store_keep_their_rows_and_may_now_be_running(tmp_path):
    """The migration that admits 'running' and 'abandoned' rebuilds tool_executions with its rows."""
    from stack.store.schema import MIGRATIONS
    db = sqlite3.connect(tmp_path / "s.db")
    for number, script in enumerate(MIGRATIONS[:6], start=1):
        db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
    db.execute("INSERT INTO sessions(id, created_at) VALUES ('s', 'now')")
    db.execute("INSERT INTO tool_executions(id, session_id, tool_name, origin, status, started_at)"
               " VALUES (7, 's', 'terminal', 'native', 'ok', 'then')")
    db.commit()
    db.close()
    store = Store(tmp_path / "s.db")
    assert [(e["id"], e["status"]) for e in store.executions("s")] == [(7, "ok")]
    asked = store.add_message("s", "assistant", "", tool_calls=[{"id": "c"}])
    store.start_execution("s", asked, tool_call_id="c", tool_name="terminal", via_bridge=False,
                          origin="native", arguments="{}")
    assert [e["status"] for e in store.executions("s")] == ["ok", "running"]
