//! Test helpers shared by the extraction and dream tests.
#![allow(dead_code)]

use memloop_core::testing::ScriptedModel;
use memloop_core::{AgentKind, BackgroundTasks, HookContext, Message, VecSink};
use std::sync::Arc;

/// A stop-hook context for the main agent of session `s1`.
pub fn hook(
    turn: u64,
    messages: Vec<Message>,
    events: &VecSink,
    bg: &BackgroundTasks,
) -> HookContext {
    hook_with_model(turn, messages, events, bg, Arc::new(ScriptedModel::new()))
}

/// Same, with a given model.
pub fn hook_with_model(
    turn: u64,
    messages: Vec<Message>,
    events: &VecSink,
    bg: &BackgroundTasks,
    model: Arc<ScriptedModel>,
) -> HookContext {
    HookContext {
        session_id: "s1".into(),
        turn,
        agent: AgentKind::Main,
        cwd: std::env::temp_dir(),
        model,
        system: Arc::new(vec!["You are a helpful agent.".into()]),
        messages: Arc::new(messages),
        context_tokens: 0,
        recent_tools: Vec::new(),
        events: Arc::new(events.clone()),
        background: bg.clone(),
        cancel: Default::default(),
    }
}

/// A conversation of `turns` user/assistant pairs with ids `u1`, `a1`, `u2`, ...
pub fn conversation(turns: usize) -> Vec<Message> {
    (1..=turns)
        .flat_map(|i| {
            [
                Message::user(format!("question {i}")).with_id(format!("u{i}").as_str()),
                Message::assistant(format!("answer {i}")).with_id(format!("a{i}").as_str()),
            ]
        })
        .collect()
}

/// TEST DOUBLE (scheduler tests only): a store that only knows its root. Containment is a
/// lexical prefix check here; the real, symlink-resolving gate is `FileMemoryStore`'s, used by
/// the forked-extractor and dream tests.
pub struct RootOnlyStore(pub std::path::PathBuf);

#[async_trait::async_trait]
impl memloop_memory::MemoryStore for RootOnlyStore {
    fn root(&self) -> &std::path::Path {
        &self.0
    }
    async fn scan(&self) -> Result<Vec<memloop_memory::MemoryHeader>, memloop_memory::MemoryError> {
        Ok(Vec::new())
    }
    async fn read(
        &self,
        p: &str,
    ) -> Result<memloop_memory::MemoryFile, memloop_memory::MemoryError> {
        Err(memloop_memory::MemoryError::NotFound(p.into()))
    }
    async fn write(
        &self,
        p: &str,
        _: &memloop_memory::MemoryDoc,
        _: memloop_memory::WriteMode,
    ) -> Result<memloop_memory::WriteReport, memloop_memory::MemoryError> {
        Err(memloop_memory::MemoryError::NotFound(p.into()))
    }
    async fn delete(&self, p: &str) -> Result<(), memloop_memory::MemoryError> {
        Err(memloop_memory::MemoryError::NotFound(p.into()))
    }
    async fn load_index(&self) -> Result<memloop_memory::LoadedIndex, memloop_memory::MemoryError> {
        Ok(Default::default())
    }
    async fn index_entries(
        &self,
    ) -> Result<Vec<memloop_memory::IndexEntry>, memloop_memory::MemoryError> {
        Ok(Vec::new())
    }
    fn check_contained(
        &self,
        path: &std::path::Path,
    ) -> Result<std::path::PathBuf, memloop_memory::MemoryError> {
        if path.starts_with(&self.0) && path != self.0 {
            Ok(path.to_path_buf())
        } else {
            Err(memloop_memory::MemoryError::OutsideMemoryDir {
                path: path.into(),
                root: self.0.clone(),
            })
        }
    }
}
