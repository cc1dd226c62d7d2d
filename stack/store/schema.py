"""The session store's schema, as a list of migrations.

The tables are a public contract (DESIGN.md): the check script, `lane sessions` and people's own
SQL read them. A change is a new entry at the end of MIGRATIONS, never an edit of an old one;
`PRAGMA user_version` records how many have been applied.
"""

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sessions(
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        source TEXT,
        title TEXT,
        model TEXT
    );
    CREATE TABLE messages(
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        created_at TEXT NOT NULL,
        lane_prompt INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX messages_by_session ON messages(session_id, id);
    CREATE TABLE tool_executions(
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message_id INTEGER REFERENCES messages(id),
        tool_call_id TEXT,
        tool_name TEXT NOT NULL,
        via_bridge INTEGER NOT NULL DEFAULT 0,
        origin TEXT NOT NULL CHECK (origin IN ('native', 'content')),
        arguments TEXT,
        status TEXT NOT NULL CHECK (status IN ('ok', 'error', 'refused')),
        result TEXT,
        error TEXT,
        started_at TEXT NOT NULL,
        duration_ms REAL
    );
    CREATE INDEX executions_by_session ON tool_executions(session_id, id);
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, content='messages', content_rowid='id', tokenize='unicode61'
    );
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, coalesce(new.content, ''));
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES ('delete', old.id, coalesce(old.content, ''));
    END;
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES ('delete', old.id, coalesce(old.content, ''));
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, coalesce(new.content, ''));
    END;
    """,
    """
    CREATE TABLE todos(
        session_id TEXT NOT NULL REFERENCES sessions(id),
        position INTEGER NOT NULL,
        text TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, position)
    );
    """,
    # cached_tokens: prompt tokens the llm served from its cache, per model call (like
    # prompt_tokens). memory_snapshot: the memory as the session's first turn saw it; the system
    # prompt is built from it for the whole session, so a memory write never moves the prompt's
    # cached prefix (the write shows in its tool result, and in later sessions). lane_note: a
    # message the lane wrote inside a turn (promoted tools, a correction, an answer it wrote
    # because the model gave none), kept as evidence and not shown to the model in later turns.
    """
    ALTER TABLE messages ADD COLUMN cached_tokens INTEGER;
    ALTER TABLE sessions ADD COLUMN memory_snapshot TEXT;
    ALTER TABLE messages ADD COLUMN lane_note INTEGER NOT NULL DEFAULT 0;
    """,
    # lane_call: a model call the lane made for itself inside a turn, and what for (then the
    # request's restatement and the judgement of its best hits, levers since removed). Its tokens
    # count like any model call's; its answer is evidence, never shown to the model or found by
    # session search.
    """
    ALTER TABLE messages ADD COLUMN lane_call TEXT;
    """,
    # returned_calls: in proxy mode (a request with `tools`) the client owns the tools, so a call
    # the lane hands back is not a call the lane ran (tool_executions): it is one row here, under
    # the client's real tool (never a bridge; via_bridge=1 when the model reached it through
    # tool_call), with the arguments as returned (validated against the client's schema, repaired).
    # result_message_id/result: the client's role=tool message answering it, once it comes back.
    """
    CREATE TABLE returned_calls(
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message_id INTEGER REFERENCES messages(id),
        tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        via_bridge INTEGER NOT NULL DEFAULT 0,
        origin TEXT NOT NULL CHECK (origin IN ('native', 'content')),
        arguments TEXT,
        returned_at TEXT NOT NULL,
        result_message_id INTEGER REFERENCES messages(id),
        result TEXT
    );
    CREATE INDEX returned_calls_by_session ON returned_calls(session_id, id);
    CREATE INDEX returned_calls_by_call ON returned_calls(tool_call_id);
    """,
    # lane_calls: the model calls the lane makes for itself inside a turn, kept apart from the
    # conversation (`messages`), so a user's SELECT ... WHERE role = 'assistant' reads answers
    # only. purpose: 'decide' (the decision question, agent/decide.py), 'fit' (proxy mode's
    # second look at the best-matching client tool after an "answer"; content `NAME: yes P`), 'declined'
    # (proxy mode's question whether a reply in words declines the request; content `yes P`); older stores
    # also hold 'restate' and 'judge' rows of levers since removed, docs/measurements.md.
    # after_message_id: the session's last message when the call was made, which places it in the
    # conversation. Their tokens count in the turn's usage;
    # their text is evidence of what the lane decided with, never shown to the model or found by
    # session search. Earlier stores kept them as messages rows with lane_call set: moved here
    # (their FTS entries leave with them, through messages_fts_delete); messages.lane_call stays,
    # always NULL, so SQL written against it keeps working.
    """
    CREATE TABLE lane_calls(
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        after_message_id INTEGER REFERENCES messages(id),
        purpose TEXT NOT NULL,
        content TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cached_tokens INTEGER,
        created_at TEXT NOT NULL
    );
    CREATE INDEX lane_calls_by_session ON lane_calls(session_id, id);
    INSERT INTO lane_calls(session_id, after_message_id, purpose, content, prompt_tokens,
                           completion_tokens, cached_tokens, created_at)
        SELECT m.session_id,
               (SELECT max(p.id) FROM messages p
                 WHERE p.session_id = m.session_id AND p.id < m.id AND p.lane_call IS NULL),
               m.lane_call, m.content, m.prompt_tokens, m.completion_tokens, m.cached_tokens,
               m.created_at
        FROM messages m WHERE m.lane_call IS NOT NULL ORDER BY m.id;
    DELETE FROM messages WHERE lane_call IS NOT NULL;
    """,
    # lane_calls.reason: a reply the lane held back (purpose 'held') is not the conversation: it
    # lives here, with why it was not passed on, and `messages` keeps only the replies the client
    # got. Earlier stores kept one as an assistant row followed at once by a lane note starting
    # "Answer not passed on: " (agent/history.py's HELD_BACK then; the reasons after it): both
    # rows move here as one lane call, and a lane call placed after either of them is placed
    # after the message before them.
    """
    ALTER TABLE lane_calls ADD COLUMN reason TEXT;
    CREATE TEMP TABLE held_back AS
        SELECT a.id AS answer_id, n.id AS note_id FROM messages a JOIN messages n
            ON n.session_id = a.session_id
           AND n.id = (SELECT min(x.id) FROM messages x WHERE x.session_id = a.session_id AND x.id > a.id)
         WHERE a.role = 'assistant' AND a.tool_calls IS NULL
           AND n.role = 'system' AND n.lane_note = 1
           AND substr(n.content, 1, 22) = 'Answer not passed on: ';
    CREATE TEMP TABLE held_rows AS
        SELECT answer_id AS id FROM held_back UNION SELECT note_id FROM held_back;
    INSERT INTO lane_calls(session_id, after_message_id, purpose, content, prompt_tokens,
                           completion_tokens, cached_tokens, created_at, reason)
        SELECT a.session_id,
               (SELECT max(p.id) FROM messages p WHERE p.session_id = a.session_id AND p.id < a.id
                   AND p.id NOT IN (SELECT id FROM held_rows)),
               'held', a.content, a.prompt_tokens, a.completion_tokens, a.cached_tokens,
               a.created_at, substr(n.content, 23)
        FROM held_back h JOIN messages a ON a.id = h.answer_id JOIN messages n ON n.id = h.note_id
        ORDER BY a.id;
    UPDATE lane_calls SET after_message_id = (
            SELECT max(p.id) FROM messages p WHERE p.session_id = lane_calls.session_id
               AND p.id < lane_calls.after_message_id AND p.id NOT IN (SELECT id FROM held_rows))
        WHERE after_message_id IN (SELECT id FROM held_rows);
    DELETE FROM messages WHERE id IN (SELECT id FROM held_rows);
    DROP TABLE held_back;
    DROP TABLE held_rows;
    """,
    # responses: the OpenAI Responses API's response ids (`resp_…`), each with the session its turn
    # ran in and the client's conversation as it stood after it (chat-shaped messages: the
    # request's input, earlier responses' conversations included, and this response's output;
    # never the request's `instructions`, which OpenAI does not carry over). A request naming it
    # as `previous_response_id` continues that session with that conversation. A request with
    # `store: false` writes no row here; its turn is recorded like any other.
    """
    CREATE TABLE responses(
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        conversation TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    """,
    # tool_executions.status gains 'running' (the row is written before the tool runs, so a run
    # the shim never saw finish, because it died or was killed, still leaves its row) and
    # 'abandoned' (the client left mid-run: the tool was stopped). SQLite cannot change a CHECK
    # constraint in place, so the table is rebuilt with its rows and ids.
    """
    CREATE TABLE tool_executions_v7(
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message_id INTEGER REFERENCES messages(id),
        tool_call_id TEXT,
        tool_name TEXT NOT NULL,
        via_bridge INTEGER NOT NULL DEFAULT 0,
        origin TEXT NOT NULL CHECK (origin IN ('native', 'content')),
        arguments TEXT,
        status TEXT NOT NULL
            CHECK (status IN ('running', 'ok', 'error', 'refused', 'abandoned')),
        result TEXT,
        error TEXT,
        started_at TEXT NOT NULL,
        duration_ms REAL
    );
    INSERT INTO tool_executions_v7(id, session_id, message_id, tool_call_id, tool_name, via_bridge,
                                   origin, arguments, status, result, error, started_at, duration_ms)
        SELECT id, session_id, message_id, tool_call_id, tool_name, via_bridge, origin, arguments,
               status, result, error, started_at, duration_ms FROM tool_executions;
    DROP TABLE tool_executions;
    ALTER TABLE tool_executions_v7 RENAME TO tool_executions;
    CREATE INDEX executions_by_session ON tool_executions(session_id, id);
    """,
    # lane_calls.path: the form a lane call took upstream (agent/constrained.py): 'schema' (held to
    # a JSON schema by response_format), 'tool' (the schema as a tool's parameters, for a server
    # that makes calls but ignores response_format), 'text' (read out of free text and
    # validated), 'logprobs' (a yes/no read from log-probabilities); NULL for an unconstrained
    # call and for rows written before it existed.
    """
    ALTER TABLE lane_calls ADD COLUMN path TEXT;
    """,
)
