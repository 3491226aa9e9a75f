//! Small context windows and runaway replies do not end the session: the window is learned from
//! a llama.cpp-style context error, output is clamped to fit, forks trim their prompt (or are
//! skipped with an event), and one oversized message is cut in the middle for compaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop::MemorySetup;
use memloop::compact::CompactConfig;
use memloop::core::events::{AgentEvent, VecSink};
use memloop::core::invariants::check_invariants;
use memloop::core::tokens::{CharEstimator, TokenCounter, estimate_messages};
use memloop::core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop::core::{Agent, AgentConfig};
use memloop::host::env::EnvVars;
#[cfg(feature = "providers")]
use memloop::memory::MemoryEvent;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::prompt::Guidance;
use memloop::testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;
#[cfg(feature = "providers")]
use std::sync::Mutex;
use std::time::Duration;

/// Every string under `v`, summed in bytes.
#[cfg(feature = "providers")]
fn string_bytes(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(a) => a.iter().map(string_bytes).sum(),
        serde_json::Value::Object(o) => o.iter().map(|(k, v)| k.len() + string_bytes(v)).sum(),
        _ => 8,
    }
}

#[cfg(feature = "providers")]
mod llama {
    use super::*;
    use memloop::providers::{OpenAiCompatModel, OpenAiConfig, RetryPolicy};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

    /// What the fake server saw.
    #[derive(Debug, Clone)]
    pub struct Seen {
        pub prompt_tokens: u64,
        pub max_tokens: u64,
        pub rejected: bool,
    }

    /// Answers like llama.cpp with an 8K context: a prompt over `n_ctx` tokens (one per four
    /// bytes of text) gets its 400 `exceed_context_size_error`; the first question gets a
    /// runaway reply of 7,000 tokens of repetition; everything else a short answer.
    pub struct LlamaCpp {
        pub n_ctx: u64,
        pub seen: Arc<Mutex<Vec<Seen>>>,
    }

    pub const RUNAWAY_LINE: &str = "The answer is the answer is the answer. ";

    impl Respond for LlamaCpp {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            let prompt_bytes = string_bytes(&body["messages"]) + string_bytes(&body["tools"]);
            let prompt_tokens = (prompt_bytes as u64).div_ceil(4);
            let max_tokens = body["max_tokens"]
                .as_u64()
                .or_else(|| body["max_completion_tokens"].as_u64())
                .unwrap_or(0);
            let rejected = prompt_tokens > self.n_ctx;
            self.seen.lock().unwrap().push(Seen {
                prompt_tokens,
                max_tokens,
                rejected,
            });
            if rejected {
                return ResponseTemplate::new(400).set_body_json(serde_json::json!({
                    "error": {
                        "code": 400,
                        "message": format!(
                            "request ({prompt_tokens} tokens) exceeds the available context size ({} tokens), try increasing it",
                            self.n_ctx
                        ),
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": prompt_tokens,
                        "n_ctx": self.n_ctx,
                    }
                }));
            }
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let first_question = !messages.iter().any(|m| m["role"] == "assistant")
                && messages
                    .last()
                    .is_some_and(|m| m["content"].to_string().contains("RUNAWAY"));
            // 7,000 tokens of repetition, whatever max_tokens says (the model ignores EOS).
            let text = if first_question {
                RUNAWAY_LINE.repeat(7_000 * 4 / RUNAWAY_LINE.len())
            } else {
                "Summary: the user asked short questions and got short answers.".to_owned()
            };
            let completion = (text.len() as u64).div_ceil(4);
            ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": 0,
                "model": "local",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": if first_question { "length" } else { "stop" },
                }],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion,
                    "total_tokens": prompt_tokens + completion,
                }
            }))
        }
    }

    pub async fn server(n_ctx: u64) -> (MockServer, Arc<Mutex<Vec<Seen>>>) {
        let server = MockServer::start().await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(LlamaCpp {
                n_ctx,
                seen: seen.clone(),
            })
            .mount(&server)
            .await;
        (server, seen)
    }

    pub fn model(server: &MockServer) -> OpenAiCompatModel {
        let mut c = OpenAiConfig::new(format!("{}/v1/", server.uri()), "local").with_api_key("x");
        c.retry = RetryPolicy::none();
        c.timeout = Some(Duration::from_secs(10));
        OpenAiCompatModel::new(c).unwrap()
    }
}

