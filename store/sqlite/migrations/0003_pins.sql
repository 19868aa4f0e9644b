-- Pinned definitions of upstream MCP tools (package upstream). A changed
-- definition is kept as pending until a human accepts it; pending_hash is
-- '' when nothing is pending.
CREATE TABLE tool_pins (
    server       TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    hash         TEXT    NOT NULL,
    definition   BLOB    NOT NULL,
    pinned_us    INTEGER NOT NULL,
    pending_hash TEXT    NOT NULL DEFAULT '',
    pending_def  BLOB    NOT NULL DEFAULT x'',
    pending_us   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (server, tool)
);
