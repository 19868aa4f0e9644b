-- API tokens of the server. Only the SHA-256 of a token is stored; lookups
-- go by that hash. An admin token has admin = true and agent = ''.
CREATE TABLE tokens (
    id         TEXT    PRIMARY KEY,
    hash       TEXT    NOT NULL UNIQUE,
    admin      BOOLEAN NOT NULL,
    agent      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    created_us BIGINT  NOT NULL,
    revoked_us BIGINT  NOT NULL DEFAULT 0,
    CHECK ((admin AND agent = '') OR (NOT admin AND agent <> ''))
);
