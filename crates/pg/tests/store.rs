//! `PgMemoryStore` against the machine's PostgreSQL: every store guarantee, project isolation,
//! optimistic concurrency, migrations and clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{Expected, PgConfig, PgError, PgMemoryStore, StoreError, sha256_hex};
use memloop_store::{MemoryDoc, MemoryError, MemoryStore, MemoryType, WriteMode};
use support::{TestSchema, admin};

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, format!("about {name}"), MemoryType::Project, body)
}

#[tokio::test]
async fn write_read_scan_index_delete_clear() {
    let schema = TestSchema::new();
    let store = schema.open("acme/api").await;
    let w = store
        .write(
            "project_deploy.md",
            &doc("Deploys", "Tuesdays only."),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert!(w.created);
    assert!(store.check_contained(w.path.to_str().unwrap()).is_ok());
    assert_eq!(w.path, std::path::PathBuf::from("project_deploy.md"));
    store
        .write(
            "team/gotchas.md",
            &doc("Gotchas", "Flaky on CI."),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    store
        .write(
            "team/gotchas.md",
            &MemoryDoc::new("", "", None, "Retry twice."),
            WriteMode::Append,
        )
        .await
        .unwrap();

    let file = store.read("team/gotchas.md").await.unwrap();
    assert_eq!(file.body, "Flaky on CI.\n\nRetry twice.\n");
    assert_eq!(file.header.name.as_deref(), Some("Gotchas"));
    assert_eq!(file.header.memory_type, Some(MemoryType::Project));
    assert_eq!(file.raw, MemoryDoc::parse(&file.raw, "x").unwrap().render());

    let scan = store.scan().await.unwrap();
    assert_eq!(scan.len(), 2);
    assert_eq!(scan[0].rel_path, "team/gotchas.md", "newest first");

    let index = store.load_index().await.unwrap();
    assert_eq!(
        index.content,
        "- [Deploys](project_deploy.md) — about Deploys\n- [Gotchas](team/gotchas.md) — about Gotchas"
    );
    let entries = store.index_entries().await.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].file, "team/gotchas.md");

    // The stored hash is the content's.
    let m = store.get("team/gotchas.md").await.unwrap().unwrap();
    assert_eq!(m.sha256, sha256_hex(&m.content));
    assert_eq!(m.version, 2);
    assert_eq!(m.updated_by, "test@acme/api");

    store.delete("project_deploy.md").await.unwrap();
    assert!(matches!(
        store.read("project_deploy.md").await,
        Err(MemoryError::NotFound(_))
    ));
    assert!(matches!(
        store.delete("project_deploy.md").await,
        Err(MemoryError::NotFound(_))
    ));
    assert_eq!(
        store.clear().await.unwrap(),
        vec!["team/gotchas.md".to_owned()]
    );
    assert!(store.scan().await.unwrap().is_empty());
    assert_eq!(store.load_index().await.unwrap().content, "");
}

