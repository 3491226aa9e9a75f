//! The team store's change feed on the machine's PostgreSQL: writes, deletes and renames by other
//! instances are reported once asked, a transaction that commits late is never skipped, a change is
//! not reported again while a long transaction runs elsewhere, a cursor
//! from another project asks for a rescan, and a killed connection never yields a wrong answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::PgMemoryStore;
use memloop_store::{ChangeCursor, Changes, MemoryDoc, MemoryStore, MemoryType, WriteMode};
use support::{TestSchema, URL, admin};

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, format!("about {name}"), MemoryType::Project, body)
}

async fn put(store: &PgMemoryStore, rel: &str, name: &str) {
    store
        .write(rel, &doc(name, "body"), WriteMode::Overwrite)
        .await
        .unwrap();
}

/// A first cursor (the answer to `None` is always a rescan).
async fn start(store: &PgMemoryStore) -> ChangeCursor {
    match store.changes(None).await.unwrap() {
        Changes::Rescan { cursor: Some(c) } => c,
        other => panic!("expected a rescan with a cursor, got {other:?}"),
    }
}

/// The paths written and removed since `cursor`, and the next cursor.
async fn delta(
    store: &PgMemoryStore,
    cursor: &ChangeCursor,
) -> (Vec<String>, Vec<String>, ChangeCursor) {
    match store.changes(Some(cursor)).await.unwrap() {
        Changes::Unchanged => (Vec::new(), Vec::new(), cursor.clone()),
        Changes::Changed {
            cursor,
            written,
            removed,
            ..
        } => {
            let mut w: Vec<String> = written.into_iter().map(|h| h.rel_path).collect();
            let mut r: Vec<String> = removed.into_iter().map(|p| p.as_str().to_owned()).collect();
            w.sort();
            r.sort();
            (w, r, cursor)
        }
        Changes::Rescan { .. } => panic!("a cursor of this project must not ask for a rescan"),
    }
}

