//! The recall pipeline on a real memory dir: caps, headers, budget, dedup,
//! compaction reset, cancellation, skips.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod recall_common;

use memloop_core::Hook;
use memloop_core::{
    CancellationToken,
    events::{AgentEvent, VecSink},
    message::{ContentBlock, Message, Role},
};
use memloop_recall::RecallEvent;
use memloop_recall::{
    KeywordSelector, ManualClock, RecallConfig, RecallHook, SelectionContext, Selector,
    SelectorError,
};
use memloop_store::MemoryHeader;
use recall_common::{hook_ctx, put, store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

fn keyword() -> Arc<dyn Selector> {
    Arc::new(KeywordSelector::default())
}

/// Run one turn of `hook` and wait for its attachment text.
async fn turn(
    hook: &RecallHook,
    messages: Vec<Message>,
    text: &str,
    events: &VecSink,
) -> Option<String> {
    let ctx = hook_ctx(messages, events, CancellationToken::new());
    let pending = hook.on_turn_start(&ctx, text).await?;
    pending.wait().await.map(|a| a.render())
}

/// The conversation after a turn whose attachment landed (as the agent builds it).
fn landed(rendered: &str) -> Vec<Message> {
    vec![Message::new(
        Role::User,
        vec![
            ContentBlock::text("earlier question"),
            ContentBlock::text(rendered),
        ],
    )]
}

#[tokio::test]
async fn surfaces_a_cut_memory_with_header_and_note() {
    let (_tmp, store) = store();
    let body: String = (0..300).map(|i| format!("release step {i}\n")).collect();
    put(&store, "release.md", "how releases are shipped", &body).await;
    let events = VecSink::default();
    let hook = RecallHook::new(store.clone(), keyword());
    let text = turn(&hook, vec![], "how do we ship a release?", &events)
        .await
        .unwrap();
    let path = store
        .describe()
        .dir()
        .unwrap()
        .join("release.md")
        .display()
        .to_string();
    assert!(text.starts_with(&format!(
        "<system-reminder>\nMemory (saved today): {path}:\n---\n"
    )));
    assert!(text.contains(&format!("Read the full file at {path} for the rest.]")));
    // Cut at a whole line: the start is shown, the tail is not, and no line is shown in part.
    assert!(text.contains("release step 0\nrelease step 1\n"));
    assert!(!text.contains("release step 299"));
    let last_shown = (0..300)
        .rev()
        .find(|i| text.contains(&format!("release step {i}\n")))
        .unwrap();
    assert!(!text.contains(&format!("release step {}", last_shown + 1)));
    let surfaced = events.events().iter().find_map(|e| match e.extension() {
        Some(RecallEvent::MemoriesSurfaced { paths, bytes }) => Some((paths.clone(), *bytes)),
        _ => None,
    });
    let (paths, bytes) = surfaced.unwrap();
    assert_eq!(paths, vec!["release.md"]);
    assert_eq!(bytes, hook.spent_bytes());
}

#[tokio::test]
async fn header_age_crosses_day_boundaries() {
    let (_tmp, store) = store();
    put(
        &store,
        "note.md",
        "database migration plan",
        "run migrations first",
    )
    .await;
    let mtime = store.scan().await.unwrap()[0].mtime;
    let path = store
        .describe()
        .dir()
        .unwrap()
        .join("note.md")
        .display()
        .to_string();
    let hour = Duration::from_secs(3_600);
    let cases = [
        (mtime - hour, "Memory (saved today)".to_string()), // clock behind the file: never negative
        (
            mtime + 23 * hour + Duration::from_secs(3_599),
            "Memory (saved today)".into(),
        ),
        (mtime + 24 * hour, "Memory (saved yesterday)".into()),
        (mtime + 47 * hour, "Memory (saved yesterday)".into()),
        (mtime + 48 * hour, "This memory is 2 days old.".into()),
        (
            mtime + 24 * 400 * hour,
            "This memory is 400 days old.".into(),
        ),
    ];
    for (now, expected) in cases {
        let days = now
            .duration_since(mtime)
            .map_or(0, |d| d.as_secs() / 86_400);
        let clock = Arc::new(ManualClock::new(now));
        let hook = RecallHook::new(store.clone(), keyword()).with_clock(clock);
        let text = turn(
            &hook,
            vec![],
            "the database migration plan",
            &VecSink::default(),
        )
        .await
        .unwrap();
        let body = text.strip_prefix("<system-reminder>\n").unwrap();
        assert!(body.starts_with(&expected), "{expected}: {body}");
        if expected.starts_with("This memory") {
            assert!(body.contains(&format!(
                "verify them before relying on them.\n\nMemory (saved {days} days ago): {path}:\n"
            )));
        }
    }
}

#[tokio::test]
async fn session_budget_runs_out_then_recall_stops() {
    let (_tmp, store) = store();
    put(
        &store,
        "alpha.md",
        "alpha deployment notes",
        &"a".repeat(1_000),
    )
    .await;
    put(
        &store,
        "beta.md",
        "beta deployment notes",
        &"b".repeat(1_000),
    )
    .await;
    let config = RecallConfig {
        session_budget_bytes: 1_500,
        ..RecallConfig::default()
    };
    let hook = RecallHook::new(store.clone(), keyword()).with_config(config);
    let events = VecSink::default();
    let first = turn(&hook, vec![], "alpha deployment", &events)
        .await
        .unwrap();
    assert!(first.contains("alpha.md") && !first.contains("beta.md"));
    let spent = hook.spent_bytes();
    assert!(spent > 1_000 && spent <= 1_500);
    // beta does not fit in what is left: nothing surfaced, budget marked spent.
    assert!(
        turn(&hook, landed(&first), "beta deployment", &events)
            .await
            .is_none()
    );
    assert_eq!(hook.spent_bytes(), spent);
    // Later turns skip at once.
    events.take();
    assert!(
        turn(&hook, landed(&first), "beta deployment", &events)
            .await
            .is_none()
    );
    assert_eq!(
        events.events(),
        vec![AgentEvent::from(RecallEvent::RecallSkipped {
            reason: "session recall budget spent".into()
        })]
    );
}

/// The bytes of every turn add up: three turns surface one memory each within a budget of
/// three and a half memories, and the fourth turn, whose memory would cross it, is refused,
/// although that memory alone would fit.
#[tokio::test]
async fn the_budget_adds_up_over_turns_and_the_turn_that_crosses_it_is_refused() {
    let (_tmp, store) = store();
    let topics = [
        ("alpha.md", "alpha rollout", 'a'),
        ("beta.md", "beta migration", 'b'),
        ("gamma.md", "gamma backups", 'c'),
        ("delta.md", "delta monitoring", 'd'),
    ];
    for (rel, description, fill) in topics {
        put(&store, rel, description, &fill.to_string().repeat(1_000)).await;
    }
    let config = RecallConfig {
        session_budget_bytes: 3_500,
        ..RecallConfig::default()
    };
    let hook = RecallHook::new(store.clone(), keyword()).with_config(config);
    let events = VecSink::default();
    // The conversation as the agent builds it: every attachment lands in it.
    let mut conversation: Vec<Message> = Vec::new();
    let mut total = 0;
    for (rel, description, _) in &topics[..3] {
        events.take();
        let text = turn(
            &hook,
            conversation.clone(),
            &format!("how did the {description} go?"),
            &events,
        )
        .await
        .unwrap_or_else(|| panic!("{rel} not surfaced after {total} bytes"));
        assert!(text.contains(rel), "{rel}: {text}");
        let bytes = events
            .events()
            .iter()
            .find_map(|e| match e.extension() {
                Some(RecallEvent::MemoriesSurfaced { bytes, .. }) => Some(*bytes),
                _ => None,
            })
            .unwrap();
        assert!(bytes > 1_000, "{rel}: {bytes} bytes");
        total += bytes;
        assert_eq!(hook.spent_bytes(), total, "after {rel}");
        conversation.extend(landed(&text));
    }
    // delta alone fits (it is as long as each of the others), but not on top of them.
    assert!(total + total / 3 > 3_500 && total / 3 < 3_500, "{total}");
    events.take();
    let fourth = turn(
        &hook,
        conversation.clone(),
        "how did the delta monitoring go?",
        &events,
    )
    .await;
    assert!(fourth.is_none(), "the budget was crossed: {fourth:?}");
    assert_eq!(hook.spent_bytes(), total);
    assert!(
        !events
            .events()
            .iter()
            .any(|e| matches!(e.extension(), Some(RecallEvent::MemoriesSurfaced { .. }))),
        "{:?}",
        events.events()
    );
    // And the session stays closed.
    events.take();
    assert!(
        turn(
            &hook,
            conversation,
            "how did the delta monitoring go?",
            &events
        )
        .await
        .is_none()
    );
    assert_eq!(
        events.events(),
        vec![AgentEvent::from(RecallEvent::RecallSkipped {
            reason: "session recall budget spent".into()
        })]
    );
}

#[tokio::test]
async fn dedup_against_surfaced_and_read_files_and_reset_after_compaction() {
    let (_tmp, store) = store();
    put(
        &store,
        "deploy.md",
        "deployment checklist",
        "tag, build, push",
    )
    .await;
    put(
        &store,
        "rollback.md",
        "deployment rollback steps",
        "revert the tag",
    )
    .await;
    let hook = RecallHook::new(store.clone(), keyword());
    let events = VecSink::default();
    let first = turn(&hook, vec![], "deployment checklist please", &events)
        .await
        .unwrap();
    assert!(first.contains("deploy.md") && first.contains("rollback.md"));
    // Same question again: everything is already surfaced.
    assert!(
        turn(
            &hook,
            landed(&first),
            "deployment checklist please",
            &events
        )
        .await
        .is_none()
    );

    // After compaction the attachments are gone: surfaced set and budget reset.
    let ctx = hook_ctx(vec![], &events, CancellationToken::new());
    hook.on_compacted(&ctx).await;
    assert!(hook.surfaced().is_empty() && hook.spent_bytes() == 0);

    // The model read deploy.md in full with memory_read, and rollback.md only partly with Read.
    let abs = store
        .describe()
        .dir()
        .unwrap()
        .join("rollback.md")
        .display()
        .to_string();
    let messages = vec![
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::tool_use("t1", "memory_read", serde_json::json!({"topic": "deploy"})),
                ContentBlock::tool_use(
                    "t2",
                    "Read",
                    serde_json::json!({"file_path": abs, "offset": 10}),
                ),
            ],
        ),
        Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("t1", "…", false),
                ContentBlock::tool_result("t2", "…", false),
            ],
        ),
    ];
    let third = turn(&hook, messages, "deployment checklist please", &events)
        .await
        .unwrap();
    assert!(
        !third.contains("deploy.md:") && third.contains("rollback.md:"),
        "{third}"
    );
}

