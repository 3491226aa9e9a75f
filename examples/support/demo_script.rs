//! The demo's scripted model: canned answers, computed from what the agent actually sends, so the
//! output shows what the real memory machinery did (e.g. whether a recalled memory reached the
//! model). This is a script, not intelligence, and the demo says so.

use memloop::core::model::ModelRequest;
use memloop::memory::extract::EXTRACTOR_PURPOSE;
use memloop::memory::session_notes::EDIT_TOOL_NAME;
use memloop::testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::time::Duration;

pub const S1_DEADLINE: &str = "Remember this: the payments API is frozen from 2026-12-01 for the PCI audit, so no schema changes after that.";
pub const S1_PREFERENCE: &str = "For this project, integration tests must run against a real Postgres, never mocks: \
     mocks hid a broken migration last quarter.";
pub const S2_QUESTION: &str =
    "Write an integration test for the refund handler in the payments service.";
pub const S3_FILES: [&str; 6] = [
    "crates/harness-core/src/agent.rs",
    "crates/harness-core/src/fork.rs",
    "crates/harness-core/src/tokens.rs",
    "crates/store/src/lib.rs",
    "crates/harness-core/src/invariants.rs",
    "crates/store/src/manifest.rs",
];

/// The italic instruction line under the Worklog header of the notes template.
const WORKLOG_LINE: &str = "_Terse, chronological steps taken so far, one line each._";

fn after_tool_result(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

fn conversation_text(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.text())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An extractor that has nothing to add (sessions 2 and 3).
fn quiet_extractor(model: ScriptedModel) -> ScriptedModel {
    model.on_purpose(EXTRACTOR_PURPOSE, |_| {
        Some(ScriptStep::text("Nothing new worth remembering."))
    })
}

/// Session 1: the main agent saves the deadline itself; the extractor saves the preference.
pub fn session_one() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("main", |req| {
            let user = req.last_user_text().unwrap_or_default();
            Some(if after_tool_result(req) {
                ScriptStep::text("Saved: I will keep the payments freeze in mind.")
            } else if user.contains("frozen") {
                ScriptStep::tool(
                    "memory_write",
                    json!({
                        "topic": "project_payments_freeze",
                        "type": "project",
                        "name": "Payments API freeze",
                        "description": "payments API frozen from 2026-12-01 for the PCI audit: no schema changes",
                        "content": "No schema changes to the payments API from 2026-12-01.\n\
                                    **Why:** the PCI audit starts then.\n\
                                    **How to apply:** land payment migrations before that date.",
                    }),
                )
            } else {
                ScriptStep::text("Understood: integration tests will run against a real Postgres.")
            })
        })
        .on_purpose(EXTRACTOR_PURPOSE, |req| {
            Some(if after_tool_result(req) {
                ScriptStep::text("Saved the testing preference.")
            } else {
                ScriptStep::tool(
                    "memory_write",
                    json!({
                        "topic": "feedback_integration_tests",
                        "type": "feedback",
                        "name": "Integration tests use a real database",
                        "description": "integration tests must hit a real Postgres, never mocks",
                        "content": "Integration tests run against a real Postgres; never mock the database.\n\
                                    **Why:** mocks hid a broken migration last quarter.\n\
                                    **How to apply:** any test touching persistence, including payments.",
                    }),
                )
            })
        })
}

/// A real model takes a while to answer; recall runs in the background meanwhile and is attached
/// at the first check after it settles. The script waits this long per answer to show that.
const SIMULATED_LATENCY: Duration = Duration::from_millis(300);

/// Session 2: the answer depends on whether recall put the memories in front of the model.
pub fn session_two() -> ScriptedModel {
    quiet_extractor(ScriptedModel::new().on_purpose("main", |req| {
        let step = if after_tool_result(req) {
            let seen = conversation_text(req);
            let indexed = req
                .system
                .iter()
                .flat_map(|s| s.lines())
                .filter(|l| l.starts_with("- [") && l.contains("]("))
                .count();
            let mut answer = format!("(My system prompt lists {indexed} memories from MEMORY.md.) Plan for the refund handler test:");
            if seen.contains("real Postgres") {
                answer.push_str(
                    " it runs against a real Postgres (your rule: never mock the database)",
                );
            } else {
                answer.push_str(" (no memory about how you want tests written reached me)");
            }
            if seen.contains("2026-12-01") {
                answer.push_str(
                    ", and any schema change lands before the 2026-12-01 payments freeze.",
                );
            }
            ScriptStep::text(answer)
        } else {
            ScriptStep::tool("read_file", json!({"path": "Cargo.toml", "limit": 20}))
        };
        Some(ScriptStep::Delay(SIMULATED_LATENCY, Box::new(step)))
    }))
}

/// Session 3: reads files one per turn; the notes updater logs each step in the Worklog.
pub fn session_three() -> ScriptedModel {
    let model = ScriptedModel::new()
        .on_purpose("main", |req| {
            let user = req.last_user_text().unwrap_or_default();
            let file = user.split_whitespace().nth(1).unwrap_or("Cargo.toml").to_owned();
            Some(if after_tool_result(req) {
                ScriptStep::text(format!("{file}: read; it is part of the harness."))
            } else {
                ScriptStep::tool("read_file", json!({"path": file}))
            })
        })
        .on_purpose("session_memory", |req| {
            Some(if after_tool_result(req) {
                ScriptStep::text("Notes updated.")
            } else {
                let step = req
                    .messages
                    .iter()
                    .rev()
                    .find_map(|m| m.text().lines().find(|l| l.starts_with("read ")).map(str::to_owned))
                    .unwrap_or_else(|| "started".into());
                ScriptStep::tool(
                    EDIT_TOOL_NAME,
                    json!({"old_string": WORKLOG_LINE, "new_string": format!("{WORKLOG_LINE}\n- {step}")}),
                )
            })
        })
        .on_purpose("compact_summary", |_| Some(ScriptStep::text("Summary: the user is touring the harness sources.")));
    quiet_extractor(model)
}