#[cfg(feature = "providers")]
#[tokio::test]
async fn a_runaway_reply_on_an_8k_server_does_not_end_the_session() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env).unwrap();
    let notes = memory.default_notes_config().unwrap();
    // The host believes the default 200,000-token window, as in the bug report.
    let memory = memory.compaction(CompactConfig::for_model(200_000, 2_000), notes);
    let (server, seen) = llama::server(8_192).await;
    let events = VecSink::default();
    let builder = Agent::builder(Arc::new(llama::model(&server)))
        .config(AgentConfig {
            cwd: project.path().to_path_buf(),
            ..AgentConfig::default()
        })
        .events(Arc::new(events.clone()));
    let mut agent = memory.attach(builder).unwrap().build();

    let turns = [
        "RUNAWAY: what does this project do?",
        "which crate holds the agent loop?",
        "and where are the compaction thresholds?",
        "thanks, one last thing: how are tools registered?",
    ];
    for (i, text) in turns.iter().enumerate() {
        let out = agent.run_turn(*text).await;
        assert!(out.is_ok(), "turn {}: {out:?}", i + 1);
        assert!(agent.drain(Duration::from_secs(30)).await.completed);
        assert!(check_invariants(agent.messages()).is_ok(), "turn {}", i + 1);
    }

    // The window was learned from the error and is shared by agent, compactor and forks.
    assert_eq!(agent.context_window().tokens(), 8_192);
    let events = events.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ContextWindowLearned { tokens: 8_192 })),
        "{events:#?}"
    );
    // The extractor either ran trimmed or was skipped with an event; it never failed otherwise.
    let skipped_extractor = events
        .iter()
        .any(|e| matches!(e, AgentEvent::ForkSkipped { purpose, .. } if purpose == "extractor"));
    for e in &events {
        if let Some(MemoryEvent::ExtractionFailed { error }) = e.extension() {
            assert!(
                skipped_extractor && error.contains("skipped"),
                "extraction failed without a skip: {error}"
            );
        }
    }
    let seen = seen.lock().unwrap().clone();
    let rejected = seen.iter().filter(|s| s.rejected).count();
    // Only requests sent before the window was known are rejected (no retry loop).
    assert!((1..=2).contains(&rejected), "{seen:#?}");
    let first_reject = seen.iter().position(|s| s.rejected).unwrap();
    let last_reject = seen.iter().rposition(|s| s.rejected).unwrap();
    // Once learned, every request fits: prompt + max_tokens within the window.
    for s in &seen[last_reject + 1..] {
        assert!(
            s.prompt_tokens + s.max_tokens <= 8_192,
            "request does not fit: {s:?}"
        );
        assert!(
            s.max_tokens >= 512,
            "the floor lets the model answer: {s:?}"
        );
    }
    assert!(first_reject >= 1, "the runaway reply itself was accepted");
    // The conversation now fits the learned window.
    assert!(estimate_messages(&CharEstimator, agent.messages()) < 8_192);
    // Nothing invalid was stored: memory files hold no runaway text (the session's transcript
    // does: it records the conversation as it happened).
    for entry in walk(home.path()) {
        if entry.extension().is_some_and(|e| e == "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(
            !text.contains(&llama::RUNAWAY_LINE.repeat(20)),
            "{} stores the runaway reply",
            entry.display()
        );
    }
}

#[cfg(feature = "providers")]
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Returns 300 KB of output.
struct Dump;

#[async_trait]
impl Tool for Dump {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "dump".into(),
            description: "Print a big log".into(),
            input_schema: serde_json::json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        let line = "2026-11-23T12:00:00Z INFO request served in 3 ms\n";
        ToolOutput::ok(format!(
            "LOG START\n{}LOG END",
            line.repeat(300_000 / line.len())
        ))
    }
}

#[tokio::test]
async fn a_300kb_tool_result_in_a_16k_window_is_cut_and_kept_on_disk() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env)
        .unwrap()
        .extraction(false)
        .recall(false);
    let notes = memory.default_notes_config().unwrap();
    let memory = memory.compaction(CompactConfig::for_model(16_384, 2_000), notes.clone());
    let model = ScriptedModel::new()
        .on_purpose("compact_summary", |_| {
            Some(ScriptStep::text(
                "The user asked for the log; it was dumped.",
            ))
        })
        .on_purpose("session_memory", |_| Some(ScriptStep::text("ok")));
    model.push_for("main", ScriptStep::tool("dump", serde_json::json!({})));
    model.push_for(
        "main",
        ScriptStep::text("The log shows requests served in 3 ms."),
    );
    let config = AgentConfig {
        cwd: project.path().to_path_buf(),
        ..AgentConfig::default()
    };
    let session = config.session_id.clone();
    let builder = Agent::builder(Arc::new(model.clone()))
        .config(config)
        .tool(Arc::new(Dump));
    let mut agent = memory.attach(builder).unwrap().build();
    assert_eq!(agent.context_window().tokens(), 16_384);

    let out = agent.run_turn("dump the log and tell me").await.unwrap();
    assert_eq!(out.text, "The log shows requests served in 3 ms.");
    assert!(check_invariants(agent.messages()).is_ok());

    // The full output is kept under the session dir, and what the summariser saw was cut with a
    // marker naming that file.
    let dir = notes.session_dir(&session).join("tool-results");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);
    let full = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(full.len() >= 299_000 && full.ends_with("LOG END"));
    let summary_reqs = model.requests_for("compact_summary");
    assert_eq!(summary_reqs.len(), 1, "one summary, no retry loop");
    let sent: String = summary_reqs[0]
        .messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    assert!(sent.contains("characters elided from the middle"));
    assert!(sent.contains(&files[0].path().display().to_string()));
    assert!(sent.contains("LOG START") && sent.contains("LOG END"));
    // Every request fitted the window, output included.
    for r in model.requests() {
        let prompt = estimate_messages(&CharEstimator, &r.messages);
        assert!(
            prompt + u64::from(r.max_tokens) <= 16_384,
            "{}: {prompt} + {}",
            r.purpose,
            r.max_tokens
        );
    }
}

