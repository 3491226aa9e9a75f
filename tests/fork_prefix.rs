//! The memory forks of an agent wired by `MemorySetup` send the agent's exact tools, system prompt
//! and message prefix, so the provider's prompt cache can hit: checked on the bytes a loopback
//! server in the Anthropic Messages API's shape receives.
#![cfg(feature = "providers")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::compact::CompactConfig;
use memloop::core::{Agent, AgentConfig};
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::providers::{AnthropicConfig, AnthropicModel};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The Anthropic provider pointed at the loopback `server`: one attempt per request, a 5 s
/// timeout.
fn anthropic(server: &MockServer) -> AnthropicModel {
    let mut config = AnthropicConfig::new("sk-ant-test", "claude-sonnet-4-5");
    config.base_url = server.uri();
    config.retry.max_attempts = 1;
    config.timeout = Some(Duration::from_secs(5));
    AnthropicModel::new(config).unwrap()
}

/// Which agent sent a request, told by the prompt its last user message ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
        let after_tool = after_tool(&body);
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
            Sender::Main => text(ANSWER),
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

const ANSWER: &str = "We release on the first Monday of each month.";

/// Whether `body`'s last message carries a tool result (the main agent's second request of a
/// session; its first one, the user's question, is answered with a tool call).
fn after_tool(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["content"].to_string().contains("tool_result"))
}

/// The session (1..=6) a request belongs to, told by its first message.
fn session(body: &Value) -> usize {
    let first = body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    first
        .strip_prefix("Session ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no session in the first message: {first:?}"))
}

type Span = std::ops::Range<usize>;

/// A few lines of raw JSON scanning, so the comparisons below are on the bytes the server
/// received (sorted keys, escapes and all), never on JSON re-serialised after parsing.
mod raw {
    use super::Span;

