//! Embedded, versioned migrations. [`migrate`] runs them on open, each version in a transaction
//! of its own under an advisory lock, so concurrent openers never race, a failed step leaves
//! nothing of itself behind, and the versions before it stay applied.

use crate::error::PgError;
use crate::statement::Statements;
use deadpool_postgres::Client;

/// The migrations, in order. Never edit a released one: add a new version.
pub(crate) const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "memories table, full-text index",
        r#"
CREATE TABLE memloop_memories (
    project_id   text        NOT NULL,
    rel_path     text        NOT NULL,
    name         text        NOT NULL,
    description  text        NOT NULL,
    memory_type  text,
    body         text        NOT NULL,
    content      text        NOT NULL,
    sha256       text        NOT NULL,
    version      bigint      NOT NULL,
    seq          bigint      GENERATED ALWAYS AS IDENTITY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   text        NOT NULL,
    write_id     uuid        NOT NULL,
    search       tsvector    GENERATED ALWAYS AS (
        setweight(to_tsvector('english', name), 'A') ||
        setweight(to_tsvector('english', description), 'B') ||
        setweight(to_tsvector('english', body), 'C')
    ) STORED,
    PRIMARY KEY (project_id, rel_path),
    CHECK (version > 0)
);
-- No pending list: every search sees a compact index (the list makes searches scan recent
-- inserts linearly, and the planner then falls back to a sequential scan).
CREATE INDEX memloop_memories_search ON memloop_memories USING gin (search) WITH (fastupdate = off);
CREATE INDEX memloop_memories_recent ON memloop_memories (project_id, updated_at DESC);
CREATE INDEX memloop_memories_order ON memloop_memories (project_id, seq);
"#,
    ),
    (
        2,
        "search in every script: words and CJK/Hangul/Thai character bigrams",
        r#"
-- Overlapping character bigrams of every Han/Kana, Hangul and Thai run of `t` (NFKC,
-- lowercase; a one-character run is its own term), space-separated: the same n-grams the recall
-- analyzer makes, so `to_tsvector('simple', ..)` indexes them as words.
CREATE FUNCTION memloop_grams(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT coalesce(string_agg(substr(m[1], i, 2), ' '), '')
    FROM regexp_matches(
        lower(normalize(t, NFKC)),
        '([\u3005-\u3007\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]+|[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff]+|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]+)',
        'g') AS m,
        generate_series(1, greatest(char_length(m[1]) - 1, 1)) AS i
$f$;
-- `t` (NFKC) with spaces around every Han/Kana, Hangul and Thai run, so a Latin word glued to
-- Chinese text ("使用PostgreSQL作为") is a word of its own for the parser.
CREATE FUNCTION memloop_words(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT regexp_replace(normalize(t, NFKC), '([\u3005-\u3007\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]+|[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff]+|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]+)', ' \1 ', 'g')
$f$;
-- Words through the `russian` configuration (Snowball Russian for Cyrillic words, Snowball
-- English for ASCII ones), plus the bigrams; name over description over body.
ALTER TABLE memloop_memories ADD COLUMN search_text tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('russian', memloop_words(name))
        || to_tsvector('simple', memloop_grams(name)), 'A') ||
    setweight(to_tsvector('russian', memloop_words(description))
        || to_tsvector('simple', memloop_grams(description)), 'B') ||
    setweight(to_tsvector('russian', memloop_words(body))
        || to_tsvector('simple', memloop_grams(body)), 'C')
) STORED;
CREATE INDEX memloop_memories_search_text ON memloop_memories
    USING gin (search_text) WITH (fastupdate = off);
-- The English-only column it replaces.
DROP INDEX memloop_memories_search;
ALTER TABLE memloop_memories DROP COLUMN search;
"#,
    ),
    (
        3,
        "change feed: the last change of every memory path, by transaction",
        r#"
-- One row per memory path ever written: whether it is deleted now, and the transaction that
-- changed it last. A reader asks for the rows whose transaction is not older than the oldest one
-- that was still running when it last looked (the snapshot's xmin), so a write that commits late
-- is never skipped (it may be reported twice, which is harmless).
CREATE TABLE memloop_changes (
    project_id text    NOT NULL,
    rel_path   text    NOT NULL,
    deleted    boolean NOT NULL,
    txid       xid8    NOT NULL DEFAULT pg_current_xact_id(),
    PRIMARY KEY (project_id, rel_path)
);
CREATE INDEX memloop_changes_since ON memloop_changes (project_id, txid);
-- The change table is named with the trigger's own schema, so a writer whose search_path
-- differs (an admin session, another tool) is recorded too.
CREATE FUNCTION memloop_record_change() RETURNS trigger
LANGUAGE plpgsql AS $f$
DECLARE
    record_sql text := format(
        'INSERT INTO %I.memloop_changes (project_id, rel_path, deleted) VALUES ($1, $2, $3)
         ON CONFLICT (project_id, rel_path)
         DO UPDATE SET deleted = EXCLUDED.deleted, txid = pg_current_xact_id()',
        TG_TABLE_SCHEMA);
BEGIN
    IF TG_OP <> 'INSERT' AND (TG_OP = 'DELETE' OR OLD.project_id <> NEW.project_id
                              OR OLD.rel_path <> NEW.rel_path) THEN
        EXECUTE record_sql USING OLD.project_id, OLD.rel_path, true;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        EXECUTE record_sql USING NEW.project_id, NEW.rel_path, false;
    END IF;
    RETURN NULL;
END
$f$;
CREATE TRIGGER memloop_changes_feed AFTER INSERT OR UPDATE OR DELETE ON memloop_memories
    FOR EACH ROW EXECUTE FUNCTION memloop_record_change();
"#,
    ),
    (
        4,
        "memory file text as written (unknown frontmatter keys, comments, body bytes)",
        r#"
-- The file text as its writer had it; NULL for rows written before this column existed, whose
-- `content` is their text. `content` stays the canonical text and `sha256` its hash.
ALTER TABLE memloop_memories ADD COLUMN source text;
"#,
    ),
    (
        5,
        "search without accents: Latin letters indexed without their diacritics, ё as е",
        r#"
-- `t` with Cyrillic ё written е and every combining mark on a Latin letter removed (decomposed,
-- the marks after a Latin base dropped, recomposed), as the recall analyzer folds a word
-- (`memloop_text::fold_accents` does the same for the query): `Zürich` is `Zurich`,
-- `Máy chủ` is `May chu`, `ёлка` is `елка`. Letters that do not decompose (`ø`, `ł`, `ß`,
-- `đ`) and the marks of other scripts (Devanagari vowel signs) stay.
CREATE FUNCTION memloop_fold(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT normalize(regexp_replace(
        normalize(translate(t, 'ёЁ', 'еЕ'), NFD),
        '([A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+',
        '\1', 'g'), NFC)
$f$;
-- The column of migration 2 with its words folded (its index goes with it).
ALTER TABLE memloop_memories DROP COLUMN search_text;
ALTER TABLE memloop_memories ADD COLUMN search_text tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('russian', memloop_fold(memloop_words(name)))
        || to_tsvector('simple', memloop_grams(name)), 'A') ||
    setweight(to_tsvector('russian', memloop_fold(memloop_words(description)))
        || to_tsvector('simple', memloop_grams(description)), 'B') ||
    setweight(to_tsvector('russian', memloop_fold(memloop_words(body)))
        || to_tsvector('simple', memloop_grams(body)), 'C')
) STORED;
CREATE INDEX memloop_memories_search_text ON memloop_memories
    USING gin (search_text) WITH (fastupdate = off);
"#,
    ),
    (
        6,
        "project ids that cannot collide: old dir-name ids, claimed once by their dir",
        r#"
-- Before this version a project without a git origin was stored under its dir's base name, so
-- two dirs of one name shared memory. Now such a project's id is `dir:<canonical path>`. The
-- ids that may be old dir names (no `/`, `:` or `@`: not an origin URL) are listed here; the
-- first project dir of that name to open claims one (its rows move to its new id) and the claim
-- is recorded, so it happens once.
CREATE TABLE memloop_project_aliases (
    legacy_id  text PRIMARY KEY,
    project_id text,
    claimed_at timestamptz
);
INSERT INTO memloop_project_aliases (legacy_id)
    SELECT DISTINCT project_id FROM memloop_memories WHERE project_id !~ '[/:@\\]';
"#,
    ),
    // How the rows of migration 7 go (the SQL comment below is released text): a keyed save
    // touches only its own `(project, caller, key)` row and takes it afresh when it is past
    // `expires_at` (`batch.rs`, `batch_attempt`); the project's other expired rows are deleted by
    // `PgMemoryStore::sweep_expired_keys`, which a store runs when it opens and then at most once
    // an hour, in the background, after a keyed save of the project.
    (
        7,
        "idempotency keys: a retried batch save replays its first outcome",
        r#"
-- One row per (project, caller, key) a client gave a batch save: the hash of what it asked
-- and the outcome it got, written in the batch's own transaction (so a batch and its key land
-- together or not at all). A row past `expires_at` no longer counts and is deleted by later
-- keyed saves of the project. `caller` is a digest naming who asked (never a credential).
CREATE TABLE memloop_idempotency (
    project_id     text        NOT NULL,
    caller         text        NOT NULL,
    key            text        NOT NULL,
    request_sha256 text        NOT NULL,
    outcome        text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (project_id, caller, key)
);
CREATE INDEX memloop_idempotency_expiry ON memloop_idempotency (project_id, expires_at);
"#,
    ),
    (
        8,
        "cheaper saves: no unused indexes, the change trigger and bigrams planned once",
        r#"
-- Reads of a whole project (`ORDER BY seq`, `ORDER BY updated_at`) read every row of the project
-- through the primary key and sort them; these two indexes were maintained on every write and
-- made a cached generic plan of a one-row lookup (project_id, rel_path) scan the whole project.
DROP INDEX IF EXISTS memloop_memories_order;
DROP INDEX IF EXISTS memloop_memories_recent;
-- The same bigrams as migration 2's, in PL/pgSQL: its query is planned once per connection
-- (an SQL function with a FROM clause is parsed and planned again on every write), and ASCII
-- text (NFKC and lowercase keep it ASCII, so it has no Han/Kana, Hangul or Thai run) has none.
CREATE OR REPLACE FUNCTION memloop_grams(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $f$
BEGIN
    IF t ~ '^[\x01-\x7f]*$' THEN
        RETURN '';
    END IF;
    RETURN (SELECT coalesce(string_agg(substr(m[1], i, 2), ' '), '')
    FROM regexp_matches(
        lower(normalize(t, NFKC)),
        '([\u3005-\u3007\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]+|[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff]+|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]+)',
        'g') AS m,
        generate_series(1, greatest(char_length(m[1]) - 1, 1)) AS i);
END
$f$;
-- Migration 2's and 5's functions, unchanged for text that is not ASCII; ASCII text is its own
-- NFKC form with no run to space out and nothing to fold, so it is returned as is.
CREATE OR REPLACE FUNCTION memloop_words(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT CASE WHEN t ~ '^[\x01-\x7f]*$' THEN t ELSE
    regexp_replace(normalize(t, NFKC), '([\u3005-\u3007\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]+|[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff]+|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]+)', ' \1 ', 'g')
    END
$f$;
CREATE OR REPLACE FUNCTION memloop_fold(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT CASE WHEN t ~ '^[\x01-\x7f]*$' THEN t ELSE normalize(regexp_replace(
        normalize(translate(t, 'ёЁ', 'еЕ'), NFD),
        '([A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+',
        '\1', 'g'), NFC)
    END
$f$;
-- Migration 3's trigger with its statements written out (planned once per connection, where
-- `EXECUTE` planned them on every row), still naming the change table with the schema it is
-- created in, so a writer whose search_path differs is recorded too.
DO $do$
BEGIN
EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.memloop_record_change() RETURNS trigger
LANGUAGE plpgsql AS $f$
BEGIN
    IF TG_OP <> 'INSERT' AND (TG_OP = 'DELETE' OR OLD.project_id <> NEW.project_id
                              OR OLD.rel_path <> NEW.rel_path) THEN
        INSERT INTO %1$I.memloop_changes (project_id, rel_path, deleted)
            VALUES (OLD.project_id, OLD.rel_path, true)
            ON CONFLICT (project_id, rel_path)
            DO UPDATE SET deleted = EXCLUDED.deleted, txid = pg_current_xact_id();
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO %1$I.memloop_changes (project_id, rel_path, deleted)
            VALUES (NEW.project_id, NEW.rel_path, false)
            ON CONFLICT (project_id, rel_path)
            DO UPDATE SET deleted = EXCLUDED.deleted, txid = pg_current_xact_id();
    END IF;
    RETURN NULL;
END
$f$
$create$, (SELECT n.nspname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE p.oid = 'memloop_record_change'::regproc));
END
$do$;
"#,
    ),
    (
        9,
        "cheaper saves: the search text computed by a trigger planned once per connection",
        r#"
-- A generated column's expression is prepared again for every INSERT and UPDATE statement, and
-- preparing it inlines the SQL functions it calls (their bodies parsed and planned each time):
-- about a fifth of PostgreSQL's CPU per save. A BEFORE trigger in PL/pgSQL computes the same
-- value with its expression planned once per connection. It runs for every writer (an admin
-- session, another tool) and overwrites any value given, as the generated column did; the
-- functions are named with the table's schema, so a writer whose search_path differs gets the
-- same text. The stored values and their index stay as they are. (Written so that it can run
-- again on a schema it already changed.)
ALTER TABLE memloop_memories ALTER COLUMN search_text DROP EXPRESSION IF EXISTS;
DO $do$
BEGIN
EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.memloop_search_text() RETURNS trigger
LANGUAGE plpgsql AS $f$
BEGIN
    NEW.search_text :=
        setweight(to_tsvector('russian', %1$I.memloop_fold(%1$I.memloop_words(NEW.name)))
            || to_tsvector('simple', %1$I.memloop_grams(NEW.name)), 'A') ||
        setweight(to_tsvector('russian', %1$I.memloop_fold(%1$I.memloop_words(NEW.description)))
            || to_tsvector('simple', %1$I.memloop_grams(NEW.description)), 'B') ||
        setweight(to_tsvector('russian', %1$I.memloop_fold(%1$I.memloop_words(NEW.body)))
            || to_tsvector('simple', %1$I.memloop_grams(NEW.body)), 'C');
    RETURN NEW;
END
$f$
$create$, (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.oid = 'memloop_memories'::regclass));
END
$do$;
DROP TRIGGER IF EXISTS memloop_search_text ON memloop_memories;
CREATE TRIGGER memloop_search_text BEFORE INSERT OR UPDATE ON memloop_memories
    FOR EACH ROW EXECUTE FUNCTION memloop_search_text();
"#,
    ),
    (
        10,
        "index lines counted at write time; the first lines read in order without the rest",
        r#"
-- How many index lines (memories outside `logs/`) each project has, kept by the transaction
-- that writes, deletes, renames or moves a memory, so loading the index reads one row and its
-- first lines instead of every memory. The counting trigger is deferred to the end of the
-- transaction: the count's row is the last lock a writer of one project takes (its writers
-- wait for each other only while they commit, and never deadlock on it), and a transaction that
-- rolls back leaves the count as it was. Written so that it can run again on a schema it already
-- changed.
CREATE TABLE IF NOT EXISTS memloop_index_counts (
    project_id text   PRIMARY KEY,
    lines      bigint NOT NULL
);
DO $do$
BEGIN
EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.memloop_count_index_lines() RETURNS trigger
LANGUAGE plpgsql AS $f$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.project_id = NEW.project_id AND OLD.rel_path = NEW.rel_path THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.rel_path NOT LIKE 'logs/%%' THEN
        INSERT INTO %1$I.memloop_index_counts AS c (project_id, lines) VALUES (OLD.project_id, -1)
            ON CONFLICT (project_id) DO UPDATE SET lines = c.lines - 1;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.rel_path NOT LIKE 'logs/%%' THEN
        INSERT INTO %1$I.memloop_index_counts AS c (project_id, lines) VALUES (NEW.project_id, 1)
            ON CONFLICT (project_id) DO UPDATE SET lines = c.lines + 1;
    END IF;
    RETURN NULL;
