//! The memory forks of a coding agent wired by `MemorySetup` declare all of the agent's tools
//! (so their requests share its cached prefix), and their gates keep them to their job: the
//! extractor writes only memories, the notes updater edits only its notes with its own tool, and
//! the main agent cannot edit the notes at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::compact::CompactConfig;
use memloop::core::events::{AgentEvent, VecSink};
use memloop::core::message::{ContentBlock, Role};
use memloop::core::model::ModelRequest;
use memloop::core::{Agent, AgentConfig};
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::testkit::{ScriptStep, ScriptedModel};
use memloop::tools::{EditFile, ReadFile, Shell, WriteFile};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const TITLE_LINE: &str =
    "_A short, specific title for this session (five to ten words, no filler)._\n";

fn after_tools(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

#[tokio::test]
async fn memory_forks_inherit_a_coding_agents_tools_but_their_gates_keep_them_in_scope() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let outside = project.path().join("outside.md");
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env)
        .unwrap()
        .dream(false);
    let mut notes = memory.default_notes_config().unwrap();
    notes.thresholds.init_tokens = 0;
    let config = AgentConfig {
        cwd: project.path().to_path_buf(),
        ..AgentConfig::default()
    };
    let notes_path = notes.notes_path(&config.session_id);
    let memory = memory.compaction(CompactConfig::for_model(200_000, 8_192), notes);

    let path = notes_path.display().to_string();
    let out = outside.display().to_string();
    let model = ScriptedModel::new()
        .on_purpose("main", move |req| {
            Some(if after_tools(req) {
                ScriptStep::text("Noted: releases are on the first Monday.")
            } else {
                ScriptStep::tool(
                    "edit_session_notes",
                    json!({"old_string": TITLE_LINE, "new_string": format!("{TITLE_LINE}MAIN WAS HERE\n")}),
                )
            })
        })
        .on_purpose("session_memory", move |req| {
            Some(if after_tools(req) {
                ScriptStep::text("updated")
            } else {
                ScriptStep::tools(vec![
                    (
                        "edit_file".into(),
                        json!({"path": path, "old_string": TITLE_LINE, "new_string": "gone\n"}),
                    ),
                    ("shell".into(), json!({"command": "ls"})),
                    (
                        "edit_session_notes".into(),
                        json!({"old_string": TITLE_LINE, "new_string": format!("{TITLE_LINE}Release schedule\n")}),
                    ),
                ])
            })
        })
        .on_purpose("extractor", move |req| {
            Some(if after_tools(req) {
                ScriptStep::text("saved")
            } else {
                ScriptStep::tools(vec![
                    (
                        "write_file".into(),
                        json!({"path": out, "content": "escaped"}),
                    ),
                    ("shell".into(), json!({"command": format!("touch {out}")})),
                    (
                        "edit_session_notes".into(),
                        json!({"old_string": TITLE_LINE, "new_string": "EXTRACTOR\n"}),
                    ),
                    (
                        "memory_write".into(),
                        json!({"topic": "project_release_day", "type": "project",
                               "name": "Release day", "description": "releases ship on the first Monday of each month",
                               "content": "First Monday of each month."}),
                    ),
                ])
            })
        });
    let events = VecSink::default();
    let builder = Agent::builder(Arc::new(model.clone()))
        .config(config)
        .events(Arc::new(events.clone()))
        .tool(Arc::new(ReadFile::default()))
        .tool(Arc::new(WriteFile))
        .tool(Arc::new(EditFile))
        .tool(Arc::new(Shell::default()));
    let mut agent = memory.attach(builder).unwrap().build();
    agent
        .run_turn("We release on the first Monday of each month.")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(30)).await.completed);

    // Every fork declared the agent's tools.
    let main_tools = &model.requests_for("main")[0].tools;
    for purpose in ["extractor", "session_memory"] {
        let reqs = model.requests_for(purpose);
        assert!(!reqs.is_empty(), "{purpose} ran");
        assert!(reqs.iter().all(|r| &r.tools == main_tools), "{purpose}");
    }
    // The main agent's notes edit was refused by the tool itself.
    let refused = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content.text(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(refused.1 && refused.0.contains("reserved"), "{refused:?}");
    // The notes changed only through the updater's own tool.
    let notes = std::fs::read_to_string(&notes_path).unwrap();
    assert!(notes.contains("Release schedule"), "{notes}");
    assert!(notes.contains(TITLE_LINE));
    for stray in ["MAIN WAS HERE", "EXTRACTOR", "gone"] {
        assert!(!notes.contains(stray), "{stray} in {notes}");
    }
    // Nothing escaped; the memory was saved through the store.
    assert!(!outside.exists());
    let store = memory.store().unwrap();
    let saved = store.scan().await.unwrap();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].rel_path, "project_release_day.md");
    let mut denied: Vec<String> = events
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::ToolDenied { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    denied.sort();
    // Per notes update: edit_file and shell; the extractor: write_file, shell, the notes tool.
    let updates = model.requests_for("session_memory").len() / 2;
    let mut expected = vec!["edit_session_notes", "shell", "write_file"];
    for _ in 0..updates {
        expected.extend(["edit_file", "shell"]);
    }
    expected.sort();
    assert_eq!(denied, expected);
}
