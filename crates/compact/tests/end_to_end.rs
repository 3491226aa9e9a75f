//! End to end: a real `Agent` with the scripted model, a small context window, session memory
//! kept up to date in the background, and a mid-session compaction that uses the notes.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop_compact::{CompactConfig, Compactor, SessionMemoryCompactConfig};
use memloop_core::{
    Agent, AgentConfig,
    events::{AgentEvent, VecSink},
    invariants::check_invariants,
    message::{MessageKind, Role, Usage},
    model::ModelRequest,
    tokens::{CharEstimator, estimate_messages},
    tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec},
};
use memloop_session_notes::NotesEvent;
use memloop_session_notes::{
    EDIT_TOOL_NAME, FileSessionNotes, SessionMemory, SessionNotesConfig, SessionNotesHook,
    UpdateThresholds,
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

const WORKLOG_LINE: &str = "_Terse, chronological steps taken so far, one line each._";

/// Reads a file of the work dir (real I/O).
struct ReadFile(PathBuf);

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        let name = input["path"].as_str().unwrap_or_default();
        match tokio::fs::read_to_string(self.0.join(name)).await {
            Ok(t) => ToolOutput::ok(t),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

fn usage_for(req: &ModelRequest) -> Usage {
    let system: usize = req.system.iter().map(String::len).sum();
    Usage {
        input_tokens: estimate_messages(&CharEstimator, &req.messages) + system as u64 / 4,
        output_tokens: 20,
        ..Default::default()
    }
}

fn last_request(req: &ModelRequest) -> Option<String> {
    req.messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter().filter_map(|b| b.as_text()))
        .find(|t| t.starts_with("read "))
        .map(str::to_owned)
}

fn model() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("main", |req| {
            let last = req.messages.last()?;
            let step = if last.tool_result_ids().next().is_some() {
                ScriptStep::text("Read it; step done.")
            } else {
                let file = last_request(req)?.trim_start_matches("read ").to_owned();
                ScriptStep::tool("read_file", json!({"path": file}))
            };
            Some(step.with_usage(usage_for(req)))
        })
        .on_purpose("session_memory", |req| {
            let last = req.messages.last()?;
            let step = if last.tool_result_ids().next().is_some() {
                ScriptStep::text("notes updated")
            } else {
                let line = last_request(req).unwrap_or_else(|| "nothing".into());
                ScriptStep::tool(
                    EDIT_TOOL_NAME,
                    json!({"old_string": WORKLOG_LINE, "new_string": format!("{WORKLOG_LINE}\n- noted: {line}")}),
                )
            };
            Some(step.with_usage(usage_for(req)))
        })
}

#[tokio::test(start_paused = true)]
async fn the_agent_compacts_mid_session_with_its_notes_and_carries_on() {
    let dir = TempDir::new().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    for i in 0..20 {
        std::fs::write(
            work.join(format!("data_{i}.txt")),
            format!("file {i}: {}\n", "z".repeat(2_000)),
        )
        .unwrap();
    }
    let session_id = "e2e-session";
    let mut sm_cfg = SessionNotesConfig::new(dir.path().join("home/projects/p"));
    sm_cfg.thresholds = UpdateThresholds {
        init_tokens: 2_000,
        min_tokens_between_updates: 1_000,
        tool_calls_between_updates: 3,
    };
    let notes = Arc::new(FileSessionNotes::new(sm_cfg, session_id).unwrap());
    let hook = Arc::new(SessionNotesHook::new(notes.clone()));
    let mut cfg = CompactConfig::for_model(20_000, 2_000);
    cfg.autocompact_pct = Some(27.8); // auto-compact at 5,000 (27.8% of the 18,000 effective)
    cfg.session_memory = SessionMemoryCompactConfig {
        min_tokens: 1_000,
        min_text_messages: 3,
        max_tokens: 3_000,
        ..Default::default()
    };
    let compactor = Arc::new(Compactor::new(cfg).with_session_notes(notes.clone()));
    let model = model();
    let events = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .config(AgentConfig {
            session_id: session_id.into(),
            cwd: work.clone(),
            ..Default::default()
        })
        .tool(Arc::new(ReadFile(work.clone())))
        .hook(hook) // notes updates after sampling (background, FIFO); baselines reset after compaction
        .compactor(compactor)
        .events(Arc::new(events.clone()))
        .build();

    let mut compacted_at = None;
    for i in 0..12 {
        let out = agent.run_turn(&format!("read data_{i}.txt")).await.unwrap();
        assert_eq!(out.text, "Read it; step done.");
        assert!(check_invariants(agent.messages()).is_ok(), "turn {i}");
        assert!(agent.drain(Duration::from_secs(30)).await.completed);
        if compacted_at.is_none()
            && events
                .events()
                .iter()
                .any(|e| matches!(e, AgentEvent::Compacted { .. }))
        {
            compacted_at = Some(i);
        }
    }
    let compacted_at = compacted_at.expect("the session crossed the window and compacted");
    assert!(
        compacted_at >= 2,
        "compacted only once the conversation grew"
    );
    let all = events.events();
    let strategies: Vec<&str> = all
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compacted { strategy, .. } => Some(strategy.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        strategies.iter().all(|s| *s == "session_memory"),
        "{strategies:?}"
    );
    assert!(
        model.requests_for("compact_summary").is_empty(),
        "no LLM summary needed"
    );
    // Notes kept being updated after compaction (baselines were reset, not stalled).
    let first_compaction = all
        .iter()
        .position(|e| matches!(e, AgentEvent::Compacted { .. }))
        .unwrap();
    assert!(
        all[first_compaction..]
            .iter()
            .any(|e| matches!(e.extension(), Some(NotesEvent::NotesUpdated { .. })))
    );

    // The conversation now opens with the boundary and the notes as the summary.
    let msgs = agent.messages();
    let boundary = msgs
        .iter()
        .rposition(|m| m.meta.kind == MessageKind::CompactBoundary)
        .unwrap();
    let summary = &msgs[boundary + 1];
    assert_eq!(summary.meta.kind, MessageKind::CompactSummary);
    assert!(summary.text().contains("<session_notes>"));
    assert!(summary.text().contains("- noted: read data_"));
    // The model saw the notes in its requests after compaction, and the last turn is intact.
    let main = model.requests_for("main");
    assert!(
        main.last().unwrap().messages[0]
            .text()
            .contains("<session_notes>")
    );
    assert_eq!(
        last_request(main.last().unwrap()).as_deref(),
        Some("read data_11.txt")
    );
    assert!(agent.context_tokens() < 5_000 + 1_000);
    let on_disk = notes.current_notes().await.unwrap().unwrap();
    assert!(on_disk.contains("- noted: read data_"));
}
