-- The generation of the admission state (sessions, limit_overrides,
-- counters). It only grows: every group commit increments it in the UPDATE
-- that moves the head (also when the batch appended nothing), and every
-- other write of admission state increments it in its own transaction
-- through the statement triggers below. A committer may reuse the admission
-- state it cached after its last batch only while gen is still the value
-- that batch wrote (docs/storage.md, "Cache across batches").
ALTER TABLE audit_head ADD COLUMN gen BIGINT NOT NULL DEFAULT 0;

-- BEFORE ... FOR EACH STATEMENT: the head row is locked (and gen bumped)
-- before the statement touches a single row of these tables, so every
-- writer takes the head lock first, as the group commit does (no lock-order
-- deadlock), and waits for a running batch to commit. This covers every
-- writer: this program's Acquire, SetLimitOverride, ResetSession and
-- SessionStart, older binaries still running during an upgrade, and
-- hand-written SQL.
-- The function resolves audit_head in the schema it was created in
-- (search_path FROM CURRENT), whatever the writer's search_path.
CREATE FUNCTION armory_bump_admission_gen() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE audit_head SET gen = gen + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER counters_gen BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON counters
    FOR EACH STATEMENT EXECUTE FUNCTION armory_bump_admission_gen();
CREATE TRIGGER limit_overrides_gen BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON limit_overrides
    FOR EACH STATEMENT EXECUTE FUNCTION armory_bump_admission_gen();
CREATE TRIGGER sessions_gen BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION armory_bump_admission_gen();

-- The single-round-trip group commit (a batch whose admission state is all
-- cached) starts with this: it locks the head row and fails with SQLSTATE
-- AR001 unless the head (seq, hash) and the generation are still what the
-- committer's last batch wrote, so that nothing the batch then sends in the
-- same pipeline can commit on a stale head or stale admission state.
CREATE FUNCTION armory_expect_head(want_seq BIGINT, want_hash TEXT, want_gen BIGINT) RETURNS VOID LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM 1 FROM audit_head WHERE id = 1 AND seq = want_seq AND hash = want_hash AND gen = want_gen FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'armory: audit head or admission state changed since the last batch' USING ERRCODE = 'AR001';
    END IF;
END
$$;
