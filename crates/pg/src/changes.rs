//! The team store's change feed ([`MemoryStore::changes`](memloop_store::MemoryStore::changes)):
//! what changed in a project since a cursor, by any writer on any machine, in one query.
//!
//! A trigger (migration 3) keeps one row per memory path in `memloop_changes`: whether the path is
//! deleted now and the transaction (`xid8`) that changed it last. A cursor is the `xmin` of the
//! snapshot the previous answer was read in: every transaction older than it had finished, so its
//! changes were in that answer; a transaction that was still running (even one that commits much
//! later) has an id at or above it and is reported by a later call. A change can be reported
//! twice, never missed.

use crate::error::StoreError;
use crate::store::{PgMemoryStore, db, parse_type};
use memloop_store::{ChangeCursor, Changes, MemoryFile, MemoryHeader, MemoryPath};

/// Most memories whose text an answer carries (the first ones it lists; the others are read
/// when a consumer needs them): a reader catching up on a few changes needs no further query,
/// one catching up on thousands does not get them all in one answer.
const TEXTS_PER_ANSWER: i64 = 64;

/// The cursor's prefix: the feed's format version.
const PREFIX: &str = "pg-xmin-1";

/// `PREFIX|project|xmin`.
fn encode(project: &str, xmin: u64) -> ChangeCursor {
    ChangeCursor::new(format!("{PREFIX}|{project}|{xmin}"))
}

/// The `xmin` of a cursor this project issued; `None` for any other cursor.
fn decode(cursor: &ChangeCursor, project: &str) -> Option<u64> {
    let rest = cursor.as_str().strip_prefix(PREFIX)?.strip_prefix('|')?;
    let (p, xmin) = rest.rsplit_once('|')?;
    (p == project).then(|| xmin.parse().ok()).flatten()
}

impl PgMemoryStore {
    /// The change feed (see the module docs).
    pub(crate) async fn changes_since(
        &self,
        since: Option<&ChangeCursor>,
    ) -> Result<Changes, StoreError> {
        let project = self.project_id().to_owned();
        let Some(from) = since.and_then(|c| decode(c, &project)) else {
            let xmin: String = self
                .retrying("changes", |client| async move {
                    let row = client
                        .query_one(
                            &client
                                .prepare_cached(
                                    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text",
                                )
                                .await
                                .map_err(db)?,
                            &[],
                        )
                        .await
                        .map_err(db)?;
                    Ok(row.get(0))
                })
                .await?;
            let cursor = xmin.parse().ok().map(|x| encode(&project, x));
            return Ok(Changes::Rescan { cursor });
        };
        let from = from.to_string();
        let rows = self
            .retrying("changes", |client| {
                let (project, from) = (&project, &from);
                async move {
                    client
                        .query(
                            &client
                                .prepare_cached(
                                    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text,
                                    c.rel_path, c.deleted, m.name, m.description,
                                    m.memory_type, m.updated_at,
                                    CASE WHEN row_number() OVER () <= $3 THEN m.body END,
                                    CASE WHEN row_number() OVER () <= $3 THEN m.content END,
                                    m.version
                             FROM (SELECT 1) AS now
                             LEFT JOIN memloop_changes c
                                 ON c.project_id = $1 AND c.txid >= $2::text::xid8
                             LEFT JOIN memloop_memories m
                                 ON m.project_id = c.project_id AND m.rel_path = c.rel_path",
                                )
                                .await
                                .map_err(db)?,
                            &[project, from, &TEXTS_PER_ANSWER],
                        )
                        .await
                        .map_err(db)
                }
            })
            .await?;
        let mut xmin = None;
        let (mut written, mut removed, mut files) = (Vec::new(), Vec::new(), Vec::new());
        for r in &rows {
            xmin = xmin.or_else(|| r.get::<_, String>(0).parse::<u64>().ok());
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
        let Some(xmin) = xmin else {
            return Ok(Changes::Rescan { cursor: None });
        };
        if written.is_empty() && removed.is_empty() {
            return Ok(Changes::Unchanged);
        }
        written.sort_by(|a, b| b.mtime.cmp(&a.mtime).then(a.rel_path.cmp(&b.rel_path)));
        Ok(Changes::Changed {
            cursor: encode(&project, xmin),
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
        let c = encode("team|a", 42);
        assert_eq!(decode(&c, "team|a"), Some(42));
        assert_eq!(decode(&c, "team"), None);
        assert_eq!(decode(&ChangeCursor::new("gen:7"), "team|a"), None);
        assert_eq!(
            decode(&ChangeCursor::new("pg-xmin-1|team|a|x"), "team|a"),
            None
        );
    }
}
