//! Implement your own [`Selector`] and plug it into an agent. Runs offline.
//!
//! ```text
//! cargo run --example custom_selector
//! ```
#![allow(clippy::print_stdout)]

use memloop::MemoryStore;
use memloop::Selector;
use memloop::core::{Agent, events::AgentEvent, tool::ToolRegistry};
use memloop::memory::recall::RecallEvent;
use memloop::memory::recall::{RecallHook, SelectionContext, SelectorError};
use memloop::memory::{
    files::FileMemoryStore,
    store::{MemoryDoc, MemoryHeader, MemoryType, WriteMode},
    tools::memory_tools,
};
use memloop::testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;
use std::time::Duration;

// ---- the whole custom selector --------------------------------------------------------------
/// Feedback memories first (they say how the user wants things done), then any memory whose
/// description shares a word with the query.
struct FeedbackFirst;

#[async_trait::async_trait]
impl Selector for FeedbackFirst {
    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let query = query.to_lowercase();
        let words: Vec<&str> = query.split_whitespace().filter(|w| w.len() > 3).collect();
        let matches = |h: &&MemoryHeader| {
            let d = h.description.as_deref().unwrap_or("").to_lowercase();
            words.iter().any(|w| d.contains(w))
        };
        let mut picked: Vec<&MemoryHeader> = headers.iter().filter(matches).collect();
        // Stable sort: feedback first, otherwise newest first (the scan order).
        picked.sort_by_key(|h| h.memory_type != Some(MemoryType::Feedback));
        Ok(picked
            .iter()
            .take(ctx.limit)
            .map(|h| h.rel_path.clone())
            .collect())
    }
}
// ----------------------------------------------------------------------------------------------

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path().join("memory"))?);
    let memories = [
        (
            "project_tests.md",
            MemoryType::Project,
            "the tests live in tests/ and need docker",
        ),
        (
            "feedback_tests.md",
            MemoryType::Feedback,
            "user wants tests to hit a real database",
        ),
        (
            "reference_ci.md",
            MemoryType::Reference,
            "CI dashboard for the tests is at ci.example",
        ),
        (
            "user_role.md",
            MemoryType::User,
            "the user is a backend engineer",
        ),
    ];
    for (file, kind, description) in memories {
        let doc = MemoryDoc {
            name: file.trim_end_matches(".md").into(),
            description: description.into(),
            memory_type: Some(kind),
            body: format!("{description}."),
        };
        store.write(file, &doc, WriteMode::Overwrite).await?;
    }

    let recall = Arc::new(RecallHook::new(store.clone(), Arc::new(FeedbackFirst)));
    // The scripted model stands in for a real LLM: offline and deterministic. Like a real model it
    // takes a moment and looks something up first; recall runs meanwhile and its attachment is
    // added at the next loop check (a turn that ends first drops it).
    let lookup = ScriptStep::tool("memory_read", serde_json::json!({"topic": "_list"}));
    let model = ScriptedModel::new()
        .then(ScriptStep::Delay(
            Duration::from_millis(300),
            Box::new(lookup),
        ))
        .then(ScriptStep::text("Understood: real database, no mocks."));
    let events = move |e: AgentEvent| match e.extension() {
        Some(RecallEvent::MemoriesSurfaced { paths, bytes }) => {
            println!("surfaced {paths:?} ({bytes} bytes)")
        }
        Some(RecallEvent::RecallSkipped { reason }) => println!("recall skipped: {reason}"),
        _ => {}
    };
    let mut agent = Agent::builder(Arc::new(model))
        .tools(
            memory_tools(store)
                .into_iter()
                .fold(ToolRegistry::new(), ToolRegistry::with),
        )
        .hook(recall)
        .events(Arc::new(events))
        .build();
    let out = agent
        .run_turn("how should I write the tests for the importer?")
        .await?;
    println!("assistant: {}", out.text);
    for block in agent.messages().iter().flat_map(|m| &m.content) {
        if let Some(text) = block
            .as_text()
            .filter(|t| t.starts_with("<system-reminder>"))
        {
            println!("\ninjected into the conversation:\n{text}");
        }
    }
    Ok(())
}
