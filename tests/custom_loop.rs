//! `MemorySession`, memloop's memory on a host's own loop: the three sessions of
//! `examples/custom_loop.rs` (rule saved, recalled in a new session, kept through compaction),
//! and the rules the session shares with memloop's loop: extraction skipped when the agent saved
//! a memory itself, a memory never recalled twice in a session (again after compaction), a
//! recall that misses its deadline dropped and not counted.

#[path = "../examples/custom_loop.rs"]
mod custom_loop;

use memloop::core::events::VecSink;
use memloop::core::message::Message;
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::{SelectionContext, SelectorError};
use memloop::memory::store::MemoryHeader;
use memloop::memory::{MemoryEvent, extract::EXTRACTOR_PURPOSE};
use memloop::testkit::{ScriptStep, ScriptedModel};
use memloop::{MemorySetup, Selector, async_trait};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

fn setup(home: &std::path::Path) -> anyhow::Result<MemorySetup> {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_string_lossy())]);
    Ok(MemorySetup::with_resolver(
        MemoryDirResolver::new(home),
        env,
    )?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sessions_on_a_custom_loop() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    custom_loop::three_sessions(home.path()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_the_agent_saved_itself_skips_extraction() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let setup = setup(home.path())?;
    let model = ScriptedModel::new()
        .on_purpose("main", |req| {
            let done = req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some());
            Some(match done {
                false => ScriptStep::tool(
                    "memory_write",
                    json!({"topic": "feedback_package_manager",
                    "type": "feedback", "description": "install packages with pnpm, never npm",
                    "content": "Always use pnpm, never npm."}),
                ),
                true => ScriptStep::text("Saved."),
            })
        })
        .on_purpose(EXTRACTOR_PURPOSE, |_| {
            Some(ScriptStep::text("Nothing new."))
        })
        .rule(|_| Some(ScriptStep::text("Nothing to do.")));
    let events = VecSink::default();
    let memory = setup
        .open_session(Arc::new(model.clone()), "s")?
        .with_events(Arc::new(events.clone()));
    custom_loop::turn(
        &memory,
        &model,
        "For this repo: always use pnpm, never npm.",
    )
    .await?;
    assert!(memory.shutdown(WAIT).await.completed);
    let dir = &setup.memory_dir().ok_or(anyhow::anyhow!("memory off"))?.dir;
    assert!(dir.join("feedback_package_manager.md").is_file());
    assert!(
        model.requests_for(EXTRACTOR_PURPOSE).is_empty(),
        "the extractor ran"
    );
    let skipped = events.events().iter().any(|e| {
        matches!(e.extension(), Some(MemoryEvent::ExtractionSkipped { reason }) if reason.contains("already wrote"))
    });
    assert!(skipped, "no ExtractionSkipped event");
    Ok(())
}

/// Writes the rule through the session's tool, as the host's model would.
async fn save_rule(memory: &memloop::MemorySession) -> anyhow::Result<()> {
    let args = json!({"topic": "feedback_package_manager", "type": "feedback",
        "description": "install packages with pnpm, never npm", "content": "Always use pnpm, never npm."});
    memory.call_tool("memory_write", &args.to_string()).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_is_recalled_once_per_session_and_again_after_compaction() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let setup = setup(home.path())?.extraction(false);
    let model = Arc::new(ScriptedModel::new().rule(|_| Some(ScriptStep::text("Nothing to do."))));
    save_rule(&setup.open_session(model.clone(), "writer")?).await?;
    let memory = setup.open_session(model, "reader")?;
    let ask = "How do I install the lodash package?";
    let first = memory.recall(ask, WAIT).await;
    assert!(
        first.blocks.iter().any(|b| b.contains("never npm")),
        "{first:?}"
    );
    assert!(first.message.text().contains("never npm"));
    let mut messages = vec![first.message, Message::assistant("pnpm add lodash")];
    memory.after_turn(&messages[1..]).await;
    let second = memory.recall(ask, WAIT).await;
    assert!(second.is_empty(), "surfaced twice: {second:?}");
    messages.push(second.message);
    messages.push(Message::assistant("pnpm add lodash"));
    memory.after_turn(&messages[3..]).await;
    // A compaction resets what was surfaced: the rule may come back.
    let compacted = memory.compact(messages).await?;
    assert!(compacted.len() >= 2);
    let third = memory.recall(ask, WAIT).await;
    assert!(
        third.blocks.iter().any(|b| b.contains("never npm")),
        "{third:?}"
    );
    memory.shutdown(WAIT).await;
    Ok(())
}

/// A selector that never answers a question about lodash (it waits until its recall is
/// cancelled) and answers any other with every memory.
struct StuckOnLodash;

#[async_trait]
impl Selector for StuckOnLodash {
    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        if query.contains("lodash") {
            ctx.cancel.cancelled().await;
            return Ok(Vec::new());
        }
        Ok(headers.iter().map(|h| h.rel_path.clone()).collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_past_its_deadline_is_dropped_and_not_counted() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let setup = setup(home.path())?
        .extraction(false)
        .selector(Arc::new(StuckOnLodash));
    let model = Arc::new(ScriptedModel::new().rule(|_| Some(ScriptStep::text("Nothing to do."))));
    save_rule(&setup.open_session(model.clone(), "writer")?).await?;
    let memory = setup.open_session(model, "reader")?;
    let late = memory
        .recall("How do I install the lodash package?", Duration::ZERO)
        .await;
    assert!(late.is_empty(), "{late:?}");
    memory
        .after_turn(&[Message::assistant("npm install lodash")])
        .await;
    let next = memory.recall("And the react package?", WAIT).await;
    assert!(
        next.blocks.iter().any(|b| b.contains("never npm")),
        "{next:?}"
    );
    memory.shutdown(WAIT).await;
    Ok(())
}
