//! ExtractionScheduler: mutex + trailing run, cursor, skip-and-advance, throttle, drain.
//! Deterministic: paused clock, channels and semaphores, no sleeps.
//! Test helpers use unwrap freely (clippy only exempts #[test] functions themselves).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod extract_common;
use extract_common as common;
use memloop_core::Hook;
use memloop_memory::MemoryEvent;

use async_trait::async_trait;
use common::{conversation, hook};
use memloop_core::{
    BackgroundTasks,
    events::{AgentEvent, VecSink},
    message::{Message, Role},
    tool::AgentKind,
};
use memloop_files::FileMemoryStore;
use memloop_memory::extract::{
    ExtractError, ExtractionContext, ExtractionScheduler, Extractor, SchedulerConfig,
};
use memloop_store::{MemoryPath, MemoryStore};
use pretty_assertions::assert_eq;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

#[derive(Debug, Clone, PartialEq)]
struct Call {
    turn: u64,
    trailing: bool,
    ids: Vec<String>,
}

/// Records every call; optionally waits for a permit, sleeps (tokio time), fails the first N calls.
struct TestExtractor {
    calls: Mutex<Vec<Call>>,
    started: mpsc::UnboundedSender<u64>,
    release: Option<Semaphore>,
    delay: Option<Duration>,
    failures_left: AtomicUsize,
    written: Vec<MemoryPath>,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

impl TestExtractor {
    fn new(gated: bool) -> (Arc<Self>, mpsc::UnboundedReceiver<u64>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let e = Self {
            calls: Mutex::new(Vec::new()),
            started: tx,
            release: gated.then(|| Semaphore::new(0)),
            delay: None,
            failures_left: AtomicUsize::new(0),
            written: Vec::new(),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
        };
        (Arc::new(e), rx)
    }
    /// Not gated; every successful run reports `written`.
    fn writing(written: Vec<MemoryPath>) -> (Arc<Self>, mpsc::UnboundedReceiver<u64>) {
        let (ex, rx) = Self::new(false);
        let mut ex = Arc::into_inner(ex).unwrap();
        ex.written = written;
        (Arc::new(ex), rx)
    }
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    fn release_one(&self) {
        self.release.as_ref().unwrap().add_permits(1);
    }
}

#[async_trait]
impl Extractor for TestExtractor {
    async fn extract(&self, ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        self.calls.lock().unwrap().push(Call {
            turn: ctx.hook.turn,
            trailing: ctx.trailing,
            ids: ctx.new_messages.iter().map(|m| m.id.to_string()).collect(),
        });
        let _ = self.started.send(ctx.hook.turn);
        if let Some(sem) = &self.release {
            sem.acquire().await.unwrap().forget();
        }
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        let fail = self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            return Err(ExtractError::Failed("model overloaded".into()));
        }
        Ok(self.written.clone())
    }
}

fn store(dir: &tempfile::TempDir) -> Arc<dyn MemoryStore> {
    Arc::new(FileMemoryStore::open(dir.path()).unwrap())
}

fn ids(range: std::ops::RangeInclusive<usize>) -> Vec<String> {
    range
        .flat_map(|i| [format!("u{i}"), format!("a{i}")])
        .collect()
}

