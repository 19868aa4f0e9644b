-- API tokens of the server. Only the SHA-256 of a token is stored; lookups
-- go by that hash. An admin token has admin = 1 and agent = ''.
CREATE TABLE tokens (
    id         TEXT    PRIMARY KEY,
    hash       TEXT    NOT NULL UNIQUE,
    admin      INTEGER NOT NULL,
    agent      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    created_us INTEGER NOT NULL,
    revoked_us INTEGER NOT NULL DEFAULT 0,
    CHECK ((admin = 1 AND agent = '') OR (admin = 0 AND agent <> ''))
);
