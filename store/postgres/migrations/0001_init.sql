-- Audit trail: one row per record; seq is the chain position. Two indexes
-- only (agent, call ID): every index costs each append; other filters scan
-- backwards from the newest seq and stop at the limit.
CREATE TABLE audit_records (
    seq           BIGINT PRIMARY KEY,
    id            TEXT   NOT NULL,
    time_us       BIGINT NOT NULL,
    phase         TEXT   NOT NULL,
    agent         TEXT   NOT NULL,
    session       TEXT   NOT NULL,
    task          TEXT   NOT NULL,
    tool          TEXT   NOT NULL,
    args          TEXT   NOT NULL,
    stages        TEXT   NOT NULL,
    permission    TEXT   NOT NULL,
    approval_id   TEXT   NOT NULL,
    decided_by    TEXT   NOT NULL,
    status        TEXT   NOT NULL,
    result        TEXT   NOT NULL,
    duration_ms   BIGINT NOT NULL,
    justification TEXT   NOT NULL,
    prev_hash     TEXT   NOT NULL,
    hash          TEXT   NOT NULL
);
CREATE INDEX audit_records_agent ON audit_records (agent, seq);
CREATE INDEX audit_records_call ON audit_records (id);

-- The head of the chain. Appenders lock this row (FOR UPDATE) before reading
-- the last hash and move it in the same transaction.
CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  BIGINT  NOT NULL,
    hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, '');

CREATE TABLE approvals (
    id              TEXT   PRIMARY KEY,
    agent           TEXT   NOT NULL,
    session         TEXT   NOT NULL,
    task            TEXT   NOT NULL,
    tool            TEXT   NOT NULL,
    args            TEXT   NOT NULL,
    args_hash       TEXT   NOT NULL DEFAULT '',
    reason          TEXT   NOT NULL,
    level           TEXT   NOT NULL,
    created_us      BIGINT NOT NULL,
    status          TEXT   NOT NULL,
    decided_by      TEXT   NOT NULL DEFAULT '',
    decision_reason TEXT   NOT NULL DEFAULT '',
    decided_us      BIGINT NOT NULL DEFAULT 0,
    route           TEXT   NOT NULL,
    result          TEXT
);
CREATE INDEX approvals_status ON approvals (status, created_us);

CREATE TABLE counters (
    session TEXT   NOT NULL,
    name    TEXT   NOT NULL,
    value   BIGINT NOT NULL,
    PRIMARY KEY (session, name)
);

CREATE TABLE limit_overrides (
    session TEXT   NOT NULL,
    name    TEXT   NOT NULL,
    max     BIGINT NOT NULL,
    PRIMARY KEY (session, name)
);

CREATE TABLE sessions (
    id         TEXT   PRIMARY KEY,
    started_us BIGINT NOT NULL
);
