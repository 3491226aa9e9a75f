//! A deliberately naive backend (a `HashMap` behind a mutex, no checks at all) used through the
//! public entry point: the store's rules still hold, because they run before the backend sees a
//! write. This file is also the checked recipe "Add a memory backend" in `docs/ARCHITECTURE.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop_store::{
    CheckedWrite, IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader,
    MemoryPath, MemoryStore, MemoryType, StoreDescription, StoreLocation, WriteMode, WriteReport,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The recipe: implement the primitives; take `MemoryPath` / `CheckedWrite` as given.
#[derive(Default)]
struct NaiveStore {
    memories: Mutex<HashMap<String, MemoryDoc>>,
    /// Every write that reached the backend.
    writes: Mutex<Vec<String>>,
}

#[async_trait]
impl MemoryStore for NaiveStore {
    fn describe(&self) -> StoreDescription {
        StoreDescription {
            location: StoreLocation::Database {
                engine: "hashmap".into(),
                url: "memory://naive".into(),
                project: "test".into(),
            },
            identity: "hashmap:naive".into(),
        }
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        let m = self.memories.lock().unwrap();
        Ok(m.iter()
            .map(|(rel, doc)| MemoryHeader {
                rel_path: rel.clone(),
                name: Some(doc.name.clone()),
                description: Some(doc.description.clone()),
                memory_type: doc.memory_type,
                mtime: std::time::SystemTime::UNIX_EPOCH,
            })
            .collect())
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let m = self.memories.lock().unwrap();
        let doc = m
            .get(path.as_str())
            .ok_or_else(|| MemoryError::NotFound(path.to_string()))?;
        Ok(MemoryFile {
            header: MemoryHeader {
                rel_path: path.to_string(),
                name: Some(doc.name.clone()),
                description: Some(doc.description.clone()),
                memory_type: doc.memory_type,
                mtime: std::time::SystemTime::UNIX_EPOCH,
            },
            body: doc.body.clone(),
            raw: doc.body.clone(),
        })
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        // No checks at all: whatever arrives is stored.
        self.writes.lock().unwrap().push(write.path().to_string());
        let created = self
            .memories
            .lock()
            .unwrap()
            .insert(write.path().to_string(), write.doc().clone())
            .is_none();
        Ok(WriteReport {
            rel_path: write.path().to_string(),
            path: PathBuf::from(write.path().as_str()),
            created,
        })
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        self.writes.lock().unwrap().push(format!("delete {path}"));
        self.memories.lock().unwrap().remove(path.as_str());
        Ok(())
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        Ok(self
            .memories
            .lock()
            .unwrap()
            .drain()
            .map(|(k, _)| k)
            .collect())
    }

    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        Ok(LoadedIndex::default())
    }

    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        Ok(Vec::new())
    }
}

fn doc(body: &str) -> MemoryDoc {
    MemoryDoc::new("Deploys", "how we deploy", MemoryType::Project, body)
}

#[tokio::test]
async fn a_naive_backend_still_refuses_what_the_rules_refuse() {
    let naive = Arc::new(NaiveStore::default());
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
    assert_eq!(*naive.writes.lock().unwrap(), Vec::<String>::new());

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
    store.delete("big.md").await.unwrap();
    assert_eq!(
        *naive.writes.lock().unwrap(),
        vec!["deploy.md", "big.md", "delete big.md"]
    );
    assert_eq!(
        store.read("deploy.md").await.unwrap().body,
        "Tuesdays only."
    );
    // A database store has no directory: write targets are memory paths.
    assert_eq!(store.describe().dir(), None);
    assert_eq!(
        store.write_target("team/a.md").unwrap(),
        PathBuf::from("team/a.md")
    );
}
