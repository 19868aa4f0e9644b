-- Leased claims on running an approved call (store.RunClaims): one row per
-- approval whose tool was started. The holder renews expires_us while the
-- tool runs; a claim still 'running' past expires_us belongs to a process
-- that died, and is resolved as 'interrupted' by another caller, never run
-- again. Times are microseconds since the Unix epoch by the database server's clock
-- (clock_timestamp()), so that replicas need not agree on the time.
CREATE TABLE run_claims (
    approval_id TEXT    PRIMARY KEY,
    holder      TEXT    NOT NULL,
    call_id     TEXT    NOT NULL,
    claimed_us  BIGINT  NOT NULL,
    expires_us  BIGINT  NOT NULL,
    state       TEXT    NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'finished', 'interrupted')),
    resolved_by TEXT    NOT NULL DEFAULT '',
    resolved_us BIGINT  NOT NULL DEFAULT 0
);
