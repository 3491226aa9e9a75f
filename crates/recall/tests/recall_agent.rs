//! Agent-level: memories chosen by the LLM selector (scripted model) are injected into the
//! conversation as a system-reminder next to the user's message.

mod recall_common;

use memloop_core::{
    Agent,
    events::{AgentEvent, EventSink, FanoutSink, VecSink},
    message::{ContentBlock, Role},
};
use memloop_recall::RecallEvent;
use memloop_recall::{LlmSelector, RecallHook, SELECTOR_PURPOSE};
use memloop_testkit::{ScriptStep, ScriptedModel, WaitForRecall};
use recall_common::{put, store};
use std::sync::Arc;

#[tokio::test]
async fn surfaced_memories_reach_the_model_as_a_system_reminder() {
    let (_tmp, store) = store();
    put(
        &store,
        "feedback/tests.md",
        "integration tests must hit a real database",
        "Never mock the db.",
    )
    .await;
    put(&store, "ui.md", "colour palette", "blue").await;

    let model = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(
            r#"{"selected_memories": ["feedback/tests.md"]}"#,
        ))
    });
    model.push_for(
        "main",
        ScriptStep::tool(WaitForRecall::NAME, serde_json::json!({})),
    );
    model.push_for("main", ScriptStep::text("I will use a real database."));

    let settled = Arc::new(WaitForRecall::new());
    let events = VecSink::default();
    let sinks: Vec<Arc<dyn EventSink>> = vec![Arc::new(events.clone()), settled.clone()];
    let recall = Arc::new(RecallHook::new(
        store.clone(),
        Arc::new(LlmSelector::new(Arc::new(model.clone()))),
    ));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(settled.clone())
        .hook(recall.clone())
        .events(Arc::new(FanoutSink(sinks)))
        .build();

    let out = agent
        .run_turn("how should I write the integration tests?")
        .await
        .unwrap();
    assert_eq!(out.text, "I will use a real database.");

    let selector_req = &model.requests_for(SELECTOR_PURPOSE)[0];
    assert!(
        selector_req
            .last_user_text()
            .unwrap()
            .contains("feedback/tests.md")
    );
    // Attached to the newest user-role message when it settled (here: the one carrying the tool
    // result, since the prefetch landed during the tool call).
    let reminder = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            ContentBlock::Text { text } if text.starts_with("<system-reminder>") => {
                Some(text.clone())
            }
            _ => None,
        });
    let reminder = reminder.expect("the surfaced memory is attached as a system reminder");
    let path = store
        .describe()
        .dir()
        .unwrap()
        .join("feedback/tests.md")
        .display()
        .to_string();
    assert!(reminder.contains(&format!("Memory (saved today): {path}:")));
    assert!(reminder.contains("Never mock the db."));
    assert!(!reminder.contains("colour palette"));
    // The model saw it on its second call.
    let main = model.requests_for("main");
    assert!(
        main[1]
            .messages
            .iter()
            .any(|m| m.text().contains("Never mock the db."))
    );
    assert!(events.events().iter().any(
        |e| matches!(e, AgentEvent::AttachmentAdded { kind, .. } if kind == "relevant_memories")
    ));
    assert_eq!(recall.surfaced().len(), 1);

    // Next turn: the same memory is not surfaced twice.
    model.push_for("main", ScriptStep::text("ok"));
    agent
        .run_turn("and the integration tests for the api?")
        .await
        .unwrap();
    let surfaced = events
        .events()
        .iter()
        .filter(|e| matches!(e.extension(), Some(RecallEvent::MemoriesSurfaced { .. })))
        .count();
    assert_eq!(surfaced, 1);
}