#[tokio::test(start_paused = true)]
async fn calls_during_a_run_leave_exactly_one_trailing_run_with_the_newest_context() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, mut started) = TestExtractor::new(true);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    sched.on_stop(hook(1, conversation(1), &events, &bg)).await; // A
    assert_eq!(started.recv().await, Some(1));
    for turn in 2..=4 {
        // B, C, D arrive while A runs: each returns at once.
        sched
            .on_stop(hook(turn, conversation(turn as usize), &events, &bg))
            .await;
    }
    assert!(sched.is_running());
    ex.release_one();
    assert_eq!(started.recv().await, Some(4));
    ex.release_one();
    assert!(sched.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(
        ex.calls(),
        vec![
            Call {
                turn: 1,
                trailing: false,
                ids: ids(1..=1)
            },
            Call {
                turn: 4,
                trailing: true,
                ids: ids(2..=4)
            },
        ]
    );
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "a4");
    assert!(!sched.is_running());
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_keeps_the_cursor_and_the_trailing_run_covers_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, mut started) = TestExtractor::new(true);
    ex.failures_left.store(1, Ordering::SeqCst);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    assert_eq!(started.recv().await, Some(1));
    sched.on_stop(hook(2, conversation(2), &events, &bg)).await;
    ex.release_one();
    assert_eq!(started.recv().await, Some(2));
    assert_eq!(
        sched.cursor("s1"),
        None,
        "failed run must not advance the cursor"
    );
    ex.release_one();
    assert!(sched.drain(Duration::from_secs(60)).await.completed);
    let calls = ex.calls();
    assert_eq!(
        calls[1].ids,
        ids(1..=2),
        "trailing run re-covers the failed messages"
    );
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "a2");
    assert!(
        events
            .events()
            .contains(&AgentEvent::from(MemoryEvent::ExtractionFailed {
                error: "extraction failed: model overloaded".into()
            }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_two_extractions_at_once_under_1000_rapid_calls() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, _started) = TestExtractor::new(false);
    let sched = Arc::new(ExtractionScheduler::new(store(&dir), ex.clone()));
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    let convo = conversation(3);
    let barrier = Arc::new(tokio::sync::Barrier::new(1000));
    let mut calls = Vec::new();
    for turn in 1..=1000u64 {
        let (sched, barrier) = (sched.clone(), barrier.clone());
        let ctx = hook(turn, convo.clone(), &events, &bg);
        calls.push(tokio::spawn(async move {
            barrier.wait().await;
            sched.on_stop(ctx).await;
        }));
    }
    for c in calls {
        c.await.unwrap();
    }
    let report = sched.drain(Duration::from_secs(60)).await;
    assert!(report.completed, "{report}");
    assert!(bg.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(ex.max_active.load(Ordering::SeqCst), 1);
    let runs = ex.calls();
    assert!(!runs.is_empty() && runs.len() <= 1000);
    assert!(runs.iter().any(|c| !c.trailing));
}

#[tokio::test(start_paused = true)]
async fn drain_waits_for_the_chain_or_reports_what_is_still_running() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, _rx) = mpsc::unbounded_channel();
    let slow = |secs| {
        Arc::new(TestExtractor {
            calls: Mutex::new(Vec::new()),
            started: tx.clone(),
            release: None,
            delay: Some(Duration::from_secs(secs)),
            failures_left: AtomicUsize::new(0),
            written: Vec::new(),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
        })
    };
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    let ex = slow(10);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    sched.on_stop(hook(2, conversation(2), &events, &bg)).await;
    let t0 = tokio::time::Instant::now();
    let report = sched.drain_default().await;
    assert!(report.completed, "{report}");
    assert_eq!(
        t0.elapsed(),
        Duration::from_secs(20),
        "both runs of the chain finished"
    );
    assert_eq!(ex.calls().len(), 2);

    let ex = slow(120);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    sched.on_stop(hook(2, conversation(2), &events, &bg)).await;
    let report = sched.drain(Duration::from_secs(5)).await;
    assert!(!report.completed);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let root = root.display();
    assert_eq!(
        report.still_running,
        vec![
            format!("extraction for {root} (session s1, turn 1)"),
            format!("queued trailing extraction for {root} (session s1, turn 2)"),
        ]
    );
    assert!(
        report
            .to_string()
            .starts_with("timed out; still running: extraction for")
    );
}

