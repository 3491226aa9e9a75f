//! memloop's memory on a rig agent, offline: rig's own scripted completion model
//! (`MockCompletionModel`) is the agent's model, memloop's `ScriptedModel` runs memloop's
//! background writers (the extraction fork, the compaction summary).
//!
//! Session 1: the user states a rule and memloop's extraction saves it. Session 2, a new session:
//! recall puts it next to the user's message in the request rig sends. Session 3: the rule
//! survives a compaction (rig's window policy evicts the turn that carried it, memloop
//! summarises it). The rig conversation is a memloop transcript throughout.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop::core::message::Role;
use memloop::host::env::EnvVars;
use memloop::memory::extract::EXTRACTOR_PURPOSE;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::{SelectionContext, SelectorError};
use memloop::memory::store::MemoryHeader;
use memloop::testkit::{ScriptStep, ScriptedModel};
use memloop::{MemorySetup, Selector, async_trait};
use memloop_rig::{MemoryCompactor, MemoryHook, TranscriptMemory, memory_tools};
use rig_agent::AgentBuilder;
use rig_core::completion::{CompletionRequest, Message};
use rig_core::test_utils::{MockCompletionModel, MockTurn};
use rig_memory::{CompactingMemory, SlidingWindowMemory};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The rule's topic file body: only in the file, not in the `MEMORY.md` index line.
const RULE_BODY: &str = "Always use pnpm, never npm.\n**Why:** the lockfile is pnpm's.\n**How to apply:** every install and script.";

/// Long enough for a loaded CI machine; recall returns as soon as it is ready.
const RECALL_WAIT: Duration = Duration::from_secs(30);

fn setup(home: &Path, project: &Path) -> MemorySetup {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_string_lossy())]);
    MemorySetup::with_resolver(MemoryDirResolver::new(project), env).unwrap()
}

/// memloop's side model: the extractor saves the rule the first time it runs (then says it is
/// done); the compaction summary keeps every line of the conversation that states a rule.
fn side_model() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose(EXTRACTOR_PURPOSE, |req| {
            let after_tool = req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some());
            let stated = req.messages.iter().any(|m| m.text().contains("never npm"));
            Some(if after_tool || !stated {
                ScriptStep::text("done")
            } else {
                ScriptStep::tool(
                    "memory_write",
                    serde_json::json!({
                        "topic": "feedback_package_manager", "type": "feedback",
                        "name": "Package manager", "description": "which package manager the repo uses",
                        "content": RULE_BODY,
                    }),
                )
            })
        })
        .on_purpose("compact_summary", |req| {
            let rules: Vec<String> = req
                .messages
                .iter()
                .flat_map(|m| m.text().lines().map(str::to_owned).collect::<Vec<_>>())
                .filter(|line| line.contains("pnpm"))
                .collect();
            Some(ScriptStep::text(format!(
                "Summary of the earlier conversation. Rules: {}",
                rules.join(" ")
            )))
        })
}

/// The text of a request's last message (the prompt), as rig sent it.
fn prompt_text(request: &CompletionRequest) -> String {
    serde_json::to_string(request.chat_history.last().unwrap()).unwrap()
}

