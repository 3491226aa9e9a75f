//! Tool-result clearing: old results lose their content, the pairs stay, the count drops, an
//! event says so, and the compactor sees the cleared conversation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop_core::clearing::{ToolResultClearing, clear_old_tool_results};
use memloop_core::compaction::{CompactionOutcome, CompactionTrigger, ContextCompactor};
use memloop_core::events::{AgentEvent, VecSink};
use memloop_core::invariants::check_invariants;
use memloop_core::message::{ContentBlock, Message, Role, Usage};
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_core::window::ContextWindow;
use memloop_core::{Agent, AgentConfig, HookContext};
use memloop_testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::sync::{Arc, Mutex};

struct Big;

#[async_trait]
impl Tool for Big {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "big".into(),
            description: "A large output".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        ToolOutput::ok("y".repeat(4_000))
    }
}

/// Records the token count it is offered and never compacts.
struct Recorder(Arc<Mutex<Vec<u64>>>);

#[async_trait]
impl ContextCompactor for Recorder {
    async fn maybe_compact(
        &self,
        ctx: &HookContext,
        _trigger: CompactionTrigger,
    ) -> Result<Option<CompactionOutcome>, memloop_core::compaction::CompactionError> {
        self.0.lock().unwrap().push(ctx.context_tokens);
        Ok(None)
    }
}

fn result_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => Some(content.text()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn old_results_are_cleared_before_compaction_is_considered() {
    let model = ScriptedModel::new()
        .then(ScriptStep::tool("big", json!({})))
        .then(ScriptStep::tool("big", json!({})))
        .then(ScriptStep::tool("big", json!({})))
        .then(ScriptStep::text("done"));
    let sink = VecSink::default();
    let offered = Arc::new(Mutex::new(Vec::new()));
    let clearing = ToolResultClearing {
        trigger_ratio: 0.5,
        keep_recent: 1,
        placeholder: "[cleared]".into(),
    };
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .config(AgentConfig {
            tool_result_clearing: Some(clearing.clone()),
            ..AgentConfig::default()
        })
        .tool(Arc::new(Big))
        .compactor(Arc::new(Recorder(offered.clone())))
        .context_window(ContextWindow::new(3_000))
        .events(Arc::new(sink.clone()))
        .build();
    agent.run_turn("go").await.unwrap();

    // Before the third and fourth requests the conversation was over 1,500 tokens: cleared.
    let cleared: Vec<(usize, u64, u64)> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResultsCleared {
                cleared,
                tokens_before,
                tokens_after,
            } => Some((cleared, tokens_before, tokens_after)),
            _ => None,
        })
        .collect();
    assert_eq!(cleared.len(), 2, "{cleared:?}");
    assert_eq!(cleared.iter().map(|c| c.0).sum::<usize>(), 2);
    for (_, before, after) in &cleared {
        assert!(before > &1_500 && after < before, "{before} → {after}");
    }
    // The compactor was offered the cleared count, never one above the trigger.
    let offered = offered.lock().unwrap().clone();
    assert_eq!(offered.len(), 4);
    assert!(offered.iter().all(|&t| t <= 1_500), "{offered:?}");
    // The pairs stay; only the newest result keeps its content.
    let messages = agent.messages().to_vec();
    assert!(check_invariants(&messages).is_ok());
    assert_eq!(
        result_texts(&messages),
        vec![
            "[cleared]".to_string(),
            "[cleared]".into(),
            "y".repeat(4_000)
        ]
    );
    let last = model.requests_for("main").pop().unwrap();
    assert_eq!(
        result_texts(&last.messages)[..2],
        ["[cleared]", "[cleared]"]
    );
}

#[test]
fn clearing_keeps_ids_and_flags_and_drops_stale_usage() {
    let usage = Usage {
        input_tokens: 9_000,
        ..Usage::default()
    };
    let mut msgs = vec![Message::user("q")];
    for i in 0..4 {
        let mut call = Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use(format!("t{i}"), "big", json!({}))],
        );
        call.usage = Some(usage);
        msgs.push(call);
        msgs.push(Message::new(
            Role::User,
            vec![ContentBlock::tool_result(
                format!("t{i}"),
                "z".repeat(500),
                i == 1,
            )],
        ));
    }
    let report = clear_old_tool_results(&mut msgs, 2, "[cleared]");
    assert_eq!(report.cleared, 2);
    assert_eq!(report.first_changed, Some(2));
    // The usage recorded before the first cleared result is still true; later ones are not.
    assert!(msgs[1].usage.is_some());
    assert!(msgs[3..].iter().all(|m| m.usage.is_none()));
    let ContentBlock::ToolResult {
        tool_use_id,
        is_error,
        ..
    } = &msgs[4].content[0]
    else {
        panic!("not a result");
    };
    assert_eq!((tool_use_id.as_str(), *is_error), ("t1", true));
    assert!(check_invariants(&msgs).is_ok());
    // Clearing again changes nothing and counts nothing.
    assert_eq!(clear_old_tool_results(&mut msgs, 2, "[cleared]").cleared, 0);
    // Keeping more results than exist clears nothing.
    assert_eq!(
        clear_old_tool_results(&mut msgs, 10, "[cleared]").cleared,
        0
    );
}