END
$f$
$create$, (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.oid = 'memloop_memories'::regclass));
END
$do$;
-- Created before the counts are taken: the trigger's lock on the table waits for the writers
-- in flight and holds back new ones until this transaction commits, so no write is counted
-- twice or missed.
DROP TRIGGER IF EXISTS memloop_index_lines ON memloop_memories;
CREATE CONSTRAINT TRIGGER memloop_index_lines
    AFTER INSERT OR DELETE OR UPDATE OF project_id, rel_path ON memloop_memories
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memloop_count_index_lines();
DELETE FROM memloop_index_counts;
INSERT INTO memloop_index_counts (project_id, lines)
    SELECT project_id, count(*) FROM memloop_memories
    WHERE rel_path NOT LIKE 'logs/%' GROUP BY project_id;
-- The index in its order (creation), its lines only: the first lines are read through it. A
-- lookup of one memory by its key never uses it (its condition does not imply the predicate).
CREATE INDEX IF NOT EXISTS memloop_memories_index_lines ON memloop_memories (project_id, seq)
    WHERE rel_path NOT LIKE 'logs/%';
"#,
    ),
];

/// The newest schema version this build knows.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// The schema version recorded in the database, `None` when no migration ever ran there. Reads
/// only: a role with nothing but SELECT on the tables can ask.
async fn recorded_version(sql: Statements<'_>, client: &Client) -> Result<Option<i32>, PgError> {
    let db = |e: tokio_postgres::Error| PgError::from_db(&e);
    let exists: bool = sql
        .query_one(
            client,
            "SELECT to_regclass('memloop_schema_migrations') IS NOT NULL",
            &[],
        )
        .await
        .map_err(db)?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let version: i32 = sql
        .query_one(
            client,
            "SELECT coalesce(max(version), 0) FROM memloop_schema_migrations",
            &[],
        )
        .await
        .map_err(db)?
        .get(0);
    Ok(Some(version))
}