#[tokio::test]
async fn a_dropped_attachment_is_rolled_back() {
    let (_tmp, store) = store();
    put(
        &store,
        "deploy.md",
        "deployment checklist",
        "tag, build, push",
    )
    .await;
    let hook = RecallHook::new(store.clone(), keyword());
    let events = VecSink::default();
    assert!(
        turn(&hook, vec![], "deployment checklist", &events)
            .await
            .is_some()
    );
    // The turn ended before the agent attached it: the next turn's conversation lacks it.
    let again = turn(
        &hook,
        vec![Message::user("deployment checklist")],
        "deployment checklist",
        &events,
    )
    .await;
    assert!(again.unwrap().contains("deploy.md"));
}

#[tokio::test]
async fn single_word_and_empty_messages_are_skipped() {
    let (_tmp, store) = store();
    put(&store, "thanks.md", "thanks", "x").await;
    let hook = RecallHook::new(store, keyword());
    let events = VecSink::default();
    let ctx = hook_ctx(vec![], &events, CancellationToken::new());
    assert!(hook.on_turn_start(&ctx, "  thanks\n").await.is_none());
    assert!(hook.on_turn_start(&ctx, "   ").await.is_none());
    assert_eq!(
        events.events(),
        vec![
            AgentEvent::from(RecallEvent::RecallSkipped {
                reason: "single-word message".into()
            }),
            AgentEvent::from(RecallEvent::RecallSkipped {
                reason: "empty message".into()
            }),
        ]
    );
}

