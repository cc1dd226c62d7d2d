"""The lane's own model calls (a decision; once, restatements and judgements) and the replies it held
back live in lane_calls, not in the conversation: a new store writes them there, and an older store's
rows move there on opening."""

import sqlite3

from stack.store import HELD, Store
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


# The migration that moved held-back replies out of the conversation: stores before it kept each as
# an assistant row followed at once by the lane's note starting with this.
BEFORE_HELD = next(n for n, script in enumerate(MIGRATIONS, start=1) if "ADD COLUMN reason" in script) - 1
HELD_NOTE = "Answer not passed on: "
LEAVES_OUT = "it leaves out what the tools returned"
FALLBACK = "I could not write a reliable answer. What ran for this request:\n- add returned 5"


def store_with_held_back_rows(path):
    """A store as the lane wrote it before held-back replies left `messages`: a turn whose answer
    was held back twice (written again once), a lane call made after the first note, the lane's
    own account, and another session's rows in between."""
    db = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:BEFORE_HELD], start=1):
        db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
    for session in ("held", "other"):
        db.execute("INSERT INTO sessions(id, created_at) VALUES (?, '2026-11-01T10:00:00.000+00:00')", (session,))
    clock = iter(range(10, 60))

    def at():
        return f"2026-11-01T10:00:{next(clock)}.000+00:00"

    def message(session, role, content, tokens=None, lane_note=0, tool_calls=None):
        return db.execute(
            "INSERT INTO messages(session_id, role, content, tool_calls, prompt_tokens, completion_tokens,"
            " cached_tokens, created_at, lane_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session, role, content, tool_calls, tokens, 7 if tokens else None, 50 if tokens else None,
             at(), lane_note)).lastrowid

    def decide(after, content):
        db.execute("INSERT INTO lane_calls(session_id, after_message_id, purpose, content, prompt_tokens,"
                   " completion_tokens, cached_tokens, created_at) VALUES ('held', ?, 'decide', ?, 90, 4, 80, ?)",
                   (after, content, at()))

    ids = {"user": message("held", "user", "what is 2 plus 3?")}
    decide(ids["user"], '{"next": "add"}')
    ids["call"] = message("held", "assistant", "", 200, tool_calls='[{"id": "c1", "type": "function", '
                          '"function": {"name": "add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}}]')
    ids["tool"] = message("held", "tool", "5")
    message("held", "assistant", "Done!", 300)
    message("other", "assistant", "Sure.", 120)  # another session's row between the answer and its note
    note = message("held", "system", HELD_NOTE + LEAVES_OUT, lane_note=1)
    decide(note, '{"next": "answer"}')
    message("held", "assistant", "All done!", 310)
    message("held", "system", f"{HELD_NOTE}{LEAVES_OUT}; a stock apology", lane_note=1)
    ids["account"] = message("held", "assistant", FALLBACK, lane_note=1)
    message("other", "user", "and you?")
    message("other", "system", HELD_NOTE + "no answer before it", lane_note=1)  # follows no answer: stays
    db.commit()
    db.close()
    return ids


def test_an_older_store_s_held_back_replies_leave_the_conversation_for_lane_calls(tmp_path):
    path = tmp_path / "state.db"
    ids = store_with_held_back_rows(path)
    store = Store(path)
    db = sqlite3.connect(path)
    # the conversation is what the client got
    assert db.execute("SELECT content FROM messages WHERE session_id = 'held' AND role = 'assistant'"
                      " AND tool_calls IS NULL ORDER BY id").fetchall() == [(FALLBACK,)]
    assert db.execute("SELECT count(*) FROM messages WHERE session_id = 'held'"
                      " AND content LIKE 'Answer not passed on%'").fetchone() == (0,)
    assert db.execute("SELECT role, content FROM messages WHERE session_id = 'other' ORDER BY id").fetchall() == [
        ("assistant", "Sure."), ("user", "and you?"), ("system", HELD_NOTE + "no answer before it")]
    # the held-back replies, with why and what they cost, where the lane made them; the decision
    # made after the first one's note now follows the message before that reply
    assert [(c["purpose"], c["content"], c["reason"], c["prompt_tokens"], c["completion_tokens"],
             c["cached_tokens"], c["after_message_id"]) for c in store.lane_calls("held")] == [
        ("decide", '{"next": "add"}', None, 90, 4, 80, ids["user"]),
        ("held", "Done!", LEAVES_OUT, 300, 7, 50, ids["tool"]),
        ("decide", '{"next": "answer"}', None, 90, 4, 80, ids["tool"]),
        ("held", "All done!", f"{LEAVES_OUT}; a stock apology", 310, 7, 50, ids["tool"])]
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    db.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    assert store.search_messages("done") == []  # a held-back reply is not found by session search
    db.close()
    store.close()


def test_a_held_back_reply_is_a_lane_call_with_its_reason(tmp_path):
    store = Store(tmp_path / "state.db")
    session = store.create_session()
    asked = store.add_message(session, "user", "what is 2 plus 3?")
    store.add_lane_call(session, HELD, "Done!", reason=LEAVES_OUT, prompt_tokens=300,
                        completion_tokens=7, cached_tokens=50)
    [call] = store.lane_calls(session)
    assert (call["after_message_id"], call["purpose"], call["content"], call["reason"]) == (
        asked, "held", "Done!", LEAVES_OUT)
    store.close()
