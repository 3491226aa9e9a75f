//! `WaitForRecall` returns when recall surfaced memories, not on any other event, and answers
//! with an error once its bound has passed (a paused clock: no test waits for real).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::events::{AgentEvent, EventSink};
use memloop_core::tool::Tool;
use memloop_recall::RecallEvent;
use memloop_testkit::WaitForRecall;
use memloop_testkit::tool_context;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn it_returns_once_memories_are_surfaced_and_fails_after_its_bound_otherwise() {
    let wait = Arc::new(WaitForRecall::within(Duration::from_secs(5)));
    assert_eq!(wait.spec().name, WaitForRecall::NAME);

    // Another recall event does not wake it: the bound passes and the call is an error.
    wait.emit(AgentEvent::from(RecallEvent::RecallSkipped {
        reason: "nothing to recall".into(),
    }));
    let out = wait.call(serde_json::json!({}), &tool_context()).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("surfaced nothing"), "{}", out.content);

    // Surfaced while the tool waits: it returns ok.
    let waiting = {
        let wait = wait.clone();
        tokio::spawn(async move { wait.call(serde_json::json!({}), &tool_context()).await })
    };
    tokio::task::yield_now().await;
    wait.emit(AgentEvent::from(RecallEvent::MemoriesSurfaced {
        paths: vec!["deploy.md".into()],
        bytes: 42,
    }));
    let out = waiting.await.unwrap();
    assert!(!out.is_error, "{}", out.content);

    // Surfaced before the call (recall settled first): the call returns at once.
    wait.emit(AgentEvent::from(RecallEvent::MemoriesSurfaced {
        paths: vec!["deploy.md".into()],
        bytes: 42,
    }));
    let out = wait.call(serde_json::json!({}), &tool_context()).await;
    assert!(!out.is_error, "{}", out.content);
}