/// A selector that never finishes on its own (a test double for a hung model); it signals when
/// it starts and when its work is dropped.
struct Stuck {
    started: Arc<Notify>,
    dropped: Arc<Notify>,
}

struct SignalOnDrop(Arc<Notify>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

#[async_trait::async_trait]
impl Selector for Stuck {
    async fn select(
        &self,
        _q: &str,
        _h: &[MemoryHeader],
        _c: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let _guard = SignalOnDrop(self.dropped.clone());
        self.started.notify_one();
        std::future::pending::<()>().await;
        Ok(Vec::new())
    }
}

/// `fut`, or a failure naming `what` if it has not finished after a minute of tokio time. The
/// tests using it pause the clock, which then jumps ahead as soon as every task waits, so a
/// regression that blocks fails at once instead of hanging the test run.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} never finished: something blocks"))
}

#[tokio::test(start_paused = true)]
async fn never_blocks_the_turn_and_is_cancelled_with_it() {
    let (_tmp, store) = store();
    put(&store, "a.md", "anything goes here", "x").await;
    let (started, dropped) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let stuck = Stuck {
        started: started.clone(),
        dropped: dropped.clone(),
    };
    let hook = RecallHook::new(store, Arc::new(stuck));
    let events = VecSink::default();

    // User cancellation: the prefetch yields nothing and the selector's work is dropped.
    let turn_cancel = CancellationToken::new();
    let ctx = hook_ctx(vec![], &events, turn_cancel.clone());
    let pending = within(
        "on_turn_start with a selector that never answers",
        hook.on_turn_start(&ctx, "anything goes here"),
    )
    .await
    .unwrap();
    assert!(
        !pending.is_ready(),
        "on_turn_start returned while the selector still runs"
    );
    within("the selector's start", started.notified()).await;
    turn_cancel.cancel();
    let settled = within("the cancelled prefetch", pending.wait()).await;
    assert!(settled.is_none());
    within("dropping the cancelled selector", dropped.notified()).await;

    // The turn ended first: dropping the pending attachment stops the work.
    let ctx = hook_ctx(vec![], &events, CancellationToken::new());
    let pending = within(
        "on_turn_start with a selector that never answers",
        hook.on_turn_start(&ctx, "anything goes here"),
    )
    .await
    .unwrap();
    within("the selector's start", started.notified()).await;
    drop(pending);
    within(
        "dropping the selector when its attachment is dropped",
        dropped.notified(),
    )
    .await;
    assert!(hook.surfaced().is_empty());
    assert!(
        !events
            .events()
            .iter()
            .any(|e| matches!(e.extension(), Some(RecallEvent::MemoriesSurfaced { .. })))
    );
}

