//! Session-memory compaction: each decline reason, the in-flight wait, section truncation.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod common;

use common::{NOTES, conversation};
use memloop_compact::{
    SessionMemoryCompactConfig,
    strategies::{DeclineReason, SECTION_TRUNCATED, session_memory_compaction},
};
use memloop_core::{
    invariants::check_invariants, message::MessageKind, model::Model, tokens::CharEstimator,
};
use memloop_session_notes::{
    EDIT_TOOL_NAME, FileSessionNotes, SessionMemory, SessionNotesConfig, UpdateTrigger,
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::time::Instant;

fn memory(dir: &TempDir) -> Arc<FileSessionNotes> {
    let cfg = SessionNotesConfig::new(dir.path().join("projects/p"));
    Arc::new(FileSessionNotes::new(cfg, "s1").unwrap())
}

async fn with_notes(dir: &TempDir, notes: &str) -> Arc<FileSessionNotes> {
    let sm = memory(dir);
    sm.ensure_notes_file().await.unwrap();
    std::fs::write(sm.notes_path(), notes).unwrap();
    sm
}

fn small_bounds() -> SessionMemoryCompactConfig {
    SessionMemoryCompactConfig {
        min_tokens: 500,
        max_tokens: 2_000,
        ..Default::default()
    }
}

#[tokio::test]
async fn decline_table() {
    let conv = conversation(30, 200);
    let cfg = small_bounds();
    let dir = TempDir::new().unwrap();

    let no_file = memory(&dir);
    let template_dir = TempDir::new().unwrap();
    let template = memory(&template_dir);
    template.ensure_notes_file().await.unwrap();
    let missing_dir = TempDir::new().unwrap();
    let missing = with_notes(&missing_dir, NOTES).await;
    missing.reset_baselines(0, Some("gone-id".into()));
    let ok_dir = TempDir::new().unwrap();
    let ok = with_notes(&ok_dir, NOTES).await;
    ok.reset_baselines(0, Some(conv[100].id.clone()));
    let disabled_dir = TempDir::new().unwrap();
    let mut off = SessionNotesConfig::new(disabled_dir.path());
    off.enabled = false;
    let switched_off: Arc<dyn SessionMemory> = Arc::new(FileSessionNotes::new(off, "s1").unwrap());

    let as_dyn = |m: &Arc<FileSessionNotes>| -> Arc<dyn SessionMemory> { m.clone() };
    type Case = (
        &'static str,
        Option<Arc<dyn SessionMemory>>,
        SessionMemoryCompactConfig,
        u64,
        Result<(), DeclineReason>,
    );
    let cases: Vec<Case> = vec![
        (
            "no session memory",
            None,
            cfg,
            u64::MAX,
            Err(DeclineReason::Disabled),
        ),
        (
            "strategy off",
            Some(as_dyn(&ok)),
            SessionMemoryCompactConfig {
                enabled: false,
                ..cfg
            },
            u64::MAX,
            Err(DeclineReason::Disabled),
        ),
        (
            "session memory off",
            Some(switched_off),
            cfg,
            u64::MAX,
            Err(DeclineReason::Disabled),
        ),
        (
            "no file",
            Some(as_dyn(&no_file)),
            cfg,
            u64::MAX,
            Err(DeclineReason::NoNotesFile),
        ),
        (
            "template",
            Some(as_dyn(&template)),
            cfg,
            u64::MAX,
            Err(DeclineReason::NotesAreTemplate),
        ),
        (
            "summarized id gone",
            Some(as_dyn(&missing)),
            cfg,
            u64::MAX,
            Err(DeclineReason::LastSummarizedMissing("gone-id".into())),
        ),
        (
            "still over",
            Some(as_dyn(&ok)),
            cfg,
            600,
            Err(DeclineReason::StillOverThreshold {
                tokens: 0,
                threshold: 600,
            }),
        ),
        ("applies", Some(as_dyn(&ok)), cfg, u64::MAX, Ok(())),
    ];
    for (name, mem, cfg, threshold, expected) in cases {
        let got = session_memory_compaction(
            mem.as_ref(),
            &conv,
            &CharEstimator,
            &cfg,
            threshold,
            &never(),
        )
        .await;
        match (&got, &expected) {
            (
                Err(DeclineReason::StillOverThreshold {
                    tokens,
                    threshold: t,
                }),
                Err(DeclineReason::StillOverThreshold { threshold: et, .. }),
            ) => {
                assert!(*tokens >= *t && t == et, "{name}: {got:?}");
            }
            (Ok(c), Ok(())) => {
                assert!(check_invariants(&c.messages).is_ok(), "{name}");
                assert_eq!(c.messages[0].meta.kind, MessageKind::CompactBoundary);
                assert_eq!(c.messages[1].meta.kind, MessageKind::CompactSummary);
                assert!(c.messages[1].text().contains("Fixing the parser"));
                // Everything after the last summarized message is kept.
                assert!(c.plan.start <= 101, "{name}");
                assert!(
                    c.plan.tokens >= 500 && c.plan.tokens <= 2_000 + 200,
                    "{name}: {:?}",
                    c.plan
                );
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{name}"),
            _ => panic!("{name}: got {got:?}, expected {expected:?}"),
        }
    }
}

#[tokio::test]
async fn long_sections_are_cut_at_a_line_with_a_marker_and_a_pointer() {
    let dir = TempDir::new().unwrap();
    let long: String = (0..2_000).map(|i| format!("- step {i}\n")).collect();
    let notes = format!("# Worklog\n_w_\n{long}# Key results\n_k_\n42\n");
    let sm = with_notes(&dir, &notes).await;
    let mem: Arc<dyn SessionMemory> = sm.clone();
    let conv = conversation(10, 200);
    let c = session_memory_compaction(
        Some(&mem),
        &conv,
        &CharEstimator,
        &small_bounds(),
        u64::MAX,
        &never(),
    )
    .await
    .unwrap();
    let text = c.messages[1].text();
    assert!(text.contains(SECTION_TRUNCATED));
    assert!(text.contains(&sm.notes_path().display().to_string()));
    assert!(text.contains("# Key results\n_k_\n42"));
    let worklog = &text[text.find("# Worklog").unwrap()..text.find(SECTION_TRUNCATED).unwrap()];
    assert!(worklog.len() <= 8_000 + 1);
    assert!(worklog.ends_with('\n'), "cut at a line boundary");
    // Short notes: no marker, no pointer.
    let dir2 = TempDir::new().unwrap();
    let sm2 = with_notes(&dir2, NOTES).await;
    let mem2: Arc<dyn SessionMemory> = sm2.clone();
    let c = session_memory_compaction(
        Some(&mem2),
        &conv,
        &CharEstimator,
        &small_bounds(),
        u64::MAX,
        &never(),
    )
    .await
    .unwrap();
    assert!(!c.messages[1].text().contains(SECTION_TRUNCATED));
    assert!(
        !c.messages[1]
            .text()
            .contains(&sm2.notes_path().display().to_string())
    );
}

/// A slow updater: the edit arrives after `delay`.
fn slow_updater(delay: Duration) -> ScriptedModel {
    ScriptedModel::new().on_purpose("session_memory", move |req| {
        let last = req.messages.last()?;
        if last.tool_result_ids().next().is_some() {
            return Some(ScriptStep::text("done"));
        }
        Some(ScriptStep::Delay(
            delay,
            Box::new(ScriptStep::tool(
                EDIT_TOOL_NAME,
                json!({"old_string": "Tests pass.", "new_string": "Tests pass. Parser merged."}),
            )),
        ))
    })
}

/// Queue a notes update that takes `update_takes`, let `head_start` pass, then compact.
/// Returns how long the compaction waited and whether it saw the update's edit.
async fn compact_during_update(update_takes: Duration, head_start: Duration) -> (Duration, bool) {
    compact_during_update_cancelled_after(update_takes, head_start, None).await
}

/// [`compact_during_update`], with the turn cancelled `cancel_after` into the wait.
async fn compact_during_update_cancelled_after(
    update_takes: Duration,
    head_start: Duration,
    cancel_after: Option<Duration>,
) -> (Duration, bool) {
    let dir = TempDir::new().unwrap();
    let sm = with_notes(&dir, NOTES).await;
    let conv = conversation(10, 200);
    let model: Arc<dyn Model> = Arc::new(slow_updater(update_takes));
    let (ctx, _) = common::ctx(model, conv.clone(), 20_000, 1);
    let update = sm.update(&ctx, UpdateTrigger::Auto);
    let task = tokio::spawn(async move {
        let _ = update.await;
    });
    tokio::task::yield_now().await;
    tokio::time::sleep(head_start).await;
    assert!(sm.update_in_flight_since().is_some());
    let mem: Arc<dyn SessionMemory> = sm.clone();
    let began = Instant::now();
    let cancel = never();
    if let Some(after) = cancel_after {
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            trigger.cancel();
        });
    }
    let c = session_memory_compaction(
        Some(&mem),
        &conv,
        &CharEstimator,
        &small_bounds(),
        u64::MAX,
        &cancel,
    )
    .await
    .unwrap();
    let waited = began.elapsed();
    task.abort();
    (waited, c.messages[1].text().contains("Parser merged."))
}

