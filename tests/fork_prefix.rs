//! The memory forks of an agent wired by `MemorySetup` send the agent's exact tools, system prompt
//! and message prefix, so the provider's prompt cache can hit: checked on the bytes a loopback
//! server in the Anthropic Messages API's shape receives.
#![cfg(feature = "providers")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../crates/harness-core/tests/support/mod.rs"]
mod support;

use memloop::MemorySetup;
use memloop::compact::CompactConfig;
use memloop::core::{Agent, AgentConfig};
use memloop::memory::{env::EnvVars, paths::MemoryDirResolver};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::{anthropic_at, bodies, without_cache_marks};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Which agent sent a request, told by the prompt its last user message ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    Main,
    Extractor,
    Notes,
    Dream,
}

fn sender(body: &Value) -> Sender {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    if last.contains("acting as the memory extractor") {
        Sender::Extractor
    } else if last.contains("updating the running notes of this session") {
        Sender::Notes
    } else if last.contains("acting as the memory consolidator") {
        Sender::Dream
    } else {
        Sender::Main
    }
}

/// Answers in the Messages API's shape: the main agent first reads its memory list with a tool
/// call, then answers; the forks answer with a short text.
#[derive(Default)]
struct Replies {
    calls: std::sync::atomic::AtomicUsize,
}

impl Respond for Replies {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let after_tool = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["content"].to_string().contains("tool_result"));
        let text = |t: &str| (json!([{"type": "text", "text": t}]), "end_turn");
        let (content, stop) = match sender(&body) {
            Sender::Main if !after_tool => {
                let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                (
                    json!([{"type": "tool_use", "id": format!("toolu_{n:04}"),
                            "name": "memory_read", "input": {"topic": "_list"}}]),
                    "tool_use",
                )
            }
            Sender::Main => text("We release on the first Monday of each month."),
            Sender::Extractor => text("nothing to save"),
            Sender::Notes => text("notes are up to date"),
            Sender::Dream => text("nothing to consolidate"),
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": 40, "output_tokens": 12}
        }))
    }
}

fn bytes(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

/// Whether `fork` starts with `parent`, cache markers aside: every message identical except that
/// the fork may add blocks to the last one (its prompt joins a trailing user message).
fn starts_with(fork: &[Value], parent: &[Value]) -> bool {
    let (Some((last, head)), true) = (parent.split_last(), fork.len() >= parent.len()) else {
        return false;
    };
    let same =
        |a: &Value, b: &Value| bytes(&without_cache_marks(a)) == bytes(&without_cache_marks(b));
    let f_last = &fork[head.len()];
    let blocks = |m: &Value| m["content"].as_array().cloned().unwrap_or_default();
    head.iter().zip(fork).all(|(p, f)| same(p, f))
        && f_last["role"] == last["role"]
        && blocks(f_last).len() >= blocks(last).len()
        && blocks(last)
            .iter()
            .zip(blocks(f_last).iter())
            .all(|(p, f)| same(p, f))
}

/// Six sessions of one tool-using turn each, with the default `MemorySetup` wiring plus session
/// notes (updated after every response): every extractor, notes-updater and consolidator request
/// carries byte for byte the tools and system prompt of the agent's last request at its fork
/// point, and (the extractor and the notes updater, which share the conversation) its messages,
/// the moving `cache_control` markers aside.
#[tokio::test]
async fn every_memory_fork_sends_the_parents_request_prefix_byte_for_byte() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env).unwrap();
    let mut notes = memory.default_notes_config().unwrap();
    notes.thresholds.init_tokens = 0;
    notes.thresholds.min_tokens_between_updates = 0;
    let memory = memory.compaction(CompactConfig::for_model(200_000, 8_192), notes);
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Replies::default())
        .mount(&server)
        .await;

    // The dream's session gate opens in the sixth session (see tests/setup.rs).
    for session in 1..=6 {
        let builder =
            Agent::builder(Arc::new(anthropic_at(&server.uri(), 1))).config(AgentConfig {
                cwd: project.path().to_path_buf(),
                ..AgentConfig::default()
            });
        let mut agent = memory.attach(builder).unwrap().build();
        agent
            .run_turn(format!(
                "Session {session}: when do we release? Check your memory."
            ))
            .await
            .unwrap();
        assert!(agent.drain(Duration::from_secs(30)).await.completed);
    }

    let sent = bodies(&server).await;
    let mut forks = std::collections::BTreeMap::new();
    for (i, body) in sent.iter().enumerate() {
        let who = sender(body);
        if who == Sender::Main {
            continue;
        }
        *forks.entry(format!("{who:?}")).or_insert(0) += 1;
        let fork_msgs = body["messages"].as_array().unwrap();
        // The parent's last request at the fork point: the newest main request sent before this
        // one whose conversation the fork continues (the agent may have gone on meanwhile). The
        // consolidator works on the memory dir, not on the conversation: it sends only its
        // prompt, after the tools and system prompt of the newest main request.
        let earlier = sent[..i].iter().rev().filter(|b| sender(b) == Sender::Main);
        let parent = if who == Sender::Dream {
            assert_eq!(fork_msgs.len(), 1);
            earlier.take(1).next()
        } else {
            let len = |p: &Value| p["messages"].as_array().unwrap().len();
            earlier
                .filter(|p| starts_with(fork_msgs, p["messages"].as_array().unwrap()))
                .reduce(|best, p| if len(p) > len(best) { p } else { best })
        };
        let parent =
            parent.unwrap_or_else(|| panic!("{who:?} request {i} shares no parent prefix"));
        assert_eq!(bytes(&body["tools"]), bytes(&parent["tools"]), "{who:?}");
        assert_eq!(bytes(&body["system"]), bytes(&parent["system"]), "{who:?}");
        assert_eq!(
            body.get("tool_choice"),
            parent.get("tool_choice"),
            "{who:?}"
        );
    }
    let counts: Vec<(String, i32)> = forks.into_iter().collect();
    assert_eq!(
        counts,
        [
            ("Dream".to_owned(), 1),
            ("Extractor".to_owned(), 6),
            // after the tool call and after the answer, in each session
            ("Notes".to_owned(), 12)
        ]
    );
    // The agent declares what its forks use; the declarations are the same in every session.
    let mains: Vec<&Value> = sent.iter().filter(|b| sender(b) == Sender::Main).collect();
    assert!(
        mains
            .iter()
            .all(|b| bytes(&b["tools"]) == bytes(&mains[0]["tools"]))
    );
    let main = mains[0];
    let names: Vec<&str> = main["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "edit_session_notes",
            "memory_delete",
            "memory_read",
            "memory_write",
            "transcript_search"
        ]
    );
}
