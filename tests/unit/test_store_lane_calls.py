"""The lane's own model calls (a decision; once, restatements and judgements) live in lane_calls, not in the
conversation: a new store writes them there, and an older store's rows move there on opening."""

import sqlite3

from stack.store import Store
from stack.store.schema import MIGRATIONS

# The migration that gave messages its lane_call column: stores up to it kept the lane's own model
# calls as role='assistant' rows of the conversation.
BEFORE_LANE_CALLS = next(n for n, script in enumerate(MIGRATIONS, start=1)
                         if "ADD COLUMN lane_call" in script)
LANE_ROWS_IN_MESSAGES = "SELECT count(*) FROM messages WHERE role = 'assistant' AND lane_call IS NOT NULL"


def old_store(path):
    """A store as a lane before lane_calls wrote it: one turn read by restatement and judgement."""
    db = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:BEFORE_LANE_CALLS], start=1):
        db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
    db.execute("INSERT INTO sessions(id, created_at) VALUES ('old', '2026-11-01T10:00:00.000+00:00')")
    rows = [("system", "the lane's prompt", None, 1, None),
            ("user", "swap 5 EUR into yen", None, 0, None),
            ("assistant", "convert currency QUINCE", 210, 0, "restate"),
            ("assistant", "currency_convert: Yes (yes 0.90)", 420, 0, "judge"),
            ("assistant", "about 800 JPY", 300, 0, None),
            ("user", "thanks", None, 0, None)]
    for n, (role, content, prompt_tokens, lane_prompt, lane_call) in enumerate(rows):
        db.execute("INSERT INTO messages(session_id, role, content, prompt_tokens, completion_tokens,"
                   " cached_tokens, created_at, lane_prompt, lane_call)"
                   " VALUES ('old', ?, ?, ?, ?, ?, ?, ?, ?)",
                   (role, content, prompt_tokens, 5 if prompt_tokens else None,
                    100 if prompt_tokens else None, f"2026-11-01T10:00:0{n}.000+00:00", lane_prompt,
                    lane_call))
    db.commit()
    assert db.execute(LANE_ROWS_IN_MESSAGES).fetchone() == (2,)
    db.close()


def test_an_older_store_s_lane_calls_leave_the_conversation_on_opening(tmp_path):
    path = tmp_path / "state.db"
    old_store(path)
    store = Store(path)
    db = sqlite3.connect(path)
    assert db.execute(LANE_ROWS_IN_MESSAGES).fetchone() == (0,)
    assert db.execute("SELECT role, content FROM messages WHERE role = 'assistant'").fetchall() == [
        ("assistant", "about 800 JPY")]
    user_id = db.execute("SELECT id FROM messages WHERE content = 'swap 5 EUR into yen'").fetchone()[0]
    assert [(c["purpose"], c["content"], c["prompt_tokens"], c["completion_tokens"], c["cached_tokens"],
             c["after_message_id"], c["created_at"]) for c in store.lane_calls("old")] == [
        ("restate", "convert currency QUINCE", 210, 5, 100, user_id, "2026-11-01T10:00:02.000+00:00"),
        ("judge", "currency_convert: Yes (yes 0.90)", 420, 5, 100, user_id,
         "2026-11-01T10:00:03.000+00:00")]
    # the full-text index left with the rows: consistent, and the restatement is not found
    db.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    assert db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'QUINCE'").fetchone() == (0,)
    assert store.search_messages("QUINCE") == []
    assert [h.session_id for h in store.search_messages("yen")] == ["old"]
    db.close()
    store.close()


def test_a_lane_call_is_stored_after_the_session_s_last_message(tmp_path):
    store = Store(tmp_path / "state.db")
    session = store.create_session()
    asked = store.add_message(session, "user", "swap 5 EUR into yen")
    store.add_lane_call(session, "decide", "convert currency", prompt_tokens=50,
                        completion_tokens=4, cached_tokens=40)
    [call] = store.lane_calls(session)
    assert (call["after_message_id"], call["purpose"], call["prompt_tokens"]) == (asked, "decide", 50)
    assert [m["role"] for m in store.messages(session)] == ["user"]
    assert store.search_messages("currency") == []
    store.close()