#[tokio::test]
async fn secrets_and_bad_paths_are_refused_and_nothing_is_written() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    let err = store
        .write(
            "ops.md",
            &doc("Ops", "db password = hunter22"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, MemoryError::SensitiveData { .. }));
    assert!(!err.to_string().contains("hunter22"));
    for bad in [
        "../x.md",
        "/etc/x.md",
        ".hidden/x.md",
        "notes.txt",
        "a\0.md",
    ] {
        assert!(
            store
                .write(bad, &doc("x", "y"), WriteMode::Overwrite)
                .await
                .is_err(),
            "{bad} accepted"
        );
    }
    assert!(store.check_contained("../../etc/passwd.md").is_err());
    let rows: i64 = admin()
        .await
        .query_one(
            &format!("SELECT count(*) FROM {}.memloop_memories", schema.name),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn index_view_applies_the_load_caps() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    for i in 0..210 {
        store
            .write(
                &format!("m{i:03}.md"),
                &doc(&format!("M{i}"), "b"),
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
    let index = store.load_index().await.unwrap();
    assert!(index.truncated_by_lines);
    assert_eq!(index.original_lines, 210);
    assert!(index.content.contains("- [M199](m199.md)"));
    assert!(!index.content.contains("m200.md"));
    assert!(
        index
            .content
            .contains("WARNING: MEMORY.md is 210 lines (limit 200)")
    );
    assert_eq!(store.index_entries().await.unwrap().len(), 210);
}

#[tokio::test]
async fn projects_are_isolated() {
    let schema = TestSchema::new();
    let a = schema.open("team-a").await;
    let b = schema.open("team-b").await;
    a.write(
        "shared.md",
        &doc("A", "a's secret-free note"),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    // b sees nothing of a's rows, by any route.
    assert!(b.scan().await.unwrap().is_empty());
    assert!(matches!(
        b.read("shared.md").await,
        Err(MemoryError::NotFound(_))
    ));
    assert!(b.index_entries().await.unwrap().is_empty());
    assert!(b.search("note", 5, &[]).await.unwrap().is_empty());
    assert!(matches!(
        b.delete("shared.md").await,
        Err(MemoryError::NotFound(_))
    ));
    assert!(b.clear().await.unwrap().is_empty());
    // b writing the same path creates b's own row; a's is untouched.
    b.write("shared.md", &doc("B", "b's note"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(
        a.read("shared.md").await.unwrap().body,
        "a's secret-free note\n"
    );
    assert_eq!(b.read("shared.md").await.unwrap().body, "b's note\n");
    assert_eq!(a.get("shared.md").await.unwrap().unwrap().version, 1);
}

#[tokio::test]
async fn stale_writes_are_refused_with_a_typed_conflict() {
    let schema = TestSchema::new();
    let machine1 = schema.open("p").await;
    let machine2 = schema.open("p").await;
    let first = machine1
        .write_versioned(
            "d.md",
            &doc("D", "v1"),
            WriteMode::Overwrite,
            Expected::Absent,
        )
        .await
        .unwrap();
    assert_eq!((first.version, first.created), (1, true));
    // Create-only refuses an existing memory.
    let err = machine2
        .write_versioned(
            "d.md",
            &doc("D", "other"),
            WriteMode::Overwrite,
            Expected::Absent,
        )
        .await
        .unwrap_err();
    assert_eq!(err.as_conflict(), Some(("d.md", None, Some(1))));
    machine2
        .write_versioned(
            "d.md",
            &doc("D", "v2"),
            WriteMode::Overwrite,
            Expected::Version(1),
        )
        .await
        .unwrap();
    let err = machine1
        .write_versioned(
            "d.md",
            &doc("D", "stale"),
            WriteMode::Overwrite,
            Expected::Version(1),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Pg(PgError::Conflict { .. })));
    assert!(err.to_string().contains("expected version 1"));
    assert_eq!(machine1.read("d.md").await.unwrap().body, "v2\n");
    // A stale delete is refused too.
    let err = machine1
        .delete_versioned("d.md", Expected::Version(1))
        .await
        .unwrap_err();
    assert!(err.as_conflict().is_some());
    // An identical write changes nothing and keeps the version.
    let same = machine2
        .write_versioned(
            "d.md",
            &doc("D", "v2"),
            WriteMode::Overwrite,
            Expected::Version(2),
        )
        .await
        .unwrap();
    assert_eq!((same.version, same.changed), (2, false));
}

#[tokio::test]
async fn memory_store_write_expects_the_last_version_it_saw() {
    let schema = TestSchema::new();
    let a = schema.open("p").await;
    let b = schema.open("p").await;
    a.write("n.md", &doc("N", "first"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(b.read("n.md").await.unwrap().body, "first\n");
    a.write("n.md", &doc("N", "a's edit"), WriteMode::Overwrite)
        .await
        .unwrap();
    // b last saw version 1: its write is refused, a's edit is not lost.
    let err = b
        .write("n.md", &doc("N", "b's edit"), WriteMode::Overwrite)
        .await
        .unwrap_err();
    let pg = PgError::from_memory_error(&err).unwrap();
    assert_eq!(pg.as_conflict(), Some(("n.md", Some(1), Some(2))));
    assert_eq!(a.read("n.md").await.unwrap().body, "a's edit\n");
    // After re-reading, b's write lands.
    b.read("n.md").await.unwrap();
    b.write("n.md", &doc("N", "b's edit"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(a.get("n.md").await.unwrap().unwrap().version, 3);
}

#[tokio::test]
async fn migrations_are_versioned_and_run_once() {
    let schema = TestSchema::new();
    let (s1, s2) = tokio::join!(schema.open("p"), schema.open("q"));
    drop((s1, s2));
    let _again = schema.open("p").await;
    let rows = admin()
        .await
        .query(
            &format!(
                "SELECT version FROM {}.memloop_schema_migrations",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    let mut versions = versions;
    versions.sort();
    assert_eq!(
        versions,
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        "each migration recorded once"
    );
    let gin: i64 = admin()
        .await
        .query_one(
            // This schema's indexes first (OFFSET 0 keeps the planner from evaluating
            // pg_get_indexdef on other schemas' indexes, which tests running beside this one
            // may be dropping: "could not open relation with OID").
            "SELECT count(*) FROM (SELECT i.indexrelid FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 OFFSET 0) s \
             WHERE pg_get_indexdef(s.indexrelid) ILIKE '%USING gin (search_text)%'",
            &[&schema.name],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(gin, 1);
}

/// The search text is kept by the table, for every writer: one whose search_path does not name
/// the schema, one that gives a value of its own, one that changes the text later. Each row's
/// text is the one the words, fold and bigram functions make, and the store's search finds
/// what such writers wrote, in Latin with accents, Russian and Chinese.
#[tokio::test]
async fn every_writer_gets_the_search_text_the_table_makes() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    let s = &schema.name;
    let admin = admin().await;
    admin
        .batch_execute(&format!(
            "SET search_path = public;
             INSERT INTO {s}.memloop_memories (project_id, rel_path, name, description, body,
                 content, sha256, version, updated_by, write_id, search_text)
             VALUES ('p', 'zurich.md', 'Zürich office', 'where we sit', 'Ёлка on the roof',
                     'c', 'h', 1, 'admin', gen_random_uuid(), to_tsvector('simple', 'bogus')),
                    ('p', 'deploy.md', '部署流程', 'как выкатывать', 'ничего',
                     'c', 'h', 1, 'admin', gen_random_uuid(), NULL);
             UPDATE {s}.memloop_memories SET body = 'the ledger service' WHERE rel_path = 'deploy.md'"
        ))
        .await
        .unwrap();
    let made = |field: &str, weight: &str| {
        format!(
            "setweight(to_tsvector('russian', {s}.memloop_fold({s}.memloop_words({field}))) \
             || to_tsvector('simple', {s}.memloop_grams({field})), '{weight}')"
        )
    };
    let differing: i64 = admin
        .query_one(
            &format!(
                "SELECT count(*) FROM {s}.memloop_memories
                 WHERE search_text IS DISTINCT FROM {} || {} || {}",
                made("name", "A"),
                made("description", "B"),
                made("body", "C")
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        differing, 0,
        "a row's search text is not the one its text makes"
    );
    for (query, path) in [
        ("zurich", "zurich.md"),
        ("елка", "zurich.md"),
        ("выкатывать", "deploy.md"),
        ("部署", "deploy.md"),
        ("ledger", "deploy.md"),
    ] {
        let found = store.search(query, 5, &[]).await.unwrap();
        assert_eq!(
            found.first().map(|(p, _)| p.as_str()),
            Some(path),
            "{query}: {found:?}"
        );
    }
    assert!(store.search("bogus", 5, &[]).await.unwrap().is_empty());
    assert!(store.search("ничего", 5, &[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn wrong_url_down_server_and_missing_permission_are_clear_errors() {
    let err = PgMemoryStore::open(PgConfig::new("postgres://[not a url", "p"))
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::InvalidUrl(_)), "{err:?}");

    let mut down = PgConfig::new("host=127.0.0.1 port=1 user=root dbname=test", "p");
    down.connect_timeout = std::time::Duration::from_secs(2);
    let err = PgMemoryStore::open(down).await.unwrap_err();
    assert!(matches!(err, PgError::Connect(_)), "{err:?}");
    assert!(err.to_string().contains("cannot connect"));

    let err = PgMemoryStore::open(PgConfig::new(
        "host=127.0.0.1 port=5432 user=root dbname=memloop_no_such_db",
        "p",
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::Connect(_)), "{err:?}");

    // A role that may not create anything in the schema.
    let schema = TestSchema::new();
    let role = format!("memloop_ro_{}", &schema.name[13..25]);
    let admin = admin().await;
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {s}; CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {s} TO {role};",
            s = schema.name
        ))
        .await
        .unwrap();
    let url = format!("host=127.0.0.1 port=5432 user={role} dbname=test");
    let err = PgMemoryStore::open(PgConfig::new(url, "p").schema(&schema.name))
        .await
        .unwrap_err();
    admin
        .batch_execute(&format!(
            "DROP SCHEMA {} CASCADE; DROP ROLE {role};",
            schema.name
        ))
        .await
        .unwrap();
    assert!(matches!(err, PgError::Permission(_)), "{err:?}");
}

/// Once an owner has migrated the schema, a role with only SELECT / INSERT / UPDATE / DELETE on
/// the tables opens the store, writes, reads, searches and deletes: opening creates nothing.
#[tokio::test]
async fn a_read_write_role_works_once_the_schema_is_current() {
    let schema = TestSchema::new();
    let owner = schema.open("p").await; // migrates as the owner (root)
    drop(owner);
    let role = format!("memloop_rw_{}", &schema.name[schema.name.len() - 8..]);
    let admin = admin().await;
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN;
             GRANT USAGE ON SCHEMA {s} TO {role};
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {role};",
            s = schema.name
        ))
        .await
        .unwrap();
    let url = format!("host=127.0.0.1 port=5432 user={role} dbname=test");
    let result = async {
        let store = PgMemoryStore::open(
            PgConfig::new(&url, "p")
                .schema(&schema.name)
                .writer("rw@test"),
        )
        .await?;
        store
            .write(
                "team/约定.md",
                &doc("约定", "提交前先跑测试。"),
                WriteMode::Overwrite,
            )
            .await
            .map_err(|e| PgError::Connect(e.to_string()))?;
        let found = store
            .search("测试", 5, &[])
            .await
            .map_err(|e| PgError::Connect(e.to_string()))?;
        store
            .delete("team/约定.md")
            .await
            .map_err(|e| PgError::Connect(e.to_string()))?;
        Ok::<_, PgError>(found)
    }
    .await;
    admin
        .batch_execute(&format!(
            "REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM {role};
             REVOKE ALL ON SCHEMA {s} FROM {role}; DROP ROLE {role};",
            s = schema.name
        ))
        .await
        .unwrap();
    let found = result.expect("a read-write role must be able to use a current schema");
    assert_eq!(found[0].0, "team/约定.md");
}

/// A connection dropped while the store opens is retried on a fresh one: here a loopback proxy
/// in front of the server closes the first connection it accepts.
#[tokio::test]
async fn opening_survives_a_dropped_first_connection() {
    use tokio::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = dropped.clone();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut client, _)) = listener.accept().await {
            if std::mem::take(&mut first) {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(client); // the server "restarts" under the first connection
                continue;
            }
            tokio::spawn(async move {
                if let Ok(mut server) = TcpStream::connect("127.0.0.1:5432").await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    let schema = TestSchema::new();
    let url = format!("host=127.0.0.1 port={port} user=root dbname=test");
    let store = PgMemoryStore::open(PgConfig::new(&url, "p").schema(&schema.name))
        .await
        .expect("the open is retried after the dropped connection");
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
    store
        .write("x.md", &doc("X", "after a retry"), WriteMode::Overwrite)
        .await
        .unwrap();
}

/// A conditional write through the `MemoryStore` trait (content versions) on the PostgreSQL
/// store (row versions): the content version a write reports is the row's hash, a stale one is
/// refused with the current hash and nothing written, a fresh one is accepted, and
/// `Expected::from_content` names the row version the trait's hash stands for.
#[tokio::test]
async fn trait_content_versions_map_onto_row_versions() {
    use memloop_store::{ExpectedVersion, content_version};
    use std::sync::Arc;
    let schema = TestSchema::new();
    let pg = schema.open("acme/api").await;
    let store: Arc<dyn MemoryStore> = Arc::new(pg.clone());
    let rel = "project_deploy.md";

    let first = store
        .write_if(
            rel,
            &doc("Deploys", "Tuesdays only."),
            WriteMode::Overwrite,
            &ExpectedVersion::Absent,
        )
        .await
        .unwrap();
    let row = pg.get(rel).await.unwrap().unwrap();
    assert_eq!(first.version, row.sha256);
    assert_eq!(
        first.version,
        content_version(&store.read(rel).await.unwrap().raw)
    );
    assert_eq!(row.version, 1);

    // A teammate (another store on the project) changes it: our hash is now stale.
    let teammate = schema.open("acme/api").await;
    let theirs = teammate
        .write_versioned(
            rel,
            &doc("Deploys", "Thursdays too."),
            WriteMode::Overwrite,
            Expected::Version(1),
        )
        .await
        .unwrap();
    assert_eq!(theirs.version, 2);

    let stale = store
        .write_if(
            rel,
            &doc("Deploys", "Never on Fridays."),
            WriteMode::Overwrite,
            &ExpectedVersion::Is(first.version.clone()),
        )
        .await
        .unwrap_err();
    match stale {
        MemoryError::VersionConflict {
            path,
            expected,
            current,
        } => {
            assert_eq!(path, rel);
            assert_eq!(expected, first.version);
            assert_eq!(current, theirs.sha256);
        }
        other => panic!("a stale content version was not a conflict: {other:?}"),
    }
    let kept = store.read(rel).await.unwrap();
    assert_eq!(
        kept.body, "Thursdays too.\n",
        "the refused write changed the row"
    );
    assert_eq!(pg.get(rel).await.unwrap().unwrap().version, 2);

    // `Absent` on an existing memory is a conflict too.
    assert!(matches!(
        store
            .write_if(
                rel,
                &doc("Deploys", "x"),
                WriteMode::Overwrite,
                &ExpectedVersion::Absent
            )
            .await,
        Err(MemoryError::VersionConflict { .. })
    ));

    // The fresh hash (what a read returns) is accepted and makes row version 3.
    let fresh = content_version(&kept.raw);
    assert_eq!(
        Expected::from_content(
            &ExpectedVersion::Is(fresh.clone()),
            rel,
            Some((2, &theirs.sha256))
        )
        .unwrap(),
        Expected::Version(2)
    );
    let third = store
        .write_if(
            rel,
            &doc("Deploys", "Never on Fridays."),
            WriteMode::Overwrite,
            &ExpectedVersion::Is(fresh.to_uppercase()),
        )
        .await
        .unwrap();
    let row = pg.get(rel).await.unwrap().unwrap();
    assert_eq!((row.version, third.version), (3, row.sha256.clone()));
    assert_eq!(store.read(rel).await.unwrap().body, "Never on Fridays.\n");
}