/// Bring the schema up to [`latest`]. Idempotent; safe to run from many processes at once. When
/// the schema is already current nothing is created or locked, so a role with only
/// SELECT / INSERT / UPDATE / DELETE on the tables opens the store; creating or upgrading the
/// schema needs CREATE (once, by an owner role).
///
/// Each version is applied in a transaction of its own, under the advisory lock, after re-reading
/// the recorded version under that lock: a failed step leaves nothing of itself behind, and the
/// versions committed before it stay, so a migration interrupted by a lost connection resumes
/// where it stopped on the next attempt. A lost connection is returned as such
/// ([`PgError::is_connection`], which the open retries); only a statement the server refused is a
/// [`PgError::Migration`].
pub(crate) async fn migrate(
    sql: Statements<'_>,
    client: &mut Client,
    schema: Option<&str>,
) -> Result<i32, PgError> {
    let db = |e: tokio_postgres::Error| PgError::from_db(&e);
    match recorded_version(sql, client).await? {
        Some(v) if v == latest() => return Ok(v),
        Some(v) if v > latest() => {
            return Err(PgError::SchemaTooNew {
                found: v,
                known: latest(),
            });
        }
        _ => {}
    }
    if let Some(schema) = schema {
        // Concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide: serialise on a lock.
        let tx = sql.begin(client).await.map_err(db)?;
        sql.execute(&tx, "SELECT pg_advisory_xact_lock(7377001)", &[])
            .await
            .map_err(db)?;
        sql.batch(&tx, &format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await
            .map_err(db)?;
        sql.commit(tx).await.map_err(db)?;
    }
    // Whether the migrations table is known to exist (after this call's first committed step).
    let mut table_exists = false;
    loop {
        let tx = sql.begin(client).await.map_err(db)?;
        sql.execute(&tx, "SELECT pg_advisory_xact_lock(7377002)", &[])
            .await
            .map_err(db)?;
        if !table_exists {
            sql.batch(
                &tx,
                "CREATE TABLE IF NOT EXISTS memloop_schema_migrations (
                    version    integer PRIMARY KEY,
                    name       text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now())",
            )
            .await
            .map_err(db)?;
        }
        // Read under the lock: another opener may have applied versions since the last look.
        let current: i32 = sql
            .query_one(
                &tx,
                "SELECT coalesce(max(version), 0) FROM memloop_schema_migrations",
                &[],
            )
            .await
            .map_err(db)?
            .get(0);
        if current > latest() {
            sql.rollback(tx).await.map_err(db)?;
            return Err(PgError::SchemaTooNew {
                found: current,
                known: latest(),
            });
        }
        let Some((version, name, step)) = MIGRATIONS.iter().find(|m| m.0 > current) else {
            // Current: commit (the table may have been created in this transaction).
            sql.commit(tx).await.map_err(db)?;
            return Ok(latest());
        };
        let fail = |e: tokio_postgres::Error| step_error(*version, &e);
        sql.batch(&tx, step).await.map_err(fail)?;
        sql.execute(
            &tx,
            "INSERT INTO memloop_schema_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await
        .map_err(fail)?;
        sql.commit(tx).await.map_err(fail)?;
        table_exists = true;
        tracing::info!(version, name, "team memory schema migrated");
    }
}

/// The error of migration step `version`: a lost connection stays a connection error (retried
/// on a fresh connection, where the step runs again from its start) and a missing permission
/// stays [`PgError::Permission`]; a statement the server refused is a [`PgError::Migration`].
fn step_error(version: i32, e: &tokio_postgres::Error) -> PgError {
    match PgError::from_db(e) {
        lost if lost.is_connection() => lost,
        p @ PgError::Permission(_) => p,
        other => PgError::Migration {
            version,
            message: other.to_string(),
        },
    }
}
