//! A session resumed from its transcript: session 1 saves a memory and recall surfaces it in a
//! later turn; the process "exits"; session 1 is resumed from `<project dir>/<session id>.jsonl`
//! with a fresh agent, which continues the transcript, keeps recall from surfacing the same memory
//! again, and can search past sessions.
//!
//! The model is a `ScriptedModel` (offline, deterministic); everything else is real.
//!
//! ```text
//! cargo run --example resumed_session
//! ```
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result};
use memloop::MemorySetup;
use memloop::core::{Agent, AgentConfig};
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;

fn model() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing new")))
        .on_purpose("dream", |_| Some(ScriptStep::text("nothing to do")))
}

#[tokio::main]
async fn main() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project)?;
    let env = EnvVars::from_process().with("MEMLOOP_HOME", tmp.path().display().to_string());
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(&project), env)?;
    let config = AgentConfig {
        session_id: "7d1c2f00-resume-demo".into(),
        cwd: project.clone(),
        ..AgentConfig::default()
    };

    // Session 1: the model saves a memory, then answers.
    let m = model()
        .then(ScriptStep::tool(
            "memory_write",
            serde_json::json!({
                "topic": "project_release_freeze",
                "content": "No deploys on Fridays after 2pm: the release freeze.",
                "name": "Release freeze",
                "description": "no Friday deploys after 2pm",
                "type": "project",
                "mode": "overwrite"
            }),
        ))
        .then(ScriptStep::text("Noted: no Friday deploys after 2pm."));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(m)).config(config.clone()))?
        .build();
    agent
        .run_turn("Remember: we never deploy on Fridays after 2pm.")
        .await?;
    agent.drain_default().await;
    println!(
        "session 1: {} messages in the conversation",
        agent.messages().len()
    );
    drop(agent); // the process could exit here

    // Resume session 1 from its transcript.
    let dir = memory
        .transcript_dir()
        .context("transcripts are on by default")?;
    println!("transcript: {}", dir.path_of(&config.session_id)?.display());
    let history = memory.resume(&config.session_id)?;
    println!("resumed with {} messages", history.len());
    let m = model().then(ScriptStep::text(
        "Per the release freeze, Friday after 2pm is out; Thursday works.",
    ));
    let mut agent = memory
        .attach(
            Agent::builder(Arc::new(m))
                .config(config.clone())
                .messages(history),
        )?
        .build();
    let out = agent
        .run_turn("Can we ship the release on Friday at 4pm?")
        .await?;
    agent.drain_default().await;
    println!("assistant › {}", out.text);

    let t = dir.load(&config.session_id)?;
    println!(
        "the transcript now holds {} messages (each written once) and the conversation {}",
        t.message_records().len(),
        agent.messages().len()
    );
    let hits = dir.search("friday deploys", &Default::default())?;
    println!(
        "`friday deploys` in past sessions: {} message(s)",
        hits.len()
    );
    Ok(())
}