#[tokio::test(start_paused = true)]
async fn waits_for_an_in_flight_update_then_uses_its_notes() {
    let (waited, merged) = compact_during_update(Duration::from_secs(5), Duration::ZERO).await;
    assert!(
        waited >= Duration::from_secs(5) && waited <= Duration::from_secs(6),
        "{waited:?}"
    );
    assert!(merged);
}

#[tokio::test(start_paused = true)]
async fn gives_up_waiting_after_fifteen_seconds() {
    let (waited, merged) = compact_during_update(Duration::from_secs(100), Duration::ZERO).await;
    assert_eq!(waited, Duration::from_secs(15));
    assert!(!merged);
}

#[tokio::test(start_paused = true)]
async fn does_not_wait_for_an_update_started_over_a_minute_ago() {
    let (waited, merged) =
        compact_during_update(Duration::from_secs(300), Duration::from_secs(61)).await;
    assert_eq!(waited, Duration::ZERO);
    assert!(!merged);
}

#[tokio::test(start_paused = true)]
async fn waiting_for_an_update_stops_when_the_turn_is_cancelled() {
    let (waited, merged) = compact_during_update_cancelled_after(
        Duration::from_secs(100),
        Duration::ZERO,
        Some(Duration::from_secs(2)),
    )
    .await;
    assert_eq!(waited, Duration::from_secs(2), "not the full 15 s");
    assert!(!merged);
}

/// A token nobody cancels.
fn never() -> memloop_core::CancellationToken {
    memloop_core::CancellationToken::new()
}
