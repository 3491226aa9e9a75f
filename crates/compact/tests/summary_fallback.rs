//! The LLM summary fallback (prompt-too-long retries) and the compactor's circuit breaker.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod common;

use common::{conversation, ctx};
use memloop_compact::{
    CompactConfig, Compactor, SummaryCompactConfig, strategies::summary_compaction,
};
use memloop_core::{
    compaction::{CompactionTrigger, ContextCompactor},
    events::AgentEvent,
    invariants::check_invariants,
    message::MessageKind,
    model::ModelError,
    tokens::CharEstimator,
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;

fn too_long(excess: Option<u64>) -> ScriptStep {
    ScriptStep::Fail(ModelError::ContextTooLong {
        message: "prompt is too long".into(),
        excess_tokens: excess,
        limit: None,
    })
}

#[tokio::test]
async fn summary_is_one_forked_call_declaring_the_parents_tools() {
    let model = ScriptedModel::new();
    model.push_for(
        "compact_summary",
        ScriptStep::text("1. Requests: fix the parser"),
    );
    let (mut c, _) = ctx(Arc::new(model.clone()), conversation(5, 100), 1_000, 1);
    // The history holds tool calls: the request must declare tools, and the parent's exact
    // ones keep its prefix cacheable.
    c.tools = memloop_core::tool::ToolRegistry::new()
        .with(Arc::new(memloop_tools::ReadFile::default()))
        .with(Arc::new(memloop_tools::Grep::default()));
    let out = summary_compaction(&c, &SummaryCompactConfig::default(), &CharEstimator)
        .await
        .unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].meta.kind, MessageKind::CompactBoundary);
    assert_eq!(out[1].meta.kind, MessageKind::CompactSummary);
    assert!(out[1].text().contains("fix the parser"));
    assert!(check_invariants(&out).is_ok());
    let reqs = model.requests_for("compact_summary");
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].tools, c.tools.specs());
    assert_eq!(reqs[0].system, *c.system);
    assert!(reqs[0].last_user_text().unwrap().contains("Latest request"));
}

#[tokio::test]
async fn prompt_too_long_drops_the_oldest_rounds_and_retries() {
    let model = ScriptedModel::new();
    model.push_for("compact_summary", too_long(None));
    model.push_for("compact_summary", too_long(Some(300)));
    model.push_for("compact_summary", ScriptStep::text("summary"));
    let conv = conversation(20, 100);
    let (c, _) = ctx(Arc::new(model.clone()), conv.clone(), 1_000, 1);
    summary_compaction(&c, &SummaryCompactConfig::default(), &CharEstimator)
        .await
        .unwrap();
    let sizes: Vec<usize> = model
        .requests_for("compact_summary")
        .iter()
        .map(|r| r.messages.len())
        .collect();
    assert_eq!(sizes.len(), 3);
    assert!(sizes[0] > sizes[1] && sizes[1] > sizes[2], "{sizes:?}");
    for r in model.requests_for("compact_summary") {
        assert!(check_invariants(&r.messages).is_ok());
    }
}

#[tokio::test]
async fn gives_up_after_three_retries() {
    let model = ScriptedModel::new();
    for _ in 0..4 {
        model.push_for("compact_summary", too_long(None));
    }
    let (c, _) = ctx(Arc::new(model.clone()), conversation(20, 100), 1_000, 1);
    let err = summary_compaction(&c, &SummaryCompactConfig::default(), &CharEstimator)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        memloop_core::compaction::CompactionError::TooLong {
            dropped_attempts: 3
        }
    );
    assert_eq!(model.requests_for("compact_summary").len(), 4);
}

#[tokio::test]
async fn breaker_opens_after_three_failures_until_the_next_turn_or_a_success() {
    let model = ScriptedModel::new().on_purpose("compact_summary", |_| {
        Some(ScriptStep::Fail(ModelError::Overloaded("busy".into())))
    });
    let model = Arc::new(model);
    let compactor = Compactor::new(CompactConfig::for_model(10_000, 1_000));
    // threshold: 10,000 - 1,000 - 13,000 saturates to 0, so every check is over it.
    let conv = conversation(3, 10);
    for n in 1..=3u32 {
        let (c, sink) = ctx(model.clone(), conv.clone(), 5_000, 1);
        assert!(
            compactor
                .maybe_compact(&c, CompactionTrigger::Auto)
                .await
                .is_err()
        );
        assert!(
            sink.events().contains(&AgentEvent::CompactionFailed {
                error: "the summary request failed: provider overloaded: busy".into(),
                consecutive_failures: n,
            }),
            "{:?}",
            sink.events()
        );
    }
    let (c, _) = ctx(model.clone(), conv.clone(), 5_000, 1);
    assert_eq!(
        compactor.maybe_compact(&c, CompactionTrigger::Auto).await,
        Ok(None)
    );
    assert_eq!(
        model.requests_for("compact_summary").len(),
        3,
        "open breaker: no call"
    );
    // The next user turn closes it.
    let (c, _) = ctx(model.clone(), conv.clone(), 5_000, 2);
    assert!(
        compactor
            .maybe_compact(&c, CompactionTrigger::Auto)
            .await
            .is_err()
    );
    assert_eq!(compactor.consecutive_failures(), 1);
}

