//! Test helpers shared by the extraction and dream tests.
#![allow(dead_code, clippy::unwrap_used)]

use memloop_core::tool::ToolRegistry;
use memloop_core::{BackgroundTasks, HookContext, events::VecSink, message::Message};
use memloop_testkit::{ScriptedModel, hook_context};
use memloop_tools::{EditFile, Glob, Grep, ReadFile, Shell, WriteFile};
use std::sync::Arc;

/// The tools of a coding agent: what the memory forks inherit (and their gates restrict).
pub fn coding_tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(Arc::new(ReadFile::default()))
        .with(Arc::new(Glob::default()))
        .with(Arc::new(Grep::default()))
        .with(Arc::new(Shell::default()))
        .with(Arc::new(WriteFile))
        .with(Arc::new(EditFile))
}

/// A stop-hook context for the main agent of session `s1`, a coding agent.
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
        turn,
        cwd: std::env::temp_dir(),
        system: Arc::new(vec!["You are a helpful agent.".into()]),
        tools: coding_tools(),
        events: Arc::new(events.clone()),
        background: bg.clone(),
        ..hook_context(model, messages)
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

/// Run `extractor` once over a one-turn conversation with `model`; returns the memory paths it
/// reports written and the events the fork emitted.
pub async fn run_extractor(
    extractor: &dyn memloop_memory::extract::Extractor,
    model: Arc<ScriptedModel>,
) -> (Vec<memloop_store::MemoryPath>, VecSink) {
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    let ctx = memloop_memory::extract::ExtractionContext {
        hook: hook_with_model(1, conversation(1), &events, &bg, model),
        new_messages: conversation(1),
        trailing: false,
    };
    (extractor.extract(&ctx).await.unwrap(), events)
}