#[tokio::test(start_paused = true)]
async fn skips_and_advances_when_the_main_agent_wrote_a_memory_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, _started) = TestExtractor::new(false);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    // A tool result that wrote outside the memory dir does not count.
    let mut convo = conversation(1);
    let mut outside = Message::new(Role::User, vec![]).with_id("t1");
    outside.meta.files_written = vec![PathBuf::from("/somewhere/else/notes.md")];
    convo.push(outside);
    sched.on_stop(hook(1, convo.clone(), &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(ex.calls().len(), 1);

    let mut inside = Message::new(Role::User, vec![]).with_id("t2");
    inside.meta.files_written = vec![dir.path().join("user_role.md")];
    convo.extend(conversation(2).into_iter().skip(2));
    convo.push(inside);
    sched.on_stop(hook(2, convo, &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(ex.calls().len(), 1, "the extractor did not run again");
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "t2");
    assert!(events.events().iter().any(|e| matches!(
        e.extension(),
        Some(MemoryEvent::ExtractionSkipped { reason }) if reason.contains("already wrote")
    )));
}

#[tokio::test(start_paused = true)]
async fn throttle_counts_eligible_turns_and_trailing_runs_ignore_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, mut started) = TestExtractor::new(true);
    let config = SchedulerConfig {
        every_n_turns: 2,
        ..SchedulerConfig::default()
    };
    let sched = ExtractionScheduler::with_config(store(&dir), ex.clone(), config);
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert!(ex.calls().is_empty());
    assert!(
        events
            .take()
            .contains(&AgentEvent::from(MemoryEvent::ExtractionSkipped {
                reason: "throttled: eligible turn 1 of 2".into()
            }))
    );
    sched.on_stop(hook(2, conversation(2), &events, &bg)).await;
    assert_eq!(started.recv().await, Some(2));
    sched.on_stop(hook(3, conversation(3), &events, &bg)).await; // pending, trailing
    ex.release_one();
    assert_eq!(
        started.recv().await,
        Some(3),
        "trailing run ignores the throttle"
    );
    ex.release_one();
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(ex.calls().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn reports_saved_files_relative_without_the_index_and_ignores_forks_and_disabled() {
    let dir = tempfile::tempdir().unwrap();
    // Memory paths (the index and paths outside the store cannot be one), a repeat among them.
    let (ex, _rx) = TestExtractor::writing(
        ["a.md", "sub/b.md", "a.md"]
            .map(|p| MemoryPath::new(p).unwrap())
            .to_vec(),
    );
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    let mut forked = hook(1, conversation(1), &events, &bg);
    forked.agent = AgentKind::Forked("extractor".into());
    sched.on_stop(forked).await;
    assert!(!sched.is_running());

    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(
        events.events(),
        vec![AgentEvent::from(MemoryEvent::MemoriesSaved {
            paths: vec!["a.md".into(), "sub/b.md".into()]
        })]
    );

    let off = ExtractionScheduler::with_config(
        store(&dir),
        ex.clone(),
        SchedulerConfig {
            enabled: false,
            ..SchedulerConfig::default()
        },
    );
    off.on_stop(hook(2, conversation(2), &events, &bg)).await;
    assert!(!off.is_running());
    assert_eq!(ex.calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_vanished_cursor_covers_all_normal_messages() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, _started) = TestExtractor::new(false);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "a1");

    // After compaction a1 is gone: everything but the summary counts as new.
    let mut compacted = vec![
        Message::user("summary of earlier work")
            .with_id("sum")
            .with_kind(memloop_core::message::MessageKind::CompactSummary),
    ];
    compacted.extend(conversation(3).into_iter().skip(4));
    sched.on_stop(hook(2, compacted, &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(ex.calls()[1].ids, ids(3..=3));
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "a3");
}

/// A fact stated early and compacted away before any extraction saw it still reaches the
/// extractor: the scheduler keeps what the compaction drops (`on_compacting`), the next run gets
/// it ahead of the new messages, and nothing is offered twice afterwards.
#[tokio::test(start_paused = true)]
async fn messages_compacted_away_before_extraction_still_reach_the_extractor() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, _started) = TestExtractor::new(false);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    sched.on_stop(hook(1, conversation(1), &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "a1");

    // Turns 2-3 happen, then a compaction keeps only turn 3 behind a summary before the stop
    // hook of turn 3 ran: u2/a2 exist only in the conversation the compaction replaces.
    let before = conversation(3);
    sched.on_compacting(&hook(3, before, &events, &bg)).await;
    let mut compacted = vec![
        Message::user("summary of earlier work")
            .with_id("sum")
            .with_kind(memloop_core::message::MessageKind::CompactSummary),
    ];
    compacted.extend(conversation(3).into_iter().skip(4));
    sched
        .on_compacted(&hook(3, compacted.clone(), &events, &bg))
        .await;
    compacted.extend(conversation(4).into_iter().skip(6));
    sched
        .on_stop(hook(4, compacted.clone(), &events, &bg))
        .await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(
        ex.calls()[1].ids,
        ids(2..=4),
        "turn 2 was compacted away, still extracted"
    );
    assert_eq!(sched.cursor("s1").unwrap().as_str(), "a4");

    // The carried messages went with that run: the next one sees only what is new.
    compacted.extend(conversation(5).into_iter().skip(8));
    sched.on_stop(hook(5, compacted, &events, &bg)).await;
    assert!(sched.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(ex.calls()[2].ids, ids(5..=5));
}

#[tokio::test(start_paused = true)]
async fn two_schedulers_on_one_dir_share_the_mutex() {
    let dir = tempfile::tempdir().unwrap();
    let (first, mut started_first) = TestExtractor::new(true);
    let (second, mut started_second) = TestExtractor::new(false);
    let a = ExtractionScheduler::new(store(&dir), first.clone());
    let b = ExtractionScheduler::new(store(&dir), second.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    a.on_stop(hook(1, conversation(1), &events, &bg)).await;
    assert_eq!(started_first.recv().await, Some(1));
    let mut other = hook(7, conversation(2), &events, &bg);
    other.session_id = "s2".into();
    b.on_stop(other).await;
    assert!(b.is_running(), "the dir is busy for every scheduler on it");
    assert!(second.calls().is_empty(), "b waits for a's run");
    first.release_one();
    assert_eq!(started_second.recv().await, Some(7));
    assert!(b.drain(Duration::from_secs(1)).await.completed);
    assert!(second.calls()[0].trailing);
    assert_eq!(b.cursor("s2").unwrap().as_str(), "a2");
    assert_eq!(a.cursor("s1").unwrap().as_str(), "a1");
}

/// Panics on `MemoriesSaved`: a panic in the chain outside the extractor's catch_unwind.
struct PanickingSink;

impl memloop_core::events::EventSink for PanickingSink {
    fn emit(&self, event: AgentEvent) {
        if matches!(event.extension(), Some(MemoryEvent::MemoriesSaved { .. })) {
            panic!("event sink failed");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_panic_outside_the_extractor_frees_the_dir_for_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, mut started) = TestExtractor::writing(vec![MemoryPath::new("a.md").unwrap()]);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    let mut panicking = hook(1, conversation(1), &events, &bg);
    panicking.events = Arc::new(PanickingSink);
    sched.on_stop(panicking).await;
    assert_eq!(started.recv().await, Some(1));
    let report = sched.drain(Duration::from_secs(5)).await;
    assert!(report.completed, "the dir stayed busy: {report}");
    assert!(!sched.is_running());

    sched.on_stop(hook(2, conversation(2), &events, &bg)).await;
    assert_eq!(started.recv().await, Some(2), "a new run starts");
    assert!(sched.drain(Duration::from_secs(5)).await.completed);
    assert_eq!(ex.calls().len(), 2);
    assert_eq!(
        events.events(),
        vec![AgentEvent::from(MemoryEvent::MemoriesSaved {
            paths: vec!["a.md".into()]
        })]
    );
}

/// A resumed conversation (an agent started with an earlier session's messages) was covered by
/// that session's extractions: the first extraction after the resume reads only the new turn,
/// and the next one only what follows it.
#[tokio::test(start_paused = true)]
async fn after_a_resume_the_first_extraction_reads_only_the_new_turns() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, mut started) = TestExtractor::new(false);
    let sched = ExtractionScheduler::new(store(&dir), ex.clone());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());

    // Three turns came back from the transcript; the fourth is this process's first.
    sched.on_stop(hook(1, conversation(4), &events, &bg)).await;
    assert_eq!(started.recv().await, Some(1));
    assert!(sched.drain(Duration::from_secs(60)).await.completed);
    sched.on_stop(hook(2, conversation(5), &events, &bg)).await;
    assert_eq!(started.recv().await, Some(2));
    assert!(sched.drain(Duration::from_secs(60)).await.completed);
    let calls = ex.calls();
    assert_eq!(
        calls[0].ids,
        ids(4..=4),
        "the resumed turns were read again"
    );
    assert_eq!(calls[1].ids, ids(5..=5));
}
