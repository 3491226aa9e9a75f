//! The team store's change feed ([`MemoryStore::changes`](memloop_store::MemoryStore::changes)):
//! what changed in a project since a cursor, by any writer on any machine, in one query.
//!
//! A trigger (migration 3) keeps one row per memory path in `memloop_changes`: whether the path is
//! deleted now and the transaction (`xid8`) that changed it last. A cursor is the snapshot the
//! previous answer was read in (`pg_current_snapshot()`); the next answer reports the rows whose
//! transaction that snapshot did not see (`pg_visible_in_snapshot`): one still running then (even
//! one that commits much later) or one begun since. Visibility only grows, so each change is
//! reported by the first answer whose snapshot sees it, once: never missed, and not again when a
//! long transaction elsewhere on the server holds the snapshot's `xmin` back. The rows looked at
//! are those at or above that `xmin` (an index range).

use crate::error::StoreError;
use crate::store::{PgMemoryStore, db, parse_type};
use memloop_store::{ChangeCursor, Changes, MemoryFile, MemoryHeader, MemoryPath};

/// Most memories whose text an answer carries (the first ones it lists; the others are read
/// when a consumer needs them): a reader catching up on a few changes needs no further query,
/// one catching up on thousands does not get them all in one answer.
const TEXTS_PER_ANSWER: i64 = 64;

/// The feed's query: `$1` project, `$2` the cursor's `xmin` (text), `$3` how many texts
/// ([`TEXTS_PER_ANSWER`]), `$4` the cursor's snapshot (text). One row per change, or one row of
/// nulls when there is none (it still carries the snapshot).
///
/// Its plan must not depend on the table statistics: a connection caches a generic plan made
/// when the tables may have been small (or never analyzed), and keeps it as they grow. So each
/// change's memory is a lateral subquery the planner cannot flatten (`OFFSET 0`): one lookup by
/// primary key per change, never a join that reads every memory of the project. The numbering
/// that bounds the texts runs over the changes alone, before any text is read.
pub(crate) const FEED: &str = "SELECT pg_current_snapshot()::text, c.rel_path, c.deleted,
            m.name, m.description, m.memory_type, m.updated_at, m.body, m.content, m.version
     FROM (SELECT 1) AS now
     LEFT JOIN LATERAL (
         SELECT c.rel_path, c.deleted, row_number() OVER () AS n
         FROM memloop_changes c
         WHERE c.project_id = $1 AND c.txid >= $2::text::xid8
           AND NOT pg_visible_in_snapshot(c.txid, $4::text::pg_snapshot)
     ) c ON true
     LEFT JOIN LATERAL (
         SELECT m.name, m.description, m.memory_type, m.updated_at,
                CASE WHEN c.n <= $3 THEN m.body END AS body,
                CASE WHEN c.n <= $3 THEN m.content END AS content,
                m.version
         FROM memloop_memories m
         WHERE m.project_id = $1 AND m.rel_path = c.rel_path
         OFFSET 0
     ) m ON true";

/// The cursor's prefix: the feed's format version (a cursor of an earlier version, `pg-xmin-1`,
/// asks for a rescan).
const PREFIX: &str = "pg-snapshot-1";

/// `PREFIX|project|snapshot`, the snapshot as PostgreSQL writes it (`xmin:xmax:xip,...`).
fn encode(project: &str, snapshot: &str) -> ChangeCursor {
    ChangeCursor::new(format!("{PREFIX}|{project}|{snapshot}"))
}

/// A snapshot a cursor of this project carries, as `(xmin, snapshot)`; `None` for any other
/// cursor, or one whose snapshot is not `xmin:xmax:xip,...` with numbers.
fn decode<'c>(cursor: &'c ChangeCursor, project: &str) -> Option<(u64, &'c str)> {
    let rest = cursor.as_str().strip_prefix(PREFIX)?.strip_prefix('|')?;
    let (p, snapshot) = rest.rsplit_once('|')?;
    if p != project {
        return None;
    }
    let mut parts = snapshot.split(':');
    let (xmin, xmax, xip) = (parts.next()?, parts.next()?, parts.next()?);
    let number = |n: &str| n.parse::<u64>().ok();
    let xmin = number(xmin)?;
    let listed = xip.is_empty() || xip.split(',').all(|x| number(x).is_some());
    (parts.next().is_none() && number(xmax)? >= xmin && listed).then_some((xmin, snapshot))
}