    fn skip_ws(s: &[u8], mut i: usize) -> usize {
        while s[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// The span of the JSON value starting at `i` (whitespace skipped).
    pub fn value_at(s: &[u8], i: usize) -> Span {
        let i = skip_ws(s, i);
        let (mut j, mut depth) = (i, 0usize);
        loop {
            match s[j] {
                b'"' => {
                    j += 1;
                    while s[j] != b'"' {
                        j += if s[j] == b'\\' { 2 } else { 1 };
                    }
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
            j += 1;
            if depth == 0 && (j == s.len() || matches!(s[j], b',' | b'}' | b']' | b':')) {
                return i..j;
            }
        }
    }

    /// The items of the array, or the keys and values of the object, at `span`.
    pub fn children(s: &[u8], span: Span) -> Vec<(Option<String>, Span)> {
        let mut out = Vec::new();
        let mut i = skip_ws(s, span.start + 1);
        while i < span.end - 1 {
            let first = value_at(s, i);
            let after = skip_ws(s, first.end);
            let (key, value) = if s[after] == b':' {
                let key: String = serde_json::from_slice(&s[first.clone()]).unwrap();
                (Some(key), value_at(s, after + 1))
            } else {
                (None, first)
            };
            i = skip_ws(s, value.end);
            if s[i] == b',' {
                i = skip_ws(s, i + 1);
            }
            out.push((key, value));
        }
        out
    }

    /// The value of member `key` of the object at `span`.
    pub fn member(s: &[u8], span: Span, key: &str) -> Option<Span> {
        children(s, span)
            .into_iter()
            .find(|(k, _)| k.as_deref() == Some(key))
            .map(|(_, v)| v)
    }

    /// `bytes` without the `cache_control` markers, which move to each request's last blocks.
    pub fn unmarked(bytes: &[u8]) -> String {
        const MARK: &str = r#""cache_control":{"type":"ephemeral"}"#;
        String::from_utf8(bytes.to_vec())
            .unwrap()
            .replace(&format!("{MARK},"), "")
            .replace(&format!(",{MARK}"), "")
    }
}

/// One request as it went over the wire: its raw body, and that body parsed (used to tell the
/// requests apart; the prefix comparisons are on the raw bytes).
struct Wire {
    raw: Vec<u8>,
    json: Value,
}

impl Wire {
    fn body(&self) -> Span {
        raw::value_at(&self.raw, 0)
    }

    /// The raw bytes of the body's member `key` (empty when absent).
    fn member(&self, key: &str) -> &[u8] {
        raw::member(&self.raw, self.body(), key).map_or(&[][..], |r| &self.raw[r])
    }

    fn messages(&self) -> &[Value] {
        self.json["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The raw `messages` array up to the end of the last content block of its last message:
    /// what a fork continuing this conversation sends first. (Its `max_tokens` is its own; the
    /// provider's cache prefix is the tools, the system prompt and the messages.)
    fn conversation(&self) -> &[u8] {
        let messages = raw::member(&self.raw, self.body(), "messages").unwrap();
        let (_, last) = raw::children(&self.raw, messages.clone()).pop().unwrap();
        let content = raw::member(&self.raw, last, "content").unwrap();
        let (_, block) = raw::children(&self.raw, content).pop().unwrap();
        &self.raw[messages.start..block.end]
    }
}

/// The raw requests the server received, in order.
async fn wires(server: &MockServer) -> Vec<Wire> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .into_iter()
        .map(|r| Wire {
            json: serde_json::from_slice(&r.body).unwrap(),
            raw: r.body,
        })
        .collect()
}

/// Where two strings part: the byte offset and a little of each around it.
fn parting(parent: &str, fork: &str) -> String {
    let at = parent
        .bytes()
        .zip(fork.bytes())
        .take_while(|(x, y)| x == y)
        .count();
    let near = |s: &str| {
        let from = at.saturating_sub(40);
        String::from_utf8_lossy(&s.as_bytes()[from..(at + 80).min(s.len())]).into_owned()
    };
    format!(
        "at byte {at}: parent …{}… fork …{}…",
        near(parent),
        near(fork)
    )
}

/// Whether `fork` is what a fork taken right after `parent`'s response sends: the same tools,
/// system prompt and tool choice; `parent`'s raw messages up to the end of its conversation
/// (cache markers aside); then only what the response and the fork's prompt add. The question is
/// answered with a tool call, which the fork leaves out (unanswered), so its prompt joins the
/// question; the request after the tool result is answered with a text, which the fork keeps
/// before its prompt.
fn continues(fork: &Wire, parent: &Wire) -> Result<(), String> {
    for key in ["tools", "system", "tool_choice"] {
        if fork.member(key) != parent.member(key) {
            return Err(format!("its `{key}` differs from the parent's"));
        }
    }
    let (p, f) = (
        raw::unmarked(parent.conversation()),
        raw::unmarked(fork.member("messages")),
    );
    if !f.starts_with(&p) {
        return Err(format!("it leaves the parent's bytes {}", parting(&p, &f)));
    }
    let (n, fm) = (parent.messages().len(), fork.messages());
    let blocks = |m: &Value| m["content"].as_array().map_or(0, Vec::len);
    let added = if after_tool(&parent.json) {
        fm.len() == n + 2
            && fm[n]["role"] == "assistant"
            && fm[n]["content"][0]["text"] == ANSWER
            && blocks(&fm[n]) == 1
            && fm[n + 1]["role"] == "user"
            && blocks(&fm[n + 1]) == 1
    } else {
        fm.len() == n && blocks(&fm[n - 1]) == blocks(&parent.messages()[n - 1]) + 1
    };
    if !added {
        return Err(format!(
            "after the parent's {n} messages it sends {} in all (want {})",
            fm.len(),
            if after_tool(&parent.json) {
                "the answer, then its prompt"
            } else {
                "its prompt joined to the question"
            }
        ));
    }
    Ok(())
}

/// Six sessions of one tool-using turn each, with the default `MemorySetup` wiring plus session
/// notes (updated after every response). Every extractor and notes-updater request continues,
/// on the raw bytes the server received, the main request whose response it followed (the
/// notes updater forks after the tool call and after the answer, the extractor after the
/// answer): the same tools, system prompt and tool choice, and `messages` that start with that
/// request's raw `messages` up to the end of its conversation (only the moving `cache_control`
/// markers masked), followed only by the response and the fork's prompt. The consolidator sends
/// the tools and system prompt of the newest main request and only its prompt.
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
        let builder = Agent::builder(Arc::new(anthropic(&server))).config(AgentConfig {
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

    let sent = wires(&server).await;
    let who: Vec<Sender> = sent.iter().map(|w| sender(&w.json)).collect();
    // Each session's main requests: the question (1 message), then the request after the tool
    // result (3 messages).
    let main_lens = |s: usize| -> Vec<usize> {
        (0..sent.len())
            .filter(|&j| who[j] == Sender::Main && session(&sent[j].json) == s)
            .map(|j| sent[j].messages().len())
            .collect()
    };
    // Which main request each fork continued, by its message count (1: the question, 3: the
    // request after the tool result), per session and agent.
    let mut continued: std::collections::BTreeMap<(usize, Sender), Vec<usize>> =
        std::collections::BTreeMap::new();
    let mut forks = std::collections::BTreeMap::new();
    for (i, fork) in sent.iter().enumerate() {
        if who[i] == Sender::Main {
            continue;
        }
        *forks.entry(format!("{:?}", who[i])).or_insert(0) += 1;
        if who[i] == Sender::Dream {
            // The consolidator works on the memory dir, not on the conversation: it sends only
            // its prompt, after the tools and system prompt of the newest main request.
            assert_eq!(fork.messages().len(), 1);
            let parent = (0..i).rev().find(|&j| who[j] == Sender::Main).unwrap();
            for key in ["tools", "system", "tool_choice"] {
                assert!(
                    fork.member(key) == sent[parent].member(key),
                    "Dream request {i}: `{key}` differs from main request {parent}'s"
                );
            }
            continue;
        }
        // The parent's request at the fork point is one of this session's main requests sent
        // before the fork; the fork must continue exactly one of them.
        let s = session(&fork.json);
        let tried: Vec<(usize, Result<(), String>)> = (0..i)
            .filter(|&j| who[j] == Sender::Main && session(&sent[j].json) == s)
            .map(|j| (j, continues(fork, &sent[j])))
            .collect();
        let parents: Vec<usize> = tried
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(j, _)| *j)
            .collect();
        assert!(
            parents.len() == 1,
            "{:?} request {i} (session {s}) continues {} of the session's earlier main \
             requests: {tried:#?}",
            who[i],
            parents.len()
        );
        continued
            .entry((s, who[i]))
            .or_default()
            .push(sent[parents[0]].messages().len());
    }
    for s in 1..=6 {
        assert_eq!(main_lens(s), [1, 3], "session {s}'s main requests");
        // The notes updater forks after every response (the tool call, then the answer); the
        // extractor once the turn ended (after the answer).
        let mut notes = continued.remove(&(s, Sender::Notes)).unwrap_or_default();
        notes.sort_unstable();
        assert_eq!(
            notes,
            [1, 3],
            "session {s}: the notes updater's requests continued the main requests with these \
             message counts; each should continue the request whose response it followed"
        );
        assert_eq!(
            continued
                .remove(&(s, Sender::Extractor))
                .unwrap_or_default(),
            [3],
            "session {s}: the extractor should continue the turn's last request"
        );
    }
    assert!(continued.is_empty(), "{continued:?}");
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
    let mains: Vec<&Value> = sent
        .iter()
        .filter(|w| sender(&w.json) == Sender::Main)
        .map(|w| &w.json)
        .collect();
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
