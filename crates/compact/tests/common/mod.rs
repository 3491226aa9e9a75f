//! Shared test helpers.
#![allow(dead_code)]

use memloop_core::{
    HookContext,
    events::VecSink,
    message::{ContentBlock, Message, Role},
    model::Model,
};
use memloop_testkit::hook_context;
use serde_json::json;
use std::sync::Arc;

pub fn ctx(
    model: Arc<dyn Model>,
    messages: Vec<Message>,
    tokens: u64,
    turn: u64,
) -> (HookContext, VecSink) {
    let sink = VecSink::default();
    let ctx = HookContext {
        turn,
        system: Arc::new(vec!["system".into()]),
        context_tokens: tokens,
        events: Arc::new(sink.clone()),
        ..hook_context(model, messages)
    };
    (ctx, sink)
}

/// `n` user/assistant exchanges with one tool pair each; every message about `chars` chars.
pub fn conversation(n: usize, chars: usize) -> Vec<Message> {
    let mut v = Vec::new();
    for i in 0..n {
        let id = format!("t{i}");
        v.push(Message::user(format!("question {i} {}", "q".repeat(chars))));
        v.push(
            Message::new(
                Role::Assistant,
                vec![ContentBlock::tool_use(&id, "read", json!({"i": i}))],
            )
            .with_response_id(format!("r{i}")),
        );
        v.push(Message::new(
            Role::User,
            vec![ContentBlock::tool_result(&id, "x".repeat(chars), false)],
        ));
        v.push(
            Message::assistant(format!("answer {i} {}", "a".repeat(chars)))
                .with_response_id(format!("f{i}")),
        );
    }
    v
}

pub const NOTES: &str =
    "# Session Title\n_t_\nFixing the parser\n\n# Current State\n_s_\nTests pass.\n";
