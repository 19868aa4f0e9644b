-- The world's services (store.Agents, Inboxes, Chats, Tasks, Knowledge,
-- Memory, State, Timers, Leases; docs/storage.md, "World services").
-- Times are microseconds since the Unix epoch (0: none). seq columns are
-- identities: they order lists and are the position behind their cursors.
-- Keys ordered by text are COLLATE "C" (byte order, as SQLite's).
CREATE TABLE agents (
    id         TEXT    COLLATE "C" PRIMARY KEY,
    archetype  TEXT    NOT NULL,
    status     TEXT    NOT NULL CHECK (status IN ('running', 'stopped')),
    created_by TEXT    NOT NULL,
    created_us BIGINT  NOT NULL,
    status_us  BIGINT  NOT NULL
);

CREATE TABLE messages (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    to_agent   TEXT    NOT NULL,
    from_agent TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    reply_to   TEXT    NOT NULL,
    chat       TEXT    NOT NULL,
    created_us BIGINT  NOT NULL,
    acked_us   BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX messages_inbox ON messages (to_agent, seq);
CREATE INDEX messages_unacked ON messages (to_agent, seq) WHERE acked_us = 0;
CREATE INDEX messages_reply ON messages (reply_to, seq) WHERE reply_to <> '';

CREATE TABLE chats (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL,
    creator    TEXT    NOT NULL,
    gated      BOOLEAN NOT NULL,
    created_us BIGINT  NOT NULL
);
CREATE TABLE chat_members (
    chat     TEXT    NOT NULL,
    agent    TEXT    COLLATE "C" NOT NULL,
    added_us BIGINT  NOT NULL,
    PRIMARY KEY (chat, agent)
);
CREATE INDEX chat_members_agent ON chat_members (agent, chat);
CREATE TABLE chat_messages (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    chat       TEXT    NOT NULL,
    from_agent TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    created_us BIGINT  NOT NULL
);
CREATE INDEX chat_messages_chat ON chat_messages (chat, seq);

CREATE TABLE tasks (
    seq         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    title       TEXT    NOT NULL,
    description TEXT    NOT NULL,
    creator     TEXT    NOT NULL,
    assignee    TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    version     BIGINT  NOT NULL,
    created_us  BIGINT  NOT NULL,
    updated_us  BIGINT  NOT NULL
);
CREATE INDEX tasks_assignee ON tasks (assignee, seq);
CREATE INDEX tasks_creator ON tasks (creator, seq);

CREATE TABLE knowledge (
    key        TEXT    COLLATE "C" PRIMARY KEY,
    title      TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    author     TEXT    NOT NULL,
    read_acl   TEXT    NOT NULL, -- JSON array of strings
    write_acl  TEXT    NOT NULL,
    version    BIGINT  NOT NULL,
    created_us BIGINT  NOT NULL,
    updated_us BIGINT  NOT NULL
);

CREATE TABLE memory (
    agent      TEXT    NOT NULL,
    key        TEXT    COLLATE "C" NOT NULL,
    value      TEXT    NOT NULL,
    updated_us BIGINT  NOT NULL,
    PRIMARY KEY (agent, key)
);

CREATE TABLE world_state (
    key        TEXT    COLLATE "C" PRIMARY KEY,
    value      TEXT    NOT NULL,
    version    BIGINT  NOT NULL,
    updated_us BIGINT  NOT NULL
);

CREATE TABLE timers (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    owner      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('timer', 'cron', 'watch')),
    spec       TEXT    NOT NULL,
    next_us    BIGINT  NOT NULL,
    action     TEXT    NOT NULL,
    enabled    BOOLEAN NOT NULL,
    version    BIGINT  NOT NULL,
    created_us BIGINT  NOT NULL,
    updated_us BIGINT  NOT NULL,
    fired_us   BIGINT  NOT NULL DEFAULT 0,
    fires      BIGINT  NOT NULL DEFAULT 0,
    UNIQUE (owner, name)
);
CREATE INDEX timers_due ON timers (next_us) WHERE enabled AND next_us <> 0;
-- One row per fired occurrence: the primary key makes each fire once.
CREATE TABLE timer_fires (
    timer_id TEXT    NOT NULL,
    at_us    BIGINT  NOT NULL,
    holder   TEXT    NOT NULL,
    fired_us BIGINT  NOT NULL,
    PRIMARY KEY (timer_id, at_us)
);

-- Named leases (store.Leases), measured by the server's clock (clock_timestamp()).
CREATE TABLE leases (
    name        TEXT    PRIMARY KEY,
    holder      TEXT    NOT NULL,
    fence       BIGINT  NOT NULL,
    acquired_us BIGINT  NOT NULL,
    expires_us  BIGINT  NOT NULL
);