#[tokio::test]
async fn a_rule_is_saved_recalled_next_to_the_message_and_survives_compaction() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let setup = setup(home.path(), project.path());
    let transcripts = setup.transcript_dir().unwrap();

    // Session 1: the user states the rule; after the run, extraction saves it.
    let side = side_model();
    let session = Arc::new(setup.open_session(Arc::new(side.clone()), "s1").unwrap());
    let model = MockCompletionModel::from_turns([MockTurn::text("Noted: pnpm only.")]);
    let agent = AgentBuilder::new(model.clone())
        .preamble(session.system_prompt_section().await.unwrap())
        .add_hook(MemoryHook::new(session.clone()).recall_deadline(RECALL_WAIT))
        .memory(TranscriptMemory::new(transcripts.clone()))
        .conversation("s1")
        .dynamic_tools(memory_tools(&session))
        .build();
    agent
        .prompt("In this repo: always use pnpm, never npm.")
        .await
        .unwrap();
    assert!(session.flush(Duration::from_secs(60)).await.completed);
    let extractions = side.requests_for(EXTRACTOR_PURPOSE);
    assert!(
        extractions[0]
            .messages
            .iter()
            .any(|m| m.role == Role::User && m.text().contains("always use pnpm, never npm")),
        "extraction saw the user's message"
    );
    // The user's message reached memloop once: `after_turn` got it under the id `recall`
    // recorded, not as a second copy (which the request would merge into the same message).
    let copies = extractions[0]
        .messages
        .iter()
        .map(|m| m.text().matches("In this repo: always use pnpm").count())
        .sum::<usize>();
    assert_eq!(copies, 1);
    let store = setup.store().unwrap();
    assert!(
        store
            .load_index()
            .await
            .unwrap()
            .content
            .contains("(feedback_package_manager.md)")
    );
    // The memory tools reached rig's request as tools.
    let tools: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(tools.contains(&"memory_write".to_owned()), "{tools:?}");
    // The rig conversation is session s1's memloop transcript.
    let s1 = transcripts.load("s1").unwrap().conversation();
    assert_eq!(s1.len(), 2);
    assert_eq!(s1[1].text(), "Noted: pnpm only.");

    // Session 2, a new session: recall surfaces the rule in the prompt rig sends.
    let session = Arc::new(setup.open_session(Arc::new(side_model()), "s2").unwrap());
    let model = MockCompletionModel::from_turns([MockTurn::text("Run pnpm install.")]);
    let agent = AgentBuilder::new(model.clone())
        .add_hook(MemoryHook::new(session.clone()).recall_deadline(RECALL_WAIT))
        .build();
    agent
        .prompt("How do I install the dependencies, npm or pnpm?")
        .await
        .unwrap();
    let sent = prompt_text(&model.requests()[0]);
    assert!(
        sent.contains("How do I install the dependencies")
            && sent.contains("the lockfile is pnpm's"),
        "the memory is in the user's message: {sent}"
    );
    assert!(session.flush(Duration::from_secs(60)).await.completed);

    // Session 3: the turn that carried the rule leaves rig's window (the last 2 messages) and
    // memloop's compaction summary keeps it.
    let side = side_model();
    let session = Arc::new(setup.open_session(Arc::new(side.clone()), "s3").unwrap());
    let model = MockCompletionModel::from_turns([
        MockTurn::text("pnpm, per the project's rule."),
        MockTurn::text("Linted."),
        MockTurn::text("Tests pass."),
    ]);
    let agent = AgentBuilder::new(model.clone())
        .add_hook(MemoryHook::new(session.clone()).recall_deadline(RECALL_WAIT))
        .memory(CompactingMemory::new(
            TranscriptMemory::new(transcripts.clone()),
            SlidingWindowMemory::last_messages(2),
            MemoryCompactor::new(session.clone()),
        ))
        .conversation("s3")
        .build();
    for prompt in [
        "Which package manager do we use?",
        "Thanks. Now lint the code.",
        "And run the tests.",
    ] {
        agent.prompt(prompt).await.unwrap();
    }
    assert!(session.flush(Duration::from_secs(60)).await.completed);
    assert_eq!(side.requests_for("compact_summary").len(), 1);
    let last = &model.requests()[2].chat_history;
    let history = serde_json::to_string(last).unwrap();
    assert!(
        !history.contains("Which package manager do we use?"),
        "the first turn left the window: {history}"
    );
    let summary = serde_json::to_string(&last[0]).unwrap();
    assert!(
        summary.contains("Summary of the earlier conversation") && summary.contains("never npm"),
        "the rule survives in the summary: {summary}"
    );
    assert!(matches!(last.last(), Some(Message::User { .. })));
}

