//! Session-memory updates: FIFO order, one at a time, and the post-sampling hook.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod common;

use common::{append_worklog, ctx_with, memory, updater};
use memloop_core::Hook;
use memloop_core::{
    message::Message,
    model::{Model, ModelResponse},
};
use memloop_session_notes::NotesEvent;
use memloop_session_notes::{SessionMemory, SessionNotesHook, UpdateTrigger};
use memloop_testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

#[tokio::test(start_paused = true)]
async fn updates_run_one_at_a_time_in_request_order() {
    let dir = TempDir::new().unwrap();
    let sm = memory(&dir);
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let max_running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (r, m) = (running.clone(), max_running.clone());
    let model = updater(move |req| {
        let now = r.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        m.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
        let who = req.messages[0]
            .text()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        // The first update is slow: a non-FIFO queue would let the others overtake it.
        let delay = if who.starts_with("alpha") { 30 } else { 1 };
        ScriptStep::Delay(Duration::from_secs(delay), Box::new(append_worklog(&who)))
    });
    let model: Arc<dyn Model> = Arc::new(model);
    let names = ["alpha", "beta", "gamma", "delta"];
    let futures: Vec<_> = names
        .iter()
        .map(|n| {
            let (ctx, _) = ctx_with(model.clone(), vec![Message::user(*n)], 20_000);
            sm.update(&ctx, UpdateTrigger::Auto)
        })
        .collect();
    assert!(sm.update_in_flight_since().is_some());
    // Spawn in reverse order: the queue, not the spawn order, decides.
    let running2 = running.clone();
    let handles: Vec<_> = futures
        .into_iter()
        .rev()
        .map(|f| {
            let running = running2.clone();
            tokio::spawn(async move {
                let r = f.await;
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                r
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap().unwrap();
    }
    assert_eq!(max_running.load(std::sync::atomic::Ordering::SeqCst), 1);
    let notes = sm.current_notes().await.unwrap().unwrap();
    // Each edit inserts right under the instruction line, so the newest is first.
    let order: Vec<&str> = notes.lines().filter_map(|l| l.strip_prefix("- ")).collect();
    assert_eq!(order, ["delta", "gamma", "beta", "alpha"]);
    assert!(sm.update_in_flight_since().is_none());
}

#[tokio::test]
async fn the_hook_returns_at_once_and_the_update_lands_in_the_background() {
    let dir = TempDir::new().unwrap();
    let sm = Arc::new(memory(&dir));
    let gate = Arc::new(tokio::sync::Notify::new());
    let g = gate.clone();
    let model = ScriptedModel::new().on_purpose("session_memory", move |req| {
        let last = req.messages.last()?;
        if last.tool_result_ids().next().is_some() {
            return Some(ScriptStep::text("done"));
        }
        g.notify_one();
        Some(append_worklog("hooked"))
    });
    let hook = SessionNotesHook::new(sm.clone());
    let (ctx, sink) = ctx_with(
        Arc::new(model),
        vec![Message::user("x"), Message::assistant("y")],
        11_000,
    );
    hook.after_sampling(&ctx, &ModelResponse::text("y")).await;
    // Returned before the updater ran; the task is tracked.
    assert_eq!(ctx.background.running_names(), ["session-memory-update"]);
    gate.notified().await;
    assert!(ctx.background.drain(Duration::from_secs(5)).await.completed);
    assert!(
        sm.current_notes()
            .await
            .unwrap()
            .unwrap()
            .contains("- hooked")
    );
    assert!(
        sink.events()
            .iter()
            .any(|e| matches!(e.extension(), Some(NotesEvent::NotesUpdated { .. })))
    );
    // Not due again right away.
    assert!(!sm.should_update(&ctx));
}
