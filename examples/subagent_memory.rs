//! Sub-agents with memory: the main agent delegates to agents defined in markdown files, one of
//! which keeps its own memory across sessions.
//!
//! ```text
//! cargo run --example subagent_memory
//! ```
//!
//! The model is a `ScriptedModel`: its answers are canned (offline, no API key, deterministic)
//! and the example says so. Everything else is real: the definitions are read from a project dir
//! on disk, each sub-agent runs the agent loop with its own prompt and tools, the release
//! scribe writes its memory into `.memloop/agent-memory/release-scribe/` through the memory
//! store, and a second session's scribe finds it in its system prompt. The example checks what
//! it shows and exits non-zero if anything is off.
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result, ensure};
use memloop::MemorySetup;
use memloop::core::events::{AgentEvent, EventAgent, EventEnvelope, EventSink};
use memloop::core::message::ContentBlock;
use memloop::core::model::ModelRequest;
use memloop::core::{Agent, AgentConfig};
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::testkit::{ScriptStep, ScriptedModel};
use memloop::text::truncate_utf8;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const SCRIBE: &str = "---
name: release-scribe
description: Records release decisions and answers questions about past releases.
memory: project
---
You are the release scribe. Save every release decision you are told with memory_write, and
answer questions about releases from your memory.
";

const TRANSLATOR: &str = "---
name: 翻訳者
description: 英語の文を日本語に翻訳します。
tools: []
---
あなたは翻訳者です。訳文だけを返してください。
";

/// Prints every event with the agent it came from.
struct Printer;

impl EventSink for Printer {
    fn emit(&self, _event: AgentEvent) {}

    fn emit_envelope(&self, e: EventEnvelope) {
        let who = match &e.agent {
            EventAgent::Main => "main".to_owned(),
            EventAgent::SubAgent { name, depth, .. } => format!("{name} (depth {depth})"),
            EventAgent::Fork { purpose, .. } => format!("fork {purpose}"),
        };
        let line = match e.event {
            AgentEvent::SubAgentStarted { id, background, .. } => format!(
                "started {id}{}",
                if background { " in the background" } else { "" }
            ),
            AgentEvent::SubAgentFinished { end, turns, .. } => {
                format!("finished: {end} after {turns} model call(s)")
            }
            AgentEvent::ToolCallStarted { name, input, .. } => {
                format!("tool {name} {}", truncate_utf8(&input.to_string(), 100))
            }
            AgentEvent::ToolCallFinished {
                output, is_error, ..
            } => format!(
                "  → {}{}",
                if is_error { "ERROR " } else { "" },
                truncate_utf8(&output.replace('\n', " ⏎ "), 140)
            ),
            AgentEvent::AttachmentAdded { kind, bytes } => {
                format!("attached {kind} ({bytes} bytes)")
            }
            _ => return,
        };
        println!("  [{who}] {line}");
    }
}

/// The text of the tool result the request answers, if it answers one.
fn answered(req: &ModelRequest) -> Option<String> {
    req.messages.last()?.content.iter().find_map(|b| match b {
        ContentBlock::ToolResult { content, .. } => Some(content.text()),
        _ => None,
    })
}

/// Everything the model was shown.
fn seen(req: &ModelRequest) -> String {
    let mut all = req.system.join("\n");
    for m in &req.messages {
        all.push('\n');
        all.push_str(&m.text());
    }
    all
}

