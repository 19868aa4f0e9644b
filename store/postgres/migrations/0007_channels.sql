-- The conversations of external channels (store.Channels; the channel
-- context of a call) and their messages. Times in microseconds since the
-- Unix epoch; seq orders a conversation's messages.
CREATE TABLE channels (
    id         TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    creator    TEXT    NOT NULL,
    version    BIGINT  NOT NULL,
    created_us BIGINT  NOT NULL,
    updated_us BIGINT  NOT NULL
);
CREATE TABLE channel_messages (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    channel    TEXT    NOT NULL,
    from_agent TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    to_agent   TEXT    NOT NULL,
    created_us BIGINT  NOT NULL
);
CREATE INDEX channel_messages_channel ON channel_messages (channel, seq);