/// What a request sends, in tokens (one per four bytes): system, tool specs, messages.
fn prompt_tokens(req: &memloop::core::model::ModelRequest) -> u64 {
    let system: u64 = req.system.iter().map(|s| CharEstimator.count(s)).sum();
    let tools: u64 = req
        .tools
        .iter()
        .map(|t| CharEstimator.count(&serde_json::to_string(t).unwrap()))
        .sum();
    system + tools + estimate_messages(&CharEstimator, &req.messages)
}

/// Answers like a llama.cpp server with an `n_ctx`-token context: a prompt over the window is
/// rejected with a context error naming the window; anything else gets a short answer.
fn tiny_server_model(n_ctx: u64) -> ScriptedModel {
    ScriptedModel::new().rule(move |req| {
        let prompt = prompt_tokens(req);
        Some(if prompt > n_ctx {
            ScriptStep::Fail(memloop::core::model::ModelError::ContextTooLong {
                message: format!(
                    "request ({prompt} tokens) exceeds the available context size ({n_ctx} tokens)"
                ),
                excess_tokens: Some(prompt - n_ctx),
                limit: Some(n_ctx),
            })
        } else if req.purpose == "main" {
            ScriptStep::text("Short answer.")
        } else {
            ScriptStep::text("nothing to save")
        })
    })
}

/// In a 2,048-token window (a small llama.cpp model), one user message several times larger than
/// the window does not block the session: the turn learns the window, the message is cut in the
/// middle (with a marker) so the request fits, the turn completes, and the next turn works too.
/// Both with a host that plans with the real window and one that believes the 200,000 default.
#[tokio::test]
async fn a_user_message_larger_than_a_2k_window_is_cut_and_the_session_goes_on() {
    for planned in [2_048, 200_000] {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
        let memory =
            MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env).unwrap();
        let notes = memory.default_notes_config().unwrap();
        // A 2,048-token window has no room for the transcript search tool and its guidance
        // (about 300 tokens) besides the memory prompt: a host that small turns them off. The
        // memory guidance is brief by itself in a window planned that small; the host that
        // believes 200,000 tokens asks for it.
        let memory = match planned < Guidance::BRIEF_BELOW_TOKENS {
            true => memory,
            false => memory.guidance(Guidance::Brief),
        };
        let memory = memory
            .compaction(CompactConfig::for_model(planned, 512), notes)
            .transcripts(memloop::memory::transcripts::TranscriptConfig {
                enabled: false,
                ..Default::default()
            });
        let model = tiny_server_model(2_048);
        let events = VecSink::default();
        let builder = Agent::builder(Arc::new(model.clone()))
            .config(AgentConfig {
                cwd: project.path().to_path_buf(),
                ..AgentConfig::default()
            })
            .events(Arc::new(events.clone()));
        let mut agent = memory.attach(builder).unwrap().build();

        let huge = format!(
            "HEAD of the paste.\n{}TAIL of the paste: what is wrong here?",
            "2026-11-23T12:00:00Z ERROR upstream timed out after 30 s\n".repeat(600)
        );
        let turns = [huge.as_str(), "and what should I check first?"];
        for (i, text) in turns.iter().enumerate() {
            let out = agent.run_turn(*text).await;
            assert!(out.is_ok(), "window {planned}, turn {}: {out:?}", i + 1);
            assert!(agent.drain(Duration::from_secs(30)).await.completed);
            assert!(check_invariants(agent.messages()).is_ok());
        }
        assert_eq!(agent.context_window().tokens(), 2_048);
        // The paste was cut in the middle, its head and tail kept.
        let kept: String = agent.messages().iter().map(|m| m.text()).collect();
        assert!(kept.contains("characters elided from the middle"), "{kept}");
        assert!(kept.contains("HEAD of the paste") && kept.contains("TAIL of the paste"));
        // No summary fits such a window: the conversation was kept with the paste cut.
        let events = events.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, AgentEvent::Compacted { strategy, .. } if strategy == "cut")),
            "{events:#?}"
        );
        // Only a request sent before the window was known went over it (no retry loop).
        let main = model.requests_for("main");
        let over = main.iter().filter(|r| prompt_tokens(r) > 2_048).count();
        assert_eq!(over, usize::from(planned > 2_048), "window {planned}");
        assert_eq!(main.len(), 2 + over, "one answered request per turn");
    }
}