/// An answer carries the text of what it reports, as a read returns it, so a reader catching up
/// needs no read per memory; and what it carried counts as seen: a write after it expects that
/// version, as it would after a read.
#[tokio::test]
async fn the_feed_carries_the_texts_it_reports_and_they_count_as_read() {
    let schema = TestSchema::new();
    let mine = schema.open("feed/texts").await;
    let theirs = schema.open("feed/texts").await;
    put(&theirs, "team/deploy.md", "Deploys").await;
    let c0 = start(&mine).await;
    // Seen by a read at version 1.
    mine.read("team/deploy.md").await.unwrap();
    theirs
        .write(
            "team/deploy.md",
            &MemoryDoc::new(
                "Deploys",
                "Fridays now",
                MemoryType::Project,
                "Fridays, not Tuesdays.",
            ),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    put(&theirs, "数据库.md", "数据库选型").await;
    let Changes::Changed { written, files, .. } = mine.changes(Some(&c0)).await.unwrap() else {
        panic!("two writes since the cursor");
    };
    assert_eq!(files.len(), 2, "both texts carried");
    for f in &files {
        assert!(written.contains(&f.header));
        assert_eq!(*f, mine.read(&f.header.rel_path).await.unwrap());
    }
    let carried = |p: &str| files.iter().find(|f| f.header.rel_path == p).unwrap();
    assert!(
        carried("team/deploy.md")
            .body
            .contains("Fridays, not Tuesdays.")
    );

    // Seen at version 2 through the feed: a plain write replaces it (no conflict with 1).
    let c1 = start(&mine).await;
    theirs
        .write(
            "team/deploy.md",
            &MemoryDoc::new("Deploys", "Mondays", MemoryType::Project, "Mondays."),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    mine.changes(Some(&c1)).await.unwrap();
    mine.write(
        "team/deploy.md",
        &MemoryDoc::new("Deploys", "Wednesdays", MemoryType::Project, "Wednesdays."),
        WriteMode::Overwrite,
    )
    .await
    .expect("the version the feed carried is the one this write expects");
    assert!(
        mine.read("team/deploy.md")
            .await
            .unwrap()
            .body
            .contains("Wednesdays.")
    );
}

#[tokio::test]
async fn writes_deletes_and_renames_by_another_instance_are_reported() {
    let schema = TestSchema::new();
    let mine = schema.open("团队/api").await;
    let theirs = schema.open("团队/api").await;
    let c0 = start(&mine).await;
    assert!(matches!(
        mine.changes(Some(&c0)).await.unwrap(),
        Changes::Unchanged
    ));

    put(&theirs, "decisions/数据库.md", "数据库选型").await;
    put(&theirs, "team/deploy.md", "Deploys").await;
    let (w, r, c1) = delta(&mine, &c0).await;
    assert_eq!(w, ["decisions/数据库.md", "team/deploy.md"]);
    assert!(r.is_empty());
    match mine.changes(Some(&c1)).await.unwrap() {
        Changes::Changed { written, .. } => {
            assert!(written.is_empty() || written.iter().all(|h| h.rel_path != "x"))
        }
        Changes::Unchanged => {}
        other => panic!("{other:?}"),
    }

    // A rewrite carries the new header.
    theirs
        .write(
            "team/deploy.md",
            &MemoryDoc::new("Deploys", "Fridays now", MemoryType::Project, "b"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    match mine.changes(Some(&c1)).await.unwrap() {
        Changes::Changed { written, .. } => {
            let h = written
                .iter()
                .find(|h| h.rel_path == "team/deploy.md")
                .unwrap();
            assert_eq!(h.description.as_deref(), Some("Fridays now"));
        }
        other => panic!("{other:?}"),
    }

    // A delete, and a rename done by another writer straight in the database.
    theirs.delete("decisions/数据库.md").await.unwrap();
    let (_, r, c2) = delta(&mine, &c1).await;
    assert_eq!(r, ["decisions/数据库.md"]);
    admin()
        .await
        .execute(
            &format!(
                "UPDATE {}.memloop_memories SET rel_path = 'team/release.md'
                 WHERE project_id = '团队/api' AND rel_path = 'team/deploy.md'",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    let (w, r, _) = delta(&mine, &c2).await;
    assert_eq!(w, ["team/release.md"]);
    // The rename's old path is reported. The delete before `c2` may be reported once more: a
    // transaction open elsewhere on the server (another test, another client) holds the
    // snapshot's xmin back, and the feed reports a change twice rather than miss one.
    assert!(r.contains(&"team/deploy.md".to_owned()), "{r:?}");
    assert!(
        r.iter()
            .all(|p| p == "team/deploy.md" || p == "decisions/数据库.md"),
        "{r:?}"
    );

    // Another project's writes are not this project's changes, and its cursor means a rescan.
    let other = schema.open("other").await;
    let oc = start(&other).await;
    put(&other, "x.md", "X").await;
    let (w, r, _) = delta(&mine, &c2).await;
    assert!(!w.contains(&"x.md".to_owned()) && !r.contains(&"x.md".to_owned()));
    assert!(matches!(
        mine.changes(Some(&oc)).await.unwrap(),
        Changes::Rescan { .. }
    ));
    assert!(matches!(
        mine.changes(Some(&ChangeCursor::new("gen:12")))
            .await
            .unwrap(),
        Changes::Rescan { .. }
    ));
}

/// A transaction that started before a reader looked and commits after it is still reported:
/// the cursor never moves past a transaction that was running.
#[tokio::test]
async fn a_write_that_commits_late_is_not_skipped() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    put(&store, "a.md", "A").await;
    let c0 = start(&store).await;

    let (slow, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    slow.batch_execute(&format!(
        "BEGIN; SET LOCAL search_path TO {s};
         INSERT INTO {s}.memloop_memories
            (project_id, rel_path, name, description, memory_type, body, content, sha256,
             version, updated_by, write_id)
         VALUES ('p', 'late.md', 'Late', 'late', 'project', 'b', 'c', 'h', 1, 'slow',
                 gen_random_uuid())",
        s = schema.name
    ))
    .await
    .unwrap();

    // Meanwhile a quick write commits and is read.
    put(&store, "quick.md", "Quick").await;
    let (w, _, c1) = delta(&store, &c0).await;
    // The running one is not visible yet; `a.md` was in the first snapshot.
    assert_eq!(w, ["quick.md"]);

    slow.batch_execute("COMMIT").await.unwrap();
    let (w, _, _) = delta(&store, &c1).await;
    assert!(
        w.contains(&"late.md".to_owned()),
        "the late commit must be reported after the quick one was: {w:?}"
    );
}

/// A transaction left open elsewhere on the server (it holds every snapshot's `xmin` back) does
/// not make the feed report a change twice: each answer reports what the previous answer's
/// snapshot did not see.
#[tokio::test]
async fn a_long_transaction_elsewhere_does_not_repeat_changes() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    let (long, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    // An id assigned and kept: the oldest transaction running on the server from now on.
    long.batch_execute("BEGIN; SELECT pg_current_xact_id()")
        .await
        .unwrap();
    let mut cursor = start(&store).await;
    for round in 0..4 {
        let name = format!("n{round}.md");
        put(&store, &name, "N").await;
        let (w, r, next) = delta(&store, &cursor).await;
        assert_eq!((w, r), (vec![name], vec![]), "round {round}");
        let (w, r, _) = delta(&store, &next).await;
        assert!(w.is_empty() && r.is_empty(), "reported again: {w:?} {r:?}");
        cursor = next;
    }
    long.batch_execute("ROLLBACK").await.unwrap();
}

/// Killing the store's connections in the middle never produces a wrong "unchanged".
#[tokio::test]
async fn a_killed_connection_gives_the_right_answer_or_an_error() {
    let schema = TestSchema::new();
    // Its own application name, so only this store's connections are killed.
    let name = format!("memloop-kill-{}", &schema.name[schema.name.len() - 8..]);
    let store = PgMemoryStore::open(schema.config("p").application_name(&name))
        .await
        .unwrap();
    let c0 = start(&store).await;
    put(&store, "a.md", "A").await;
    admin()
        .await
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .await
        .unwrap();
    match store.changes(Some(&c0)).await {
        Ok(Changes::Changed { written, .. }) => {
            assert_eq!(written[0].rel_path, "a.md")
        }
        Ok(other) => panic!("wrong answer after a killed connection: {other:?}"),
        Err(_) => {} // a clear error is acceptable; a wrong answer is not
    }
}
