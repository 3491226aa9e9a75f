//! Team project ids cannot collide: two project dirs of one name (no git origin) get two ids and
//! two memories, and the memories an older memloop stored under the bare dir name (schema 5)
//! are claimed once, by the first such dir to open the store, through migration 6.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{PgConfig, PgMemoryStore, legacy_project_id_for, project_id_for};
use support::{TestSchema, URL, admin, rel_paths as paths, write_memories};

#[tokio::test]
async fn dirs_of_one_name_never_share_memory_and_old_ids_are_claimed_once() {
    let schema = TestSchema::new();
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("payments-y").join("proj-a");
    let second = tmp.path().join("proj-a");
    let cyrillic = tmp.path().join("команда");
    for d in [&first, &second, &cyrillic] {
        std::fs::create_dir_all(d).unwrap();
    }
    assert_ne!(project_id_for(&first), project_id_for(&second));
    assert_eq!(legacy_project_id_for(&first).as_deref(), Some("proj-a"));

    // A schema-5 database: memories under the old ids "proj-a" and "команда", and one under an
    // origin URL, which is never an old dir name.
    for (id, rel) in [
        ("proj-a", "ledger.md"),
        ("команда", "заметки.md"),
        ("github.com/acme/proj-a", "origin.md"),
    ] {
        let store = schema.open(id).await;
        write_memories(&store, &[(rel, "old", "from schema 5", "kept")]).await;
    }
    admin()
        .await
        .batch_execute(&format!(
            "SET search_path = {s}; DROP TABLE memloop_project_aliases, memloop_idempotency; \
             DELETE FROM memloop_schema_migrations WHERE version >= 6",
            s = schema.name
        ))
        .await
        .unwrap();

    let open_dir = |dir: std::path::PathBuf| {
        let schema = schema.name.clone();
        async move {
            PgMemoryStore::open(PgConfig::for_project_dir(URL, &dir).schema(&schema))
                .await
                .unwrap()
        }
    };
    // The first dir named proj-a claims the old memories (migration 6 runs on this open).
    let a = open_dir(first.clone()).await;
    assert_eq!(paths(&a).await, ["ledger.md"]);
    // The other dir of that name has its own, empty memory, and stays so when reopened.
    let b = open_dir(second.clone()).await;
    assert!(paths(&b).await.is_empty());
    write_memories(&b, &[("own.md", "own", "second dir", "mine")]).await;
    let a_again = open_dir(first).await;
    assert_eq!(paths(&a_again).await, ["ledger.md"]);
    assert_eq!(paths(&open_dir(second).await).await, ["own.md"]);
    // A non-ASCII dir name is claimed the same way.
    assert_eq!(paths(&open_dir(cyrillic).await).await, ["заметки.md"]);
    // An origin id is no alias and keeps its memory.
    let aliases: Vec<String> = admin()
        .await
        .query(
            &format!(
                "SELECT legacy_id FROM {}.memloop_project_aliases ORDER BY legacy_id",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(aliases, ["proj-a", "команда"]);
    assert_eq!(
        paths(&schema.open("github.com/acme/proj-a").await).await,
        ["origin.md"]
    );
    // The old id itself is empty now: nothing is reachable twice.
    assert!(paths(&schema.open("proj-a").await).await.is_empty());
}