/// Waits for `release` before delegating to the keyword selector.
struct Gated {
    started: Arc<Notify>,
    release: Arc<Notify>,
}

#[async_trait::async_trait]
impl Selector for Gated {
    async fn select(
        &self,
        q: &str,
        h: &[MemoryHeader],
        c: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        self.started.notify_one();
        self.release.notified().await;
        KeywordSelector::default().select(q, h, c).await
    }
}

#[tokio::test]
async fn a_job_that_finishes_after_compaction_attaches_nothing() {
    let (_tmp, store) = store();
    put(&store, "deploy.md", "how we deploy the service", "x").await;
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let gated = Gated {
        started: started.clone(),
        release: release.clone(),
    };
    let hook = RecallHook::new(store, Arc::new(gated));
    let events = VecSink::default();

    let ctx = hook_ctx(vec![], &events, CancellationToken::new());
    let pending = hook
        .on_turn_start(&ctx, "how do we deploy the service")
        .await
        .unwrap();
    started.notified().await;
    hook.on_compacted(&ctx).await; // compaction while the job runs
    release.notify_one();
    assert!(pending.wait().await.is_none(), "nothing attached");
    assert!(hook.surfaced().is_empty());
    assert_eq!(hook.spent_bytes(), 0);
    assert!(
        events
            .events()
            .contains(&AgentEvent::from(RecallEvent::RecallSkipped {
                reason: "the conversation was compacted while recall ran".into()
            }))
    );

    // A job started after the compaction commits as usual.
    release.notify_one();
    let shown = turn(&hook, vec![], "how do we deploy the service", &events).await;
    assert!(shown.unwrap().contains("deploy.md"));
    assert!(hook.surfaced().contains("deploy.md"));
    assert!(hook.spent_bytes() > 0);
}