/// The scripted model of both sessions. Its answers depend on what it is really sent.
fn model() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("main", |req| {
            let user = req.messages.last()?.text();
            let first_call = |agent: &str, prompt: &str, background: bool| {
                ScriptStep::tool(
                    "agent",
                    json!({"agent": agent, "prompt": prompt, "background": background}),
                )
            };
            Some(match answered(req) {
                Some(result) if result.starts_with("Started agent") => {
                    ScriptStep::text("The translator is working on it in the background.")
                }
                Some(result) => ScriptStep::text(format!("(from the sub-agent) {result}")),
                None if user.contains("Background agent") => {
                    let translation = user.split("Its result:\n").nth(1).unwrap_or_default();
                    ScriptStep::text(format!(
                        "The translator answered: {}",
                        translation.lines().next().unwrap_or_default()
                    ))
                }
                None if user.starts_with("Record") => first_call(
                    "release-scribe",
                    "Record this decision: release 2.4 ships on Tuesday 3 March; freeze starts the Friday before.",
                    false,
                ),
                None if user.starts_with("Translate") => {
                    first_call("翻訳者", "Translate: the release ships on Tuesday.", true)
                }
                None if user.starts_with("Save") => first_call(
                    "翻訳者",
                    "Save this to your memory: releases ship on Tuesdays.",
                    false,
                ),
                None => first_call(
                    "release-scribe",
                    "When does release 2.4 ship, and when does the freeze start?",
                    false,
                ),
            })
        })
        .on_purpose("subagent:release-scribe", |req| {
            let task = req.messages.first()?.text();
            Some(match answered(req) {
                Some(_) if task.starts_with("Record") => {
                    ScriptStep::text("Recorded: release 2.4 ships Tuesday 3 March.")
                }
                Some(memory) => ScriptStep::text(format!(
                    "From my notes: {}",
                    memory
                        .lines()
                        .filter(|l| l.starts_with("Release") || l.starts_with("Code"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )),
                None if task.starts_with("Record") => ScriptStep::tool(
                    "memory_write",
                    json!({
                        "topic": "project_release_2_4",
                        "type": "project",
                        "name": "Release 2.4 date",
                        "description": "release 2.4 ships Tuesday 3 March; freeze the Friday before",
                        "content": "Release 2.4 ships on Tuesday 3 March.\nCode freeze starts the Friday before.",
                    }),
                ),
                // Session 2: the answer depends on what its memory section showed it.
                None if seen(req).contains("Release 2.4 date") => ScriptStep::tool(
                    "memory_read",
                    json!({"topic": "project_release_2_4"}),
                ),
                None => ScriptStep::text("I have no record of release 2.4."),
            })
        })
        .on_purpose("subagent:翻訳者", |req| {
            let task = req.messages.first()?.text();
            Some(match answered(req) {
                Some(error) => ScriptStep::text(format!("保存できません: {error}")),
                None if task.starts_with("Save") => ScriptStep::tool(
                    "memory_write",
                    json!({"topic": "feedback_days", "content": "Tuesdays."}),
                ),
                None => ScriptStep::text("リリースは火曜日に出荷されます。"),
            })
        })
        .on_purpose("extractor", |_| Some(ScriptStep::text("Nothing new to save.")))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::create_dir_all(path.parent().context("no parent")?)?;
    Ok(std::fs::write(path, text)?)
}

async fn session(
    memory: &MemorySetup,
    model: &ScriptedModel,
    project: &Path,
    turns: &[&str],
) -> Result<Vec<String>> {
    let builder = Agent::builder(Arc::new(model.clone()))
        .config(AgentConfig {
            cwd: project.to_path_buf(),
            ..AgentConfig::default()
        })
        .events(Arc::new(Printer));
    let mut agent = memory.attach(builder)?.build();
    let mut answers = Vec::new();
    for text in turns {
        println!("\nuser › {text}");
        let out = agent.run_turn(*text).await?;
        println!("assistant › {}", out.text);
        answers.push(out.text);
        ensure!(
            agent.drain(Duration::from_secs(30)).await.completed,
            "background work finished"
        );
    }
    Ok(answers)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    println!("This example uses a ScriptedModel: canned answers, offline and deterministic.");
    let tmp = tempfile::tempdir()?;
    let (home, project) = (tmp.path().join("home"), tmp.path().join("project"));
    write(&project.join(".memloop/agents/release-scribe.md"), SCRIBE)?;
    write(&project.join(".claude/agents/translator.md"), TRANSLATOR)?;
    write(
        &project.join(".claude/agents/broken.md"),
        "no frontmatter: skipped with a warning",
    )?;

    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.display().to_string())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(&project), env)?;
    let loaded = memory.load_agents();
    for d in &loaded.definitions {
        println!("agent definition › {} — {}", d.name, d.description);
    }
    for w in &loaded.warnings {
        println!("warning          › {w}");
    }
    let model = model();

    println!("\n━━━ session 1 ━━━");
    let answers = session(
        &memory,
        &model,
        &project,
        &[
            "Record the release date for 2.4 with the scribe.",
            "Translate the release note in the background.",
            "Anything back yet?",
            "Save the release day with the translator.",
        ],
    )
    .await?;
    ensure!(
        answers[3].contains("has no memory"),
        "the translator has no memory: {}",
        answers[3]
    );

    let scribe_dir = project.join(".memloop/agent-memory/release-scribe");
    println!("\nscribe's memory dir › {}", scribe_dir.display());
    for entry in std::fs::read_dir(&scribe_dir)?.flatten() {
        println!("  {}", entry.file_name().to_string_lossy());
    }
    let parent_dir = &memory.memory_dir().context("memory is on")?.dir;
    let parent_files = std::fs::read_dir(parent_dir)?
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .count();
    println!(
        "main agent's memory dir › {} ({parent_files} memory files)",
        parent_dir.display()
    );
    ensure!(
        scribe_dir.join("project_release_2_4.md").is_file(),
        "the scribe saved its memory"
    );
    ensure!(
        parent_files == 0,
        "the main agent's memory dir is untouched"
    );

    println!("\n━━━ session 2: a new agent; the scribe remembers ━━━");
    let answers = session(&memory, &model, &project, &["When does 2.4 ship?"]).await?;
    ensure!(answers.len() == 1, "one turn");
    ensure!(
        answers[0].contains("Tuesday 3 March"),
        "the scribe answered from its memory: {}",
        answers[0]
    );
    println!("\nok: the scribe kept its memory in its own scope, and found it in the next session");
    Ok(())
}