impl PgMemoryStore {
    /// The change feed (see the module docs).
    pub(crate) async fn changes_since(
        &self,
        since: Option<&ChangeCursor>,
    ) -> Result<Changes, StoreError> {
        let project = self.project_id().to_owned();
        let Some((xmin, seen)) = since.and_then(|c| decode(c, &project)) else {
            let snapshot: String = self
                .retrying("changes", |client| async move {
                    let row = self
                        .sql()
                        .query_one(&client, "SELECT pg_current_snapshot()::text", &[])
                        .await
                        .map_err(db)?;
                    Ok(row.get(0))
                })
                .await?;
            let cursor = encode(&project, &snapshot);
            let cursor = decode(&cursor, &project).is_some().then_some(cursor);
            return Ok(Changes::Rescan { cursor });
        };
        let xmin = xmin.to_string();
        let rows = self
            .retrying("changes", |client| {
                let (project, xmin) = (&project, &xmin);
                async move {
                    self.sql()
                        .query(&client, FEED, &[project, xmin, &TEXTS_PER_ANSWER, &seen])
                        .await
                        .map_err(db)
                }
            })
            .await?;
        let mut snapshot: Option<String> = None;
        let (mut written, mut removed, mut files) = (Vec::new(), Vec::new(), Vec::new());
        for r in &rows {
            if snapshot.is_none() {
                snapshot = Some(r.get(0));
            }
            let Some(rel) = r.get::<_, Option<String>>(1) else {
                continue; // the one row of an empty answer
            };
            let deleted: bool = r.get(2);
            let name: Option<String> = r.get(3);
            match (deleted, name) {
                (false, Some(name)) => {
                    let description: String = r.get(4);
                    let updated_at: chrono::DateTime<chrono::Utc> = r.get(6);
                    let header = MemoryHeader {
                        rel_path: rel,
                        name: Some(name),
                        description: (!description.is_empty()).then_some(description),
                        memory_type: parse_type(r.get(5)),
                        mtime: updated_at.into(),
                    };
                    if let (Some(body), Some(raw)) =
                        (r.get::<_, Option<String>>(7), r.get::<_, Option<String>>(8))
                    {
                        // Seen as a read sees it: a later write expects this version.
                        self.remember(&header.rel_path, Some(r.get(9)));
                        files.push(MemoryFile {
                            header: header.clone(),
                            body,
                            raw,
                        });
                    }
                    written.push(header);
                }
                _ => match MemoryPath::new(&rel) {
                    Ok(path) => removed.push(path),
                    Err(e) => {
                        tracing::warn!(path = %rel, error = %e, "change feed names an invalid path; ignored")
                    }
                },
            }
        }
        let Some(cursor) = snapshot
            .map(|s| encode(&project, &s))
            .filter(|c| decode(c, &project).is_some())
        else {
            return Ok(Changes::Rescan { cursor: None });
        };
        if written.is_empty() && removed.is_empty() {
            return Ok(Changes::Unchanged);
        }
        written.sort_by(|a, b| b.mtime.cmp(&a.mtime).then(a.rel_path.cmp(&b.rel_path)));
        Ok(Changes::Changed {
            cursor,
            written,
            removed,
            files,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_belong_to_their_project() {
        let c = encode("team|a", "42:45:42,44");
        assert_eq!(decode(&c, "team|a"), Some((42, "42:45:42,44")));
        assert_eq!(decode(&c, "team"), None);
        assert_eq!(
            decode(&encode("p", "7:7:"), "p"),
            Some((7, "7:7:")),
            "nothing running"
        );
        assert_eq!(decode(&ChangeCursor::new("gen:7"), "team|a"), None);
        // The earlier format, and snapshots that are not one.
        assert_eq!(
            decode(&ChangeCursor::new("pg-xmin-1|team|a|42"), "team|a"),
            None
        );
        for bad in ["x", "42", "42:41:", "42:45:x", "42:45:42:1", "42:45:,"] {
            assert_eq!(decode(&encode("p", bad), "p"), None, "{bad}");
        }
    }
}