/// The rig model calls memloop's `memory_write` tool itself: the memory is written through the
/// session, the tool result reaches the model, and extraction skips the turn (the agent saved a
/// memory itself, as in memloop's own loop).
#[tokio::test]
async fn the_model_saves_a_memory_through_the_rig_tool() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let setup = setup(home.path(), project.path());
    // This extractor saves nothing: what is in the memory dir, the rig tool wrote.
    let side =
        ScriptedModel::new().on_purpose(EXTRACTOR_PURPOSE, |_| Some(ScriptStep::text("done")));
    let session = Arc::new(setup.open_session(Arc::new(side.clone()), "t1").unwrap());
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call(
            "call-1",
            "memory_write",
            serde_json::json!({
                "topic": "feedback_package_manager", "type": "feedback",
                "name": "Package manager", "description": "which package manager the repo uses",
                "content": RULE_BODY,
            }),
        ),
        MockTurn::text("Saved."),
    ]);
    let agent = AgentBuilder::new(model.clone())
        .add_hook(MemoryHook::new(session.clone()).recall_deadline(RECALL_WAIT))
        .dynamic_tools(memory_tools(&session))
        .build();
    agent
        .prompt("Remember: always use pnpm, never npm.")
        .max_turns(2)
        .await
        .unwrap();
    assert!(session.flush(Duration::from_secs(60)).await.completed);
    let doc = setup
        .store()
        .unwrap()
        .read("feedback_package_manager.md")
        .await
        .unwrap();
    assert!(doc.body.contains("the lockfile is pnpm's"));
    let result = serde_json::to_string(model.requests()[1].chat_history.last().unwrap()).unwrap();
    assert!(
        result.contains("call-1") && result.contains("Created memory"),
        "memloop's tool result reached the model: {result}"
    );
    assert!(
        side.requests_for(EXTRACTOR_PURPOSE).is_empty(),
        "extraction skips a turn where the agent saved a memory itself"
    );
}

/// A selector whose first selection waits until the test releases it (a slow selection that
/// misses its deadline); every selection picks every memory.
#[derive(Default)]
struct SlowFirst {
    started: AtomicBool,
    release: tokio::sync::Notify,
}

#[async_trait]
impl Selector for SlowFirst {
    async fn select(
        &self,
        _query: &str,
        headers: &[MemoryHeader],
        _ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        if !self.started.swap(true, Ordering::SeqCst) {
            self.release.notified().await;
        }
        Ok(headers.iter().map(|h| h.rel_path.clone()).collect())
    }
}

/// rig cannot add context to a model call under way: a recall that misses the hook's deadline is
/// not in that run's request, and memloop, not having counted it as surfaced, brings it at the
/// session's next turn. (The first selection cannot finish before its deadline: it waits until
/// the test releases it, after that run.)
#[tokio::test]
async fn a_recall_past_the_deadline_is_left_out_and_comes_at_the_next_turn() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let slow = Arc::new(SlowFirst::default());
    let setup = setup(home.path(), project.path()).selector(slow.clone());
    let writer = setup
        .open_session(Arc::new(ScriptedModel::new()), "w")
        .unwrap();
    let rule = serde_json::json!({
        "topic": "feedback_package_manager", "type": "feedback",
        "name": "Package manager", "description": "which package manager the repo uses",
        "content": RULE_BODY,
    });
    writer
        .call_tool("memory_write", &rule.to_string())
        .await
        .unwrap();

    let side =
        ScriptedModel::new().on_purpose(EXTRACTOR_PURPOSE, |_| Some(ScriptStep::text("done")));
    let session = Arc::new(setup.open_session(Arc::new(side), "s").unwrap());
    let ask = "How do I install the dependencies, npm or pnpm?";
    let model = MockCompletionModel::from_turns([MockTurn::text("Let me check.")]);
    let hasty = AgentBuilder::new(model.clone())
        .add_hook(MemoryHook::new(session.clone()).recall_deadline(Duration::ZERO))
        .build();
    hasty.prompt(ask).await.unwrap();
    let sent = prompt_text(&model.requests()[0]);
    assert!(!sent.contains("the lockfile is pnpm's"), "{sent}");
    slow.release.notify_one();

    let model = MockCompletionModel::from_turns([MockTurn::text("Run pnpm install.")]);
    let patient = AgentBuilder::new(model.clone())
        .add_hook(MemoryHook::new(session.clone()).recall_deadline(RECALL_WAIT))
        .build();
    patient.prompt(ask).await.unwrap();
    let sent = prompt_text(&model.requests()[0]);
    assert!(sent.contains("the lockfile is pnpm's"), "{sent}");
    assert!(session.flush(Duration::from_secs(60)).await.completed);
}
