//! A backend with no checks of its own (the test kit's `MapStore`: a map behind a mutex, which
//! stores whatever write reaches it) used through the public entry point: the store's rules
//! still hold, because they run before the backend sees a write. With `MapStore`'s source, this
//! is the checked recipe "Add a memory backend" in `docs/ARCHITECTURE.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_store::{MemoryDoc, MemoryError, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::MapStore;
use std::path::PathBuf;
use std::sync::Arc;

fn doc(body: &str) -> MemoryDoc {
    MemoryDoc::new("Deploys", "how we deploy", MemoryType::Project, body)
}

#[tokio::test]
async fn a_naive_backend_still_refuses_what_the_rules_refuse() {
    let naive = Arc::new(MapStore::new());
    let store: Arc<dyn MemoryStore> = naive.clone();
    let secret = "the key is AKIAIOSFODNN7EXAMPLE, keep it safe";
    let refused: Vec<(&str, MemoryDoc)> = vec![
        ("deploy.md", doc(secret)),
        ("deploy.md", MemoryDoc::new(secret, "d", None, "body")),
        ("deploy.md", MemoryDoc::new("n", secret, None, "body")),
        ("../escape.md", doc("fine")),
        ("team/../../escape.md", doc("fine")),
        ("/etc/passwd.md", doc("fine")),
        ("MEMORY.md", doc("fine")),
        ("team/MEMORY.md", doc("fine")),
        ("notes.txt", doc("fine")),
        ("deploy.md", doc(&"a".repeat(1024 * 1024 + 1))),
    ];
    for (rel, d) in &refused {
        let err = store.write(rel, d, WriteMode::Overwrite).await.unwrap_err();
        assert!(
            matches!(
                err,
                MemoryError::SensitiveData { .. }
                    | MemoryError::InvalidName { .. }
                    | MemoryError::TooLarge { .. }
            ),
            "{rel}: {err}"
        );
    }
    for rel in ["../escape.md", "/etc/passwd.md", "MEMORY.md"] {
        assert!(store.delete(rel).await.is_err(), "{rel}");
    }
    // Nothing reached the map (it would have stored it).
    assert_eq!(naive.paths(), Vec::<String>::new());

    // What passes reaches the backend, at exactly 1 MiB of memory text too (frontmatter and
    // body: the cap counts the whole text for every writer).
    store
        .write("deploy.md", &doc("Tuesdays only."), WriteMode::Overwrite)
        .await
        .unwrap();
    let frontmatter = doc("a").render().len() - 1;
    let exactly = doc(&"a".repeat(1024 * 1024 - frontmatter));
    assert_eq!(exactly.render().len(), 1024 * 1024);
    store
        .write("big.md", &exactly, WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(naive.paths(), ["big.md", "deploy.md"]);
    store.delete("big.md").await.unwrap();
    assert_eq!(naive.paths(), ["deploy.md"]);
    assert_eq!(
        store.read("deploy.md").await.unwrap().body.trim_end(),
        "Tuesdays only."
    );
    // A database store has no directory: write targets are memory paths.
    assert_eq!(store.describe().dir(), None);
    assert_eq!(
        store.write_target("team/a.md").unwrap(),
        PathBuf::from("team/a.md")
    );
}
