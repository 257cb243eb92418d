"""The SQL of the embedded store: its schema and every statement, with their parameters."""

from __future__ import annotations

SCHEMA_VERSION = 1

# One row per key in `keys`; hash fields and list items hang off it. Triggers drop the children
# whenever a key row is deleted or re-typed (kind appears in an UPDATE), so every writer is a
# single upsert: `set` over a hash, or `hset` reviving an expired hash, leaves no stale fields.
SCHEMA = f"""
PRAGMA user_version = {SCHEMA_VERSION};
CREATE TABLE IF NOT EXISTS keys (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,  -- 's' string, 'h' hash, 'l' list
    value TEXT,          -- the string; NULL for hashes and lists
    expires_at REAL      -- unix time (wall clock, so TTLs survive restarts); NULL: never
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_expiry ON keys (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS fields (
    key TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (key, field)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
    key TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (key, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS keys_deleted AFTER DELETE ON keys WHEN OLD.kind != 's' BEGIN
    DELETE FROM fields WHERE key = OLD.key;
    DELETE FROM items WHERE key = OLD.key;
END;
CREATE TRIGGER IF NOT EXISTS keys_retyped AFTER UPDATE OF kind ON keys WHEN OLD.kind != 's' BEGIN
    DELETE FROM fields WHERE key = OLD.key;
    DELETE FROM items WHERE key = OLD.key;
END;
"""

LIVE = "(expires_at IS NULL OR expires_at > ?{n})"
LIVE_KEY = "(keys.expires_at IS NULL OR keys.expires_at > ?{n})"

# ?1 key, ?2 value, ?3 expires_at, ?4 now
SET = """INSERT INTO keys (key, kind, value, expires_at) VALUES (?1, 's', ?2, ?3)
ON CONFLICT (key) DO UPDATE SET kind = 's', value = ?2, expires_at = ?3"""
SET_NX = SET + " WHERE keys.expires_at <= ?4"
GET = f"SELECT value FROM keys WHERE key = ?1 AND kind = 's' AND {LIVE.format(n=2)}"
# ?1 key, ?2 amount, ?3 expires_at if created, ?4 now
INCR = f"""INSERT INTO keys (key, kind, value, expires_at) VALUES (?1, 's', ?2, ?3)
ON CONFLICT (key) DO UPDATE SET
    value = CASE WHEN keys.kind = 's' AND {LIVE_KEY.format(n=4)}
            THEN CAST(keys.value AS INTEGER) + ?2 ELSE ?2 END,
    expires_at = CASE WHEN keys.kind = 's' AND {LIVE_KEY.format(n=4)}
            THEN keys.expires_at ELSE ?3 END,
    kind = 's'
RETURNING value"""
EXPIRE = f"UPDATE keys SET expires_at = ?2 WHERE key = ?1 AND {LIVE.format(n=3)}"
# Make `key` a live container of `kind` (?2): create it, or reset it when expired or retyped.
CONTAINER = f"""INSERT INTO keys (key, kind) VALUES (?1, ?2)
ON CONFLICT (key) DO UPDATE SET kind = ?2, value = NULL, expires_at = NULL
WHERE keys.kind != ?2 OR NOT {LIVE_KEY.format(n=3)}"""
LIVE_CONTAINER = f"SELECT 1 FROM keys WHERE key = ?1 AND kind = ?2 AND {LIVE.format(n=3)}"
HSET = """INSERT INTO fields (key, field, value) VALUES (?1, ?2, ?3)
ON CONFLICT (key, field) DO UPDATE SET value = ?3"""
HGET = f"SELECT value FROM fields WHERE key = ?1 AND field = ?4 AND EXISTS ({LIVE_CONTAINER})"
HGETALL = f"SELECT field, value FROM fields WHERE key = ?1 AND EXISTS ({LIVE_CONTAINER})"
HDEL = f"DELETE FROM fields WHERE key = ?1 AND EXISTS ({LIVE_CONTAINER})"
DROP_EMPTY_HASH = (
    "DELETE FROM keys WHERE key = ?1 AND kind = 'h' "
    "AND NOT EXISTS (SELECT 1 FROM fields WHERE key = ?1)"
)
PUSH = """INSERT INTO items (key, seq, value)
SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2 FROM items WHERE key = ?1"""
TRIM = """DELETE FROM items WHERE key = ?1 AND seq <= (
    SELECT seq FROM items WHERE key = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)"""
LIST_LEN = f"SELECT COUNT(*) FROM items WHERE key = ?1 AND EXISTS ({LIVE_CONTAINER})"
LIST_SLICE = "SELECT value FROM items WHERE key = ?1 ORDER BY seq LIMIT ?2 OFFSET ?3"
POP_HEAD = "DELETE FROM items WHERE key = ?1 AND seq = (SELECT MIN(seq) FROM items WHERE key = ?1)"
LISTS_WITH_PREFIX = f"""SELECT keys.key, COUNT(items.seq) FROM keys
JOIN items ON items.key = keys.key WHERE keys.key LIKE ?1 AND keys.kind = 'l'
AND {LIVE_KEY.format(n=2)} GROUP BY keys.key"""
FIND_ITEM = "SELECT seq FROM items WHERE key = ?1 AND value = ?2 ORDER BY seq LIMIT 1"
DROP_EMPTY_LIST = (
    "DELETE FROM keys WHERE key = ?1 AND kind = 'l' "
    "AND NOT EXISTS (SELECT 1 FROM items WHERE key = ?1)"
)
# ?1 name, ?2 owner, ?3 expires_at, ?4 now
ACQUIRE = """INSERT INTO leases (name, owner, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET owner = ?2, expires_at = ?3
WHERE leases.owner = ?2 OR leases.expires_at <= ?4"""
RENEW = "UPDATE leases SET expires_at = ?3 WHERE name = ?1 AND owner = ?2 AND expires_at > ?4"
RELEASE = "DELETE FROM leases WHERE name = ?1 AND owner = ?2 AND expires_at > ?3"
OWNER = "SELECT owner FROM leases WHERE name = ?1 AND expires_at > ?2"
PURGE_KEYS = """DELETE FROM keys WHERE key IN (
    SELECT key FROM keys WHERE expires_at <= ?1 LIMIT ?2)"""
PURGE_LEASES = "DELETE FROM leases WHERE expires_at <= ?1"
