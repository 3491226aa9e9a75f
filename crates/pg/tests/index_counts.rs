//! The count of a project's index lines (migration 10), kept by the transaction that writes:
//! right after writes, overwrites, deletes, renames, daily logs and a clear; unchanged by a
//! write that fails or rolls back; and what `load_index` reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{BatchWrite, PgMemoryStore};
use memloop_store::{
    CheckedWrite, ExpectedVersion, MemoryDoc, MemoryStore, MemoryType, WriteLimits, WriteMode,
    content_version,
};
use support::{TestSchema, admin};

fn doc(name: &str) -> MemoryDoc {
    MemoryDoc::new(name, "about it", MemoryType::Project, "body")
}

/// The count kept for `project`, and the index lines its rows hold now.
async fn counted(schema: &TestSchema, project: &str) -> (i64, i64) {
    let c = admin().await;
    let kept: Option<i64> = c
        .query_opt(
            &format!(
                "SELECT lines FROM {}.memloop_index_counts WHERE project_id = $1",
                schema.name
            ),
            &[&project],
        )
        .await
        .unwrap()
        .map(|r| r.get(0));
    let rows: i64 = c
        .query_one(
            &format!(
                "SELECT count(*) FROM {}.memloop_memories
                 WHERE project_id = $1 AND rel_path NOT LIKE 'logs/%'",
                schema.name
            ),
            &[&project],
        )
        .await
        .unwrap()
        .get(0);
    (kept.unwrap_or(0), rows)
}

async fn write(store: &PgMemoryStore, rel: &str) {
    store
        .write(rel, &doc(rel), WriteMode::Overwrite)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_count_follows_writes_deletes_renames_and_clears() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    let other = schema.open("q").await;
    write(&other, "knowledge/elsewhere.md").await;
    for rel in ["decisions/a.md", "todos/b.md", "knowledge/c.md"] {
        write(&store, rel).await;
    }
    assert_eq!(counted(&schema, "p").await, (3, 3));
    write(&store, "todos/b.md").await;
    assert_eq!(
        counted(&schema, "p").await,
        (3, 3),
        "an overwrite adds no line"
    );
    store.delete("knowledge/c.md").await.unwrap();
    assert_eq!(counted(&schema, "p").await, (2, 2));
    let dyn_store: &dyn MemoryStore = &store;
    dyn_store
        .rename("todos/b.md", "todos/renamed.md")
        .await
        .unwrap();
    assert_eq!(counted(&schema, "p").await, (2, 2));
    write(&store, "logs/2026-03-01.md").await;
    assert_eq!(
        counted(&schema, "p").await,
        (2, 2),
        "a daily log has no line"
    );
    let index = store.load_index().await.unwrap();
    assert_eq!(index.original_lines, 2);
    assert!(index.content.contains("todos/renamed.md") && !index.content.contains("logs/"));
    // A memory moved to another project (as an old project id's claim moves them) counts there.
    admin()
        .await
        .execute(
            &format!(
                "UPDATE {}.memloop_memories SET project_id = 'q' WHERE rel_path = 'decisions/a.md'",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(counted(&schema, "p").await, (1, 1));
    assert_eq!(counted(&schema, "q").await, (2, 2));
    store.clear().await.unwrap();
    assert_eq!(counted(&schema, "p").await, (0, 0));
    assert_eq!(
        counted(&schema, "q").await,
        (2, 2),
        "the other project is left alone"
    );
}

#[tokio::test]
async fn a_write_that_fails_or_rolls_back_leaves_the_count() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    write(&store, "decisions/queue.md").await;
    assert_eq!(counted(&schema, "p").await, (1, 1));
    // A batch whose last entry conflicts: its first entries were sent, then all rolled back.
    let entry = |rel: &str, expected| BatchWrite {
        write: CheckedWrite::check(rel, &doc(rel), WriteMode::Overwrite, WriteLimits::default())
            .unwrap(),
        expected,
    };
    let stale = ExpectedVersion::Is(content_version("not what is stored"));
    let outcome = |_: &[memloop_store::VersionedWrite]| String::new();
    assert!(
        store
            .write_batch(
                &[
                    entry("knowledge/a.md", ExpectedVersion::Absent),
                    entry("knowledge/b.md", ExpectedVersion::Any),
                    entry("decisions/queue.md", stale),
                ],
                None,
                &outcome,
            )
            .await
            .is_err()
    );
    assert_eq!(counted(&schema, "p").await, (1, 1));
    // Any writer's transaction: rows inserted, then a failure, then a rollback.
    let c = admin().await;
    let insert = format!(
        "INSERT INTO {}.memloop_memories (project_id, rel_path, name, description, body,
             content, sha256, version, updated_by, write_id)
         SELECT 'p', 'notes/n' || i || '.md', 'n', '', '', '', 'sha', 1, 'test',
                gen_random_uuid()
         FROM generate_series(1, 5) AS i",
        schema.name
    );
    let failed = c
        .batch_execute(&format!("BEGIN; {insert}; SELECT 1 / 0;"))
        .await;
    assert!(failed.is_err());
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(counted(&schema, "p").await, (1, 1));
    c.batch_execute(&format!("BEGIN; {insert}; ROLLBACK;"))
        .await
        .unwrap();
    assert_eq!(counted(&schema, "p").await, (1, 1));
    c.batch_execute(&format!("BEGIN; {insert}; COMMIT;"))
        .await
        .unwrap();
    assert_eq!(counted(&schema, "p").await, (6, 6));
}

