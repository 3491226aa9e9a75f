//! `PgFtsSelector` against the machine's PostgreSQL, through the selector contract.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_memory::recall::{SelectionContext, Selector};
use memloop_memory::store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_pg::PgFtsSelector;
use std::sync::Arc;
use support::TestSchema;

#[tokio::test]
async fn full_text_selector_ranks_and_obeys_the_contract() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    let other = schema.open("other").await;
    let mems = [
        (
            "deploy.md",
            "Deploy windows",
            "when production deploys happen",
            "Deploys run on Tuesdays after the freeze.",
        ),
        (
            "testing.md",
            "Testing",
            "integration tests hit a real database",
            "Never mock the database in integration tests.",
        ),
        (
            "style.md",
            "Code style",
            "formatting rules",
            "Run rustfmt before committing.",
        ),
        (
            "db.md",
            "Database",
            "postgres setup",
            "The staging database is rebuilt nightly.",
        ),
    ];
    for (rel, name, desc, body) in mems {
        store
            .write(
                rel,
                &MemoryDoc::new(name, desc, MemoryType::Project, body),
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
    other
        .write(
            "leak.md",
            &MemoryDoc::new("Deploy", "deploys deploys", None, "deploying"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let headers = store.scan().await.unwrap();
    let selector: Arc<dyn Selector> = Arc::new(PgFtsSelector::new(store.clone()));

    let got = selector
        .select_checked(
            "how do we deploy to production?",
            &headers,
            &SelectionContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(got.first().map(String::as_str), Some("deploy.md"));
    assert!(
        !got.contains(&"leak.md".to_owned()),
        "another project's row surfaced"
    );

    // Name matches outrank body matches (weights A > C).
    let got = selector
        .select_checked("database", &headers, &SelectionContext::default())
        .await
        .unwrap();
    assert_eq!(got, vec!["db.md".to_owned(), "testing.md".to_owned()]);

    // Already surfaced memories are skipped and the limit holds.
    let mut ctx = SelectionContext::with_limit(1);
    ctx.already_surfaced.insert("db.md".into());
    let got = selector
        .select_checked("database", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["testing.md".to_owned()]);

    // No usable words: nothing.
    assert!(
        selector
            .select_checked("?!", &headers, &SelectionContext::default())
            .await
            .unwrap()
            .is_empty()
    );

    // Cancelled turn: a typed error.
    let ctx = SelectionContext::default();
    ctx.cancel.cancel();
    assert!(selector.select("deploy", &headers, &ctx).await.is_err());
}
