//! memloop's memory in a loop of your own: no memloop `Agent`, only `MemorySession` (recall,
//! the memory tools, extraction after the turn, compaction with the session notes). Three
//! sessions: the user states a rule; a new session gets it recalled; a long session keeps it
//! through a compaction. Offline: the model is memloop's `ScriptedModel`, whose answers are
//! canned (the memory machinery is real: files on disk, BM25 recall, the forked writers).
//! Exits non-zero when a step fails.
//!
//! ```text
//! cargo run --example custom_loop
//! ```
#![allow(clippy::print_stdout)]

use anyhow::{Result, ensure};
use memloop::core::CancellationToken;
use memloop::core::message::{ContentBlock, Message, MessageKind, Role};
use memloop::core::model::{Model, ModelRequest};
use memloop::memory::paths::MemoryDirResolver;
use memloop::testkit::{ScriptStep, ScriptedModel};
use memloop::{MemorySession, MemorySetup, host::env::EnvVars};
use serde_json::json;
use std::{path::Path, sync::Arc, time::Duration};

/// The host's loop for one user turn: recall, then model ⇄ tools until the answer, then
/// `after_turn`. Returns the turn's messages.
pub async fn turn(memory: &MemorySession, model: &dyn Model, user: &str) -> Result<Vec<Message>> {
    let recalled = memory.recall(user, Duration::from_secs(5)).await;
    let system: Vec<String> = memory.system_prompt_section().await.into_iter().collect();
    let mut messages = vec![recalled.message];
    loop {
        let mut request = ModelRequest::new("main", messages.clone());
        (request.system, request.tools) = (system.clone(), memory.tools());
        let answer = model.complete(request, CancellationToken::new()).await?;
        messages.push(Message::new(Role::Assistant, answer.content));
        let mut results = Vec::new();
        for (id, name, input) in messages[messages.len() - 1].tool_uses() {
            let (text, failed) = match memory.call_tool(name, &input.to_string()).await {
                Ok(text) => (text, false),
                Err(e) => (e.to_string(), true),
            };
            results.push(ContentBlock::tool_result(id, text, failed));
        }
        if results.is_empty() {
            memory.after_turn(&messages).await;
            return Ok(messages);
        }
        messages.push(Message::new(Role::User, results));
    }
}

/// The scripted model: answers from what it is sent, and says it is scripted.
pub fn scripted() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("main", |req| {
            let seen = req.messages.iter().map(Message::text).collect::<String>();
            Some(ScriptStep::text(match seen.contains("pnpm") {
                true => "(scripted) Run `pnpm add lodash`: this project uses pnpm.",
                false => "(scripted) Run `npm install lodash`.",
            }))
        })
        .on_purpose("extractor", |req| {
            let done = req.messages.last().is_some_and(|m| m.tool_result_ids().next().is_some());
            let rule = req.messages.iter().any(|m| m.text().contains("For this repo"));
            Some(match (done, rule) {
                (false, true) => ScriptStep::tool("memory_write", json!({"topic": "feedback_package_manager",
                    "type": "feedback", "description": "install packages with pnpm, never npm",
                    "content": "Always use pnpm to install packages, never npm."})),
                _ => ScriptStep::text("(scripted) Nothing new."),
            })
        })
        .on_purpose("session_memory", |req| {
            let done = req.messages.last().is_some_and(|m| m.tool_result_ids().next().is_some());
            let line = "_What the user asked for, in their terms: goals, constraints, design choices and preferences they stated._";
            Some(match done {
                false => ScriptStep::tool("edit_session_notes", json!({"old_string": line,
                    "new_string": format!("{line}\nThe user's rule: always use pnpm, never npm.")})),
                true => ScriptStep::text("(scripted) Notes updated."),
            })
        })
        .rule(|_| Some(ScriptStep::text("(scripted) Nothing to do.")))
}

/// The three sessions over the project at `home`; an error names the step that failed.
pub async fn three_sessions(home: &Path) -> Result<()> {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_string_lossy())]);
    let setup = MemorySetup::with_resolver(MemoryDirResolver::new(home), env)?;
    let model = Arc::new(scripted());
    // Session 1: the user states a rule; extraction saves it after the turn.
    let one = setup.open_session(model.clone(), "session-1")?;
    turn(
        &one,
        model.as_ref(),
        "For this repo: always use pnpm, never npm.",
    )
    .await?;
    ensure!(
        one.shutdown(Duration::from_secs(60)).await.completed,
        "session 1: extraction did not finish"
    );
    let saved = setup
        .memory_dir()
        .map(|d| d.dir.join("feedback_package_manager.md"));
    ensure!(
        saved.is_some_and(|f| f.is_file()),
        "session 1: the rule was not saved"
    );
    println!("session 1: the rule was saved by extraction");
    // Session 2: recall surfaces the rule next to the user's message.
    let two = setup.open_session(model.clone(), "session-2")?;
    let answer = turn(&two, model.as_ref(), "How do I install the lodash package?").await?;
    ensure!(
        answer[0].text().contains("never npm"),
        "session 2: the rule was not recalled"
    );
    ensure!(
        answer.last().is_some_and(|m| m.text().contains("pnpm add")),
        "session 2: the answer ignored it"
    );
    two.shutdown(Duration::from_secs(60)).await;
    println!(
        "session 2: recalled next to the user's message: {}",
        answer[answer.len() - 1].text()
    );
    // Session 3: a long session; the rule survives its compaction in the session notes.
    let three = setup.open_session(model.clone(), "session-3")?;
    let mut messages = turn(
        &three,
        model.as_ref(),
        "How do I install the lodash package?",
    )
    .await?;
    let filler: Vec<Message> = (0..60)
        .map(|i| match i % 2 {
            0 => Message::user(format!(
                "Step {i}: {}",
                "run the build and read the log. ".repeat(120)
            )),
            _ => Message::assistant(format!(
                "Done with step {i}: {}",
                "the build passed. ".repeat(200)
            )),
        })
        .collect();
    three.after_turn(&filler).await;
    messages.extend(filler);
    three.flush(Duration::from_secs(60)).await;
    let compacted = three.compact(messages).await?;
    let summary = compacted
        .iter()
        .find(|m| m.meta.kind == MessageKind::CompactSummary);
    ensure!(
        summary.is_some_and(|m| m.text().contains("never npm")),
        "session 3: the rule did not survive compaction"
    );
    three.shutdown(Duration::from_secs(60)).await;
    println!(
        "session 3: compacted to {} messages; the notes summary keeps the rule",
        compacted.len()
    );
    Ok(())
}

#[allow(dead_code)] // the integration test includes this file for `three_sessions`
#[tokio::main]
async fn main() -> Result<()> {
    println!("custom_loop: a ScriptedModel stands in for the LLM (canned answers, offline)");
    let home = tempfile::tempdir()?;
    three_sessions(home.path()).await
}