/// A replica's loaded index follows every change another replica makes to the index's start
/// (a title, a removal, a new line) and to its count past the line cap, although the lines it
/// read before are kept formatted.
#[tokio::test]
async fn a_loaded_index_follows_changes_from_another_replica() {
    let schema = TestSchema::new();
    let reader = schema.open("p").await;
    let writer = schema.open("p").await;
    for rel in ["a.md", "b.md"] {
        write(&writer, rel).await;
    }
    let loaded = |s: &PgMemoryStore| {
        let s = s.clone();
        async move { s.load_index().await.unwrap() }
    };
    let first = loaded(&reader).await;
    assert_eq!(
        first,
        loaded(&reader).await,
        "the same rows load the same index"
    );
    assert!(first.content.contains("[a.md](a.md)"), "{}", first.content);
    writer
        .write(
            "a.md",
            &MemoryDoc::new("Renamed", "about it", MemoryType::Project, "body"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let renamed = loaded(&reader).await.content;
    assert!(renamed.contains("[Renamed](a.md)"), "{renamed}");
    // A row changed in the database by hand (its version not moved): the next load shows it.
    admin()
        .await
        .execute(
            &format!(
                "UPDATE {}.memloop_memories SET name = 'Переименовано вручную'
                 WHERE project_id = 'p' AND rel_path = 'a.md'",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    let by_hand = loaded(&reader).await.content;
    assert!(
        by_hand.contains("[Переименовано вручную](a.md)"),
        "{by_hand}"
    );
    writer.delete("b.md").await.unwrap();
    let removed = loaded(&reader).await.content;
    assert!(!removed.contains("b.md"), "{removed}");
    write(&writer, "c.md").await;
    let added = loaded(&reader).await.content;
    assert!(added.contains("(c.md)"), "{added}");
    // Past the line cap (200): the start read stays the same rows, the count moves on.
    for i in 0..199 {
        write(&writer, &format!("n/{i:03}.md")).await;
    }
    let capped = loaded(&reader).await;
    assert!(capped.truncated_by_lines);
    assert_eq!(capped.original_lines, 201);
    write(&writer, "n/late.md").await;
    let later = loaded(&reader).await;
    assert_eq!(later.original_lines, 202);
    // The lines loaded are the same string; the warning names the new size.
    assert_eq!(later.loaded_lines(), capped.loaded_lines());
    assert_eq!(later.loaded_lines().lines().count(), 200);
    assert!(!later.loaded_lines().contains("WARNING"));
    let warning = later.warning.as_deref().unwrap_or_default();
    assert!(
        warning.starts_with("> WARNING: MEMORY.md is 202 lines"),
        "{warning}"
    );
    assert!(later.content.ends_with(warning));
}