#[tokio::test]
async fn a_success_resets_the_count_and_switches_are_honoured() {
    let model = ScriptedModel::new();
    model.push_for("compact_summary", ScriptStep::Fail(ModelError::Timeout));
    model.push_for("compact_summary", ScriptStep::text("summary"));
    let model = Arc::new(model);
    let compactor = Compactor::new(CompactConfig::for_model(10_000, 1_000));
    let (c, _) = ctx(model.clone(), conversation(3, 10), 5_000, 1);
    assert!(
        compactor
            .maybe_compact(&c, CompactionTrigger::Auto)
            .await
            .is_err()
    );
    let out = compactor
        .maybe_compact(&c, CompactionTrigger::Auto)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.strategy, "summary");
    assert_eq!(compactor.consecutive_failures(), 0);

    // Below the threshold: nothing; auto off: nothing, manual still works; all off: nothing.
    let big = Compactor::new(CompactConfig::default());
    assert_eq!(
        big.maybe_compact(&c, CompactionTrigger::Auto).await,
        Ok(None)
    );
    let mut cfg = CompactConfig::for_model(10_000, 1_000);
    cfg.auto_disabled = true;
    let auto_off = Compactor::new(cfg);
    assert_eq!(
        auto_off.maybe_compact(&c, CompactionTrigger::Auto).await,
        Ok(None)
    );
    model.push_for("compact_summary", ScriptStep::text("manual summary"));
    assert!(
        auto_off
            .maybe_compact(&c, CompactionTrigger::Manual)
            .await
            .unwrap()
            .is_some()
    );
    cfg.disabled = true;
    let off = Compactor::new(cfg);
    assert_eq!(
        off.maybe_compact(&c, CompactionTrigger::Manual).await,
        Ok(None)
    );
}

#[tokio::test]
async fn warns_once_per_turn_between_warning_and_threshold() {
    let compactor = Compactor::new(CompactConfig::default());
    let model = Arc::new(ScriptedModel::new());
    let (c, sink) = ctx(model.clone(), conversation(1, 10), 150_000, 1);
    assert_eq!(
        compactor.maybe_compact(&c, CompactionTrigger::Auto).await,
        Ok(None)
    );
    assert_eq!(
        compactor.maybe_compact(&c, CompactionTrigger::Auto).await,
        Ok(None)
    );
    let warnings = sink
        .events()
        .iter()
        .filter(|e| matches!(e, AgentEvent::Warning { .. }))
        .count();
    assert_eq!(warnings, 1);
    // Auto compaction off and over the blocking limit: told once, nothing compacted.
    let off = Compactor::new(CompactConfig {
        auto_disabled: true,
        ..Default::default()
    });
    let (c, sink) = ctx(model, conversation(1, 10), 178_000, 2);
    assert_eq!(
        off.maybe_compact(&c, CompactionTrigger::Auto).await,
        Ok(None)
    );
    assert!(sink.events().iter().any(
        |e| matches!(e, AgentEvent::Warning { message } if message.contains("blocking limit of 177000"))
    ));
}

#[tokio::test]
async fn falls_back_to_the_llm_summary_when_the_notes_are_still_the_template() {
    use memloop_session_notes::{FileSessionNotes, SessionNotesConfig};
    let dir = tempfile::TempDir::new().unwrap();
    let notes = FileSessionNotes::new(SessionNotesConfig::new(dir.path()), "s1").unwrap();
    notes.ensure_notes_file().await.unwrap();
    let model = ScriptedModel::new();
    model.push_for("compact_summary", ScriptStep::text("the summary"));
    let compactor =
        Compactor::new(CompactConfig::for_model(10_000, 1_000)).with_session_notes(Arc::new(notes));
    let (c, _) = ctx(Arc::new(model), conversation(3, 10), 5_000, 1);
    let out = compactor
        .maybe_compact(&c, CompactionTrigger::Auto)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.strategy, "summary");
    assert!(out.messages[1].text().contains("the summary"));
    assert!(check_invariants(&out.messages).is_ok());
}

#[tokio::test]
async fn a_cancelled_compaction_is_not_a_failure() {
    let model = ScriptedModel::new();
    model.push_for("compact_summary", ScriptStep::Fail(ModelError::Cancelled));
    let model = Arc::new(model);
    let compactor = Compactor::new(CompactConfig::for_model(10_000, 1_000));
    let (c, sink) = ctx(model.clone(), conversation(3, 10), 5_000, 1);
    assert_eq!(
        compactor.maybe_compact(&c, CompactionTrigger::Auto).await,
        Err(memloop_core::compaction::CompactionError::Cancelled)
    );
    assert_eq!(compactor.consecutive_failures(), 0);
    assert!(
        !sink
            .events()
            .iter()
            .any(|e| matches!(e, AgentEvent::CompactionFailed { .. })),
        "{:?}",
        sink.events()
    );
}