#[cfg(unix)]
#[tokio::test]
async fn reads_count_through_relative_paths_symlinked_roots_and_topics() {
    use memloop_files::FileMemoryStore;
    use memloop_recall::{ReadTools, read_in_full};
    use memloop_store::MemoryStore;
    use std::collections::HashSet;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("real/memory")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
    // The store is opened through the symlink; the model reads through the real path.
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("link/memory")).unwrap());
    let names = ["a", "b", "c", "d", "e", "f"];
    for n in names {
        put(&store, &format!("{n}.md"), &format!("about {n}"), "x").await;
    }
    let uses = vec![
        ContentBlock::tool_use(
            "1",
            "read_file",
            serde_json::json!({"path": "real/memory/a.md"}),
        ),
        ContentBlock::tool_use(
            "2",
            "Read",
            serde_json::json!({"file_path": tmp.path().join("link/memory/./b.md")}),
        ),
        ContentBlock::tool_use("3", "memory_read", serde_json::json!({"topic": "c.md"})),
        ContentBlock::tool_use(
            "4",
            "read_file",
            serde_json::json!({"path": "real/memory/d.md", "limit": 5}),
        ),
        ContentBlock::tool_use(
            "5",
            "read_file",
            serde_json::json!({"path": "real/memory/e.md"}),
        ),
        ContentBlock::tool_use(
            "6",
            "read_file",
            serde_json::json!({"path": "real/memory/../f.md"}),
        ),
    ];
    let results = (1..=6)
        .map(|i| ContentBlock::tool_result(i.to_string(), "…", i == 5))
        .collect();
    let messages = vec![
        Message::new(Role::Assistant, uses),
        Message::new(Role::User, results),
    ];
    let known: HashSet<String> = names.iter().map(|n| format!("{n}.md")).collect();
    let known: HashSet<&str> = known.iter().map(String::as_str).collect();
    let read = read_in_full(
        &messages,
        store.as_ref(),
        tmp.path(),
        &ReadTools::default(),
        &|p: &str| known.contains(p),
    );
    let mut read: Vec<String> = read.into_iter().collect();
    read.sort();
    assert_eq!(read, vec!["a.md", "b.md", "c.md"]);
}

