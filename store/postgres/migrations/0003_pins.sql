-- Pinned definitions of upstream MCP tools (package upstream). A changed
-- definition is kept as pending until a human accepts it; pending_hash is
-- '' when nothing is pending.
CREATE TABLE tool_pins (
    server       TEXT   NOT NULL,
    tool         TEXT   NOT NULL,
    hash         TEXT   NOT NULL,
    definition   BYTEA  NOT NULL,
    pinned_us    BIGINT NOT NULL,
    pending_hash TEXT   NOT NULL DEFAULT '',
    pending_def  BYTEA  NOT NULL DEFAULT '',
    pending_us   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (server, tool)
);
