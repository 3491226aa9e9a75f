//! Helpers shared by the recall integration tests.
#![allow(dead_code, clippy::unwrap_used)] // test helpers

use memloop_core::{CancellationToken, HookContext, events::VecSink, message::Message};
use memloop_files::FileMemoryStore;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::ScriptedModel;
use std::sync::Arc;
use tempfile::TempDir;

/// A real memory dir in a tempdir.
pub fn store() -> (TempDir, Arc<dyn MemoryStore>) {
    let tmp = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(tmp.path().join("memory")).unwrap();
    (tmp, Arc::new(store))
}

/// Write one memory through the store.
pub async fn put(store: &Arc<dyn MemoryStore>, rel: &str, description: &str, body: &str) {
    let doc = MemoryDoc {
        name: rel.trim_end_matches(".md").replace('/', " "),
        description: description.into(),
        memory_type: Some(MemoryType::Project),
        body: body.into(),
    };
    store.write(rel, &doc, WriteMode::Overwrite).await.unwrap();
}

/// A hook context over `messages`.
pub fn hook_ctx(
    messages: Vec<Message>,
    events: &VecSink,
    cancel: CancellationToken,
) -> HookContext {
    HookContext {
        session_id: "test-session".into(),
        cwd: std::env::temp_dir(),
        events: Arc::new(events.clone()),
        cancel,
        ..memloop_testkit::hook_context(Arc::new(ScriptedModel::new()), messages)
    }
}