/// Daily logs are raw notes for the dream, not memories: recall never surfaces them, even when
/// they match best.
#[tokio::test]
async fn daily_logs_are_not_recalled() {
    let (_tmp, store) = store();
    put(
        &store,
        "logs/2026/04/2026-04-09.md",
        "release notes of the day",
        "release shipped\n",
    )
    .await;
    put(
        &store,
        "release.md",
        "how releases are shipped",
        "tag then push\n",
    )
    .await;
    let events = VecSink::default();
    let hook = RecallHook::new(store.clone(), keyword());
    let text = turn(&hook, vec![], "how do we ship a release?", &events)
        .await
        .unwrap();
    assert!(text.contains("tag then push") && !text.contains("release shipped"));
    let surfaced = events.events().iter().find_map(|e| match e.extension() {
        Some(RecallEvent::MemoriesSurfaced { paths, .. }) => Some(paths.clone()),
        _ => None,
    });
    assert_eq!(surfaced.unwrap(), vec!["release.md"]);
}

/// A selector that blocks its thread (no `.await`: a CPU-bound or synchronous selector) until
/// released, then delegates to the keyword selector.
struct BlocksItsThread {
    entered: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

#[async_trait::async_trait]
impl Selector for BlocksItsThread {
    async fn select(
        &self,
        q: &str,
        h: &[MemoryHeader],
        c: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        self.entered.lock().unwrap().send(()).unwrap();
        self.release.lock().unwrap().recv().unwrap();
        KeywordSelector::default().select(q, h, c).await
    }
}

/// The job's events sink: says when the job dropped its copy of the context, i.e. ended.
struct EndSignal {
    events: VecSink,
    ended: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
}

impl memloop_core::events::EventSink for EndSignal {
    fn emit(&self, event: AgentEvent) {
        memloop_core::events::EventSink::emit(&self.events, event);
    }
}

impl Drop for EndSignal {
    fn drop(&mut self) {
        let _ = self.ended.lock().unwrap().send(());
    }
}

/// Block on a std channel off the runtime's threads, for at most a minute.
async fn recv(what: &str, rx: std::sync::mpsc::Receiver<()>) {
    let waited = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(waited.is_ok(), "{what} never happened");
}

/// The turn ends (its pending attachment is dropped) while the selector blocks its thread: the
/// abort cannot stop the job there, and the job goes on once the selector returns. It must then
/// record nothing and say nothing: no surfaced path, no spent byte, no `MemoriesSurfaced` for an
/// attachment nobody adds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_while_its_selector_blocks_commits_nothing() {
    let (_tmp, store) = store();
    put(&store, "deploy.md", "how we deploy the service", "x").await;
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let selector = BlocksItsThread {
        entered: std::sync::Mutex::new(entered_tx),
        release: std::sync::Mutex::new(release_rx),
    };
    let hook = RecallHook::new(store, Arc::new(selector));
    let events = VecSink::default();
    let (ended_tx, ended_rx) = std::sync::mpsc::channel();
    let ctx = memloop_core::HookContext {
        events: Arc::new(EndSignal {
            events: events.clone(),
            ended: std::sync::Mutex::new(ended_tx),
        }),
        ..hook_ctx(vec![], &events, CancellationToken::new())
    };
    let pending = hook
        .on_turn_start(&ctx, "how do we deploy the service?")
        .await
        .unwrap();
    drop(ctx);
    recv("the selector's start", entered_rx).await;
    assert!(!pending.is_ready());
    // The turn ends first (a fast model): the attachment is dropped unconsumed.
    drop(pending);
    release_tx.send(()).unwrap();
    recv("the end of the recall job", ended_rx).await;

    assert!(hook.surfaced().is_empty(), "{:?}", hook.surfaced());
    assert_eq!(hook.spent_bytes(), 0);
    let surfaced: Vec<_> = events
        .events()
        .into_iter()
        .filter(|e| matches!(e.extension(), Some(RecallEvent::MemoriesSurfaced { .. })))
        .collect();
    assert!(surfaced.is_empty(), "{surfaced:?}");
}
