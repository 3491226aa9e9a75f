//! The agent as a host drives it: streamed deltas, origins on every event, one terminal event
//! per turn, stop reasons, repaired replies, tool concurrency/timeouts/caps, request options,
//! rich user messages, cancellation rollback, and the bounded channel sink.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop_core::events::{AgentEvent, ChannelSink, EventAgent, EventSink, ScopedSink, VecSink};
use memloop_core::fork::ForkedAgentBuilder;
use memloop_core::message::{ContentBlock, MediaSource, Message, Role, ToolResultContent, Usage};
use memloop_core::model::{ModelError, ModelResponse, RequestOptions, StopReason, ToolChoice};
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_core::{Agent, AgentConfig, AgentError, CancellationToken, HookContext};
use memloop_testkit::{ScriptStep, ScriptedModel, hook_context};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        ..Usage::default()
    }
}

fn agent(model: ScriptedModel, sink: &VecSink) -> memloop_core::AgentBuilder {
    Agent::builder(Arc::new(model)).events(Arc::new(sink.clone()))
}

#[tokio::test]
async fn text_streams_as_deltas_and_the_turn_ends_with_one_terminal_event() {
    let model = ScriptedModel::new()
        .then(ScriptStep::text("Streaming works, ünïcode too.").with_usage(usage(100, 12)))
        .chunked(4);
    let sink = VecSink::default();
    let mut agent = agent(model, &sink).build();
    let out = agent.run_turn("hi").await.unwrap();
    assert_eq!(out.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(out.usage, usage(100, 12));
    let envs = sink.envelopes();
    assert!(
        envs.iter()
            .all(|e| e.agent == EventAgent::Main && e.turn == 1)
    );
    let deltas: Vec<String> = envs
        .iter()
        .filter_map(|e| match &e.event {
            AgentEvent::TextDelta { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 8);
    assert_eq!(deltas.concat(), "Streaming works, ünïcode too.");
    // Deltas come before the full text, and the terminal event is last and unique.
    let pos = |f: &dyn Fn(&AgentEvent) -> bool| envs.iter().position(|e| f(&e.event)).unwrap();
    assert!(
        pos(&|e| matches!(e, AgentEvent::TextDelta { .. }))
            < pos(&|e| matches!(e, AgentEvent::AssistantText { .. }))
    );
    assert_eq!(envs.iter().filter(|e| e.event.is_terminal()).count(), 1);
    assert_eq!(
        envs.last().unwrap().event,
        AgentEvent::TurnFinished {
            turn: 1,
            iterations: 1,
            stop_reason: Some(StopReason::EndTurn),
            usage: usage(100, 12)
        }
    );
}

#[tokio::test]
async fn an_empty_reply_is_repaired_and_the_session_continues() {
    let model = ScriptedModel::new()
        .then(ScriptStep::Respond(ModelResponse::from_blocks(vec![])))
        .then(ScriptStep::Respond(ModelResponse::from_blocks(vec![
            ContentBlock::text(""),
        ])))
        .then(ScriptStep::text("Back on track."));
    let sink = VecSink::default();
    let mut agent = agent(model, &sink).build();
    let first = agent.run_turn("one").await.unwrap();
    assert_eq!(first.text, "");
    let second = agent.run_turn("two").await.unwrap();
    assert_eq!(second.text, "");
    let third = agent
        .run_turn("three")
        .await
        .expect("the session is not broken");
    assert_eq!(third.text, "Back on track.");
    assert!(agent.messages().iter().all(|m| !m.content.is_empty()));
    let repaired = sink
        .events()
        .into_iter()
        .filter(|e| matches!(e, AgentEvent::ResponseRepaired { .. }))
        .count();
    assert_eq!(repaired, 2);
}

struct Counter(AtomicU32, ToolEffect, &'static str);

#[async_trait]
impl Tool for Counter {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.2.into(),
            description: "counts".into(),
            input_schema: json!({"type": "object"}),
            effect: self.1,
        }
    }
    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.0.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok(format!("ran {input}"))
    }
}

#[tokio::test]
async fn a_tool_call_cut_by_max_tokens_is_not_executed_and_the_stop_is_visible() {
    let mut cut = ModelResponse::from_blocks(vec![
        ContentBlock::text("I'll write the file now"),
        ContentBlock::tool_use("toolu_1", "write", json!("{\"path\": \"a.t")),
    ]);
    cut.stop_reason = StopReason::MaxTokens;
    let tool = Arc::new(Counter(AtomicU32::new(0), ToolEffect::WritesFiles, "write"));
    let sink = VecSink::default();
    let mut agent = agent(ScriptedModel::new().then(ScriptStep::Respond(cut)), &sink)
        .tool(tool.clone())
        .build();
    let out = agent.run_turn("write a.txt").await.unwrap();
    assert_eq!(out.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!(out.text, "I'll write the file now");
    assert_eq!(tool.0.load(Ordering::SeqCst), 0);
    assert!(!agent.messages().last().unwrap().has_tool_use());
    assert!(sink.events().iter().any(
        |e| matches!(e, AgentEvent::ResponseRepaired { action } if action.contains("max_tokens"))
    ));
}

#[tokio::test]
async fn refusal_is_visible_to_the_host() {
    let mut r = ModelResponse::text("I can't help with that.");
    r.stop_reason = StopReason::Refusal;
    let sink = VecSink::default();
    let mut agent = agent(ScriptedModel::new().then(ScriptStep::Respond(r)), &sink).build();
    assert_eq!(
        agent.run_turn("x").await.unwrap().stop_reason,
        Some(StopReason::Refusal)
    );
}

#[tokio::test]
async fn a_failed_turn_ends_with_turn_failed() {
    let model = ScriptedModel::new().then(ScriptStep::Fail(ModelError::Auth("bad key".into())));
    let sink = VecSink::default();
    let mut agent = agent(model, &sink).build();
    assert!(agent.run_turn("hi").await.is_err());
    let events = sink.events();
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
    assert!(
        matches!(events.last(), Some(AgentEvent::TurnFailed { turn: 1, error }) if error.contains("bad key"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_turn_ends_with_turn_cancelled_and_can_be_rolled_back() {
    let model = ScriptedModel::new()
        .then(ScriptStep::text("first"))
        .then(ScriptStep::Delay(
            Duration::from_secs(60),
            Box::new(ScriptStep::text("late")),
        ));
    let sink = VecSink::default();
    let mut agent = agent(model, &sink).build();
    agent.run_turn("keep me").await.unwrap();
    let before = agent.messages().to_vec();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        trigger.cancel();
    });
    let err = agent
        .run_turn_with_cancel("drop me", cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::Cancelled));
    assert_eq!(
        sink.events().last(),
        Some(&AgentEvent::TurnCancelled { turn: 2 })
    );
    assert_eq!(agent.messages().len(), before.len() + 1);
    assert!(agent.rollback_cancelled_turn());
    assert_eq!(agent.messages(), &before[..]);
    assert!(!agent.rollback_cancelled_turn(), "only once");
}

#[tokio::test]
async fn fork_events_carry_the_fork_and_the_parent_turn() {
    let model = ScriptedModel::new()
        .then(ScriptStep::text("noted"))
        .chunked(2);
    let sink = VecSink::default();
    let base = HookContext {
        session_id: "s".into(),
        events: Arc::new(ScopedSink::main(Arc::new(sink.clone()), 7)),
        ..hook_context(
            Arc::new(model.clone()),
            vec![Message::user("hi"), Message::assistant("hello")],
        )
    };
    let opts = RequestOptions {
        temperature: Some(0.0),
        stop_sequences: vec!["</notes>".into()],
        ..Default::default()
    };
    let fork = ForkedAgentBuilder::new(base, "notes")
        .request_options(opts)
        .build();
    let id = fork.id().to_owned();
    fork.run("Summarise.").await.unwrap();
    let envs = sink.envelopes();
    assert!(!envs.is_empty());
    for e in &envs {
        assert_eq!(
            e.agent,
            EventAgent::Fork {
                purpose: "notes".into(),
                id: id.clone()
            }
        );
        assert_eq!(e.turn, 7);
    }
    assert!(
        envs.iter()
            .any(|e| matches!(&e.event, AgentEvent::TextDelta { text, .. } if text == "no"))
    );
    let req = &model.requests()[0];
    assert_eq!(req.temperature, Some(0.0));
    assert_eq!(req.stop_sequences, vec!["</notes>".to_owned()]);
}

#[tokio::test]
async fn request_options_of_the_agent_reach_the_model() {
    let model = ScriptedModel::new().then(ScriptStep::text("ok"));
    let mut extra = serde_json::Map::new();
    extra.insert("top_p".into(), json!(0.9));
    let config = AgentConfig {
        request: RequestOptions {
            temperature: Some(0.3),
            tool_choice: Some(ToolChoice::Tool("grep".into())),
            stop_sequences: vec!["STOP".into()],
            extra,
        },
        ..AgentConfig::default()
    };
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .config(config)
        .build();
    agent.run_turn("hi").await.unwrap();
    let req = &model.requests()[0];
    assert_eq!(req.temperature, Some(0.3));
    assert_eq!(req.tool_choice, Some(ToolChoice::Tool("grep".into())));
    assert_eq!(req.extra["top_p"], json!(0.9));
}

#[tokio::test]
async fn run_turn_accepts_a_message_with_an_image() {
    let model = ScriptedModel::new().then(ScriptStep::text("a cat"));
    let mut agent = Agent::builder(Arc::new(model.clone())).build();
    let png = MediaSource::Base64 {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let msg = Message::new(
        Role::Assistant, // corrected to user by run_turn
        vec![
            ContentBlock::text("what is this?"),
            ContentBlock::Image {
                source: png.clone(),
            },
        ],
    );
    agent.run_turn(msg).await.unwrap();
    let sent = &model.requests()[0].messages[0];
    assert_eq!(sent.role, Role::User);
    assert_eq!(sent.content[1], ContentBlock::Image { source: png });
}

/// Read-only tool that waits on a barrier: two of them finish only if they run at once.
struct Rendezvous(Arc<tokio::sync::Barrier>, &'static str);

#[async_trait]
impl Tool for Rendezvous {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.1.into(),
            description: "waits".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.0.wait().await;
        ToolOutput::ok(format!("{} done", self.1))
    }
}

#[tokio::test(start_paused = true)]
async fn read_only_tools_run_concurrently_and_results_keep_call_order() {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let model = ScriptedModel::new()
        .then(ScriptStep::tools(vec![
            ("first".into(), json!({})),
            ("second".into(), json!({})),
        ]))
        .then(ScriptStep::text("both ran"));
    let mut agent = Agent::builder(Arc::new(model))
        .tool(Arc::new(Rendezvous(barrier.clone(), "first")))
        .tool(Arc::new(Rendezvous(barrier, "second")))
        .build();
    // Run one after the other, the first call would wait on the barrier forever: the paused
    // clock then jumps to this timeout and the test fails instead of hanging.
    let out = tokio::time::timeout(Duration::from_secs(5), agent.run_turn("go"))
        .await
        .expect("the read-only calls ran concurrently")
        .unwrap();
    assert_eq!(out.text, "both ran");
    let results: Vec<String> = agent.messages()[2]
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::ToolResult { content, .. } => content.text(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(results, vec!["first done", "second done"]);
}

struct Sleepy;

#[async_trait]
impl Tool for Sleepy {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "sleepy".into(),
            description: "hangs".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::Other,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        ToolOutput::ok("never")
    }
}

struct Loud;

#[async_trait]
impl Tool for Loud {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "loud".into(),
            description: "prints a lot, with a picture".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        ToolOutput::ok("é".repeat(5_000)).with_media(ContentBlock::Image {
            source: MediaSource::Url {
                url: "https://example.invalid/p.png".into(),
            },
        })
    }
}

#[tokio::test(start_paused = true)]
async fn tool_calls_time_out_and_outputs_are_capped() {
    let model = ScriptedModel::new()
        .then(ScriptStep::tools(vec![
            ("sleepy".into(), json!({})),
            ("loud".into(), json!({})),
        ]))
        .then(ScriptStep::text("done"));
    let config = AgentConfig {
        tool_timeout: Duration::from_secs(5),
        max_tool_output_bytes: 101,
        ..AgentConfig::default()
    };
    let mut agent = Agent::builder(Arc::new(model))
        .config(config)
        .tool(Arc::new(Sleepy))
        .tool(Arc::new(Loud))
        .build();
    agent.run_turn("go").await.unwrap();
    let results = &agent.messages()[2].content;
    match &results[0] {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            assert!(*is_error);
            assert!(
                content.text().contains("timed out after 5 s"),
                "{}",
                content.text()
            );
        }
        other => panic!("{other:?}"),
    }
    match &results[1] {
        ContentBlock::ToolResult {
            content: ToolResultContent::Blocks(blocks),
            is_error: false,
            ..
        } => {
            let text = blocks[0].as_text().unwrap();
            // Cut in the middle at character boundaries: 25 two-byte characters at each end.
            assert!(text.starts_with(&"é".repeat(25)), "{text}");
            assert!(text.ends_with(&"é".repeat(25)), "{text}");
            assert!(
                text.contains("[... 4,950 characters elided from the middle ...]"),
                "{text}"
            );
            assert!(matches!(blocks[1], ContentBlock::Image { .. }));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn channel_sink_merges_deltas_when_full_and_never_drops_control_events() {
    let (sink, mut rx) = ChannelSink::bounded(2);
    let scoped = ScopedSink::main(Arc::new(sink), 1);
    scoped.emit(AgentEvent::TurnStarted { turn: 1 });
    for piece in ["a", "b", "c", "d"] {
        scoped.emit(AgentEvent::TextDelta {
            index: 0,
            text: piece.into(),
        });
    }
    scoped.emit(AgentEvent::ThinkingDelta {
        index: 1,
        thinking: "dropped".into(),
    });
    scoped.emit(AgentEvent::TurnCancelled { turn: 1 });
    drop(scoped);
    let mut got = Vec::new();
    while let Some(e) = rx.recv().await {
        assert_eq!((e.agent.clone(), e.turn), (EventAgent::Main, 1));
        got.push(e.event);
    }
    assert_eq!(
        got,
        vec![
            AgentEvent::TurnStarted { turn: 1 },
            AgentEvent::TextDelta {
                index: 0,
                text: "abcd".into()
            },
            AgentEvent::TurnCancelled { turn: 1 },
        ]
    );
    assert_eq!(rx.dropped_deltas(), 1);
}

/// A model written before streaming existed: only `complete`.
struct CompleteOnly;

#[async_trait]
impl memloop_core::model::Model for CompleteOnly {
    fn name(&self) -> &str {
        "complete-only"
    }
    async fn complete(
        &self,
        _request: memloop_core::model::ModelRequest,
        _cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse::text("whole answer").with_usage(usage(3, 2)))
    }
}

#[tokio::test]
async fn a_complete_only_model_streams_through_the_default_bridge() {
    let sink = VecSink::default();
    let mut agent = Agent::builder(Arc::new(CompleteOnly))
        .events(Arc::new(sink.clone()))
        .build();
    let out = agent.run_turn("hi").await.unwrap();
    assert_eq!(out.text, "whole answer");
    assert_eq!(out.usage, usage(3, 2));
    assert!(sink.events().contains(&AgentEvent::TextDelta {
        index: 0,
        text: "whole answer".into()
    }));
}
