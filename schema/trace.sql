-- trace.sql - the fusertrace trace file (.ftdb), format version 2. Single source of truth for the
-- schema: embedded into the library at build time (schema/embed_sql.cmake) and executed once,
-- inside the creating transaction, when a trace is created.
--
-- application_id 0x46545243 ('FTRC', FT_APPLICATION_ID) tags the file as a trace; user_version
-- (FT_FORMAT_VERSION) is the format version. Opening checks both (ft_trace_open); the library
-- also checks at creation that these literals equal the C constants.
--
-- Integrity: each chunk carries an XXH3 checksum of its decoded bytes; the small tables (meta,
-- oplists, fusers, recipes) and the chunk index rows are covered by per-table digests kept in
-- meta under 'digest.<table>', rewritten in the same transaction as every change, so a trace
-- left by a killed recorder is consistent up to its last commit.
PRAGMA application_id = 1179931203;
--
-- Format 2 adds to format 1 only what its chunks may hold (chunk codec 3, schema/chunk.h): fuser
-- ends, and compact fuser instances (a fuser that repeats an earlier fuser's label and ops,
-- declared right before its first call, has no fusers row: its calls carry its stream id). The
-- tables are the same, so a format-1 trace is read as it is (its chunks are codec 1 or 2).
PRAGMA user_version = 2;

-- Key/value strings: format_version, created_by, state ('recording'|'complete'|'recovered':
-- sealed after the recording stopped without a close), the capture
-- header fields (te_version, torch_version, host, started_at, rank, world_size), env and extra
-- (canonical JSON objects) and the digests 'digest.meta', 'digest.oplists', 'digest.fusers',
-- 'digest.recipes', 'digest.chunks' (16 hex digits each; digest.meta covers every other key).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- Distinct basic-op lists, deduplicated by content: ops is canonical JSON (sorted keys, compact),
-- hash its XXH3-64 (as a signed 64-bit integer), n_ops the array length.
CREATE TABLE oplists (
    id    INTEGER PRIMARY KEY,
    hash  INTEGER NOT NULL UNIQUE,
    n_ops INTEGER NOT NULL CHECK (n_ops >= 0),
    ops   TEXT NOT NULL
);

-- Every declared fuser instance but the compact ones (each has its own plan cache, so instances
-- are never merged; only identical op lists are shared; a compact instance lives in the chunks). Row order (id) is declaration order and gives the dense
-- index used in chunks. decl_pos: number of call/backward records before the declaration in the
-- stream; decl_no: ordinal among all declarations (fusers and recipes), for export.
CREATE TABLE fusers (
    id        INTEGER PRIMARY KEY,
    stream_id INTEGER NOT NULL UNIQUE,
    label     TEXT,
    oplist    INTEGER NOT NULL REFERENCES oplists(id),
    decl_pos  INTEGER NOT NULL,
    decl_no   INTEGER NOT NULL
);

-- One row per distinct (obj, attrs) recipe state; attrs is canonical JSON. Same conventions.
CREATE TABLE recipes (
    id        INTEGER PRIMARY KEY,
    stream_id INTEGER NOT NULL UNIQUE,
    type      TEXT NOT NULL,
    obj       INTEGER NOT NULL,
    attrs     TEXT NOT NULL,
    decl_pos  INTEGER NOT NULL,
    decl_no   INTEGER NOT NULL,
    UNIQUE (obj, attrs)
);

-- Calls and backward events in stream order, in columnar chunks (layout: schema/chunk.h).
-- first_seq: seq of the first record; n_records = calls + backward events; codec 1 = columns v1
-- in zstd frames; raw_bytes: decoded size; checksum: XXH3-64 of the decoded main section (which
-- holds the split section's own checksum), as a signed 64-bit integer.
CREATE TABLE chunks (
    id        INTEGER PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    n_records INTEGER NOT NULL CHECK (n_records > 0),
    n_calls   INTEGER NOT NULL CHECK (n_calls >= 0 AND n_calls <= n_records),
    codec     INTEGER NOT NULL,
    raw_bytes INTEGER NOT NULL,
    checksum  INTEGER NOT NULL,
    data      BLOB NOT NULL
);
