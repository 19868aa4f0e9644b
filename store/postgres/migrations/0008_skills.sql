-- Skill state (store.Skills): which agent holds which skill pack. A part of
-- a hold is set while its time is not 0 (µs since the Unix epoch); a row
-- exists while either part is set. The primary key orders lists (agent,
-- then skill, COLLATE "C": by bytes, as SQLite's) and counts an agent's
-- holds; skill_states_skill serves ForgetSkill.
CREATE TABLE skill_states (
    agent        TEXT    COLLATE "C" NOT NULL,
    skill        TEXT    COLLATE "C" NOT NULL,
    acquired_us  BIGINT  NOT NULL,
    activated_us BIGINT  NOT NULL,
    updated_us   BIGINT  NOT NULL,
    PRIMARY KEY (agent, skill),
    CHECK (acquired_us <> 0 OR activated_us <> 0)
);
CREATE INDEX skill_states_skill ON skill_states (skill);
