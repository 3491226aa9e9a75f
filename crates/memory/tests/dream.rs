//! Dream: gate order, the session source, a full consolidation through the DreamHook with a
//! scripted model (success and failure), and daily-log mode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod extract_common;
use extract_common as common;
use memloop_core::Hook;
use memloop_memory::MemoryEvent;

use common::{conversation, hook_with_model, run_extractor};
use memloop_core::{
    BackgroundTasks,
    events::{AgentEvent, VecSink},
};
use memloop_files::FileMemoryStore;
use memloop_memory::dream::{
    CONSOLIDATE_LOCK, Consolidator, DREAM_PURPOSE, DailyLogTool, DreamConfig, DreamGate, DreamHook,
    ProjectDirSessions, SessionSource, daily_log_path,
};
use memloop_memory::extract::{EXTRACTOR_PURPOSE, ExtractorConfig, ForkedExtractor};
use memloop_store::{MemoryDoc, MemoryError, MemoryPath, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::{ScriptStep, ScriptedModel};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The injectable session source: a fixed, changeable list of session ids.
struct Listed(Mutex<Vec<String>>);

impl SessionSource for Listed {
    fn touched_since(&self, _since: SystemTime, current: &str) -> Result<Vec<String>, MemoryError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|s| *s != current)
            .cloned()
            .collect())
    }
}

/// The dream's own events (forks also report model requests and tool calls).
fn dream_events(events: &VecSink) -> Vec<AgentEvent> {
    events
        .take()
        .into_iter()
        .filter(|e| {
            matches!(
                e.extension::<MemoryEvent>(),
                Some(MemoryEvent::DreamFinished { .. } | MemoryEvent::DreamSkipped { .. })
            ) || matches!(e, AgentEvent::Warning { .. })
        })
        .collect()
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("s{i}")).collect()
}

fn set_mtime(path: &Path, t: SystemTime) {
    File::open(path).unwrap().set_modified(t).unwrap();
}

fn hours_ago(h: u64) -> SystemTime {
    SystemTime::now() - Duration::from_secs(h * 3_600)
}

fn write_lock(mem: &Path, body: &str, t: SystemTime) {
    std::fs::write(mem.join(CONSOLIDATE_LOCK), body).unwrap();
    set_mtime(&mem.join(CONSOLIDATE_LOCK), t);
}

#[tokio::test(start_paused = true)]
async fn gates_run_in_spec_order() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let sessions = Arc::new(Listed(Mutex::new(
        ["current", "s0", "s1", "s2", "s3"]
            .map(String::from)
            .to_vec(),
    )));
    let hook = DreamHook::with_parts(
        store.clone(),
        DreamConfig::default(),
        sessions.clone(),
        Consolidator::new(store.clone()),
    );
    // Never consolidated: the time gate passes; 4 other sessions < 5.
    assert_eq!(
        hook.check_gates("current").await.unwrap_err(),
        DreamGate::Sessions
    );
    // A second scan within 10 minutes is throttled.
    assert_eq!(
        hook.check_gates("current").await.unwrap_err(),
        DreamGate::ScanThrottle
    );
    // A consolidation 1 h ago closes the time gate, which is checked before the throttle.
    write_lock(tmp.path(), "999999999", hours_ago(1));
    assert_eq!(
        hook.check_gates("current").await.unwrap_err(),
        DreamGate::Time
    );
    write_lock(tmp.path(), "999999999", hours_ago(25));
    assert_eq!(
        hook.check_gates("current").await.unwrap_err(),
        DreamGate::ScanThrottle
    );
    tokio::time::advance(Duration::from_secs(600)).await;
    sessions.0.lock().unwrap().push("s4".into());
    let guard = hook.check_gates("current").await.unwrap();
    let body = std::fs::read_to_string(tmp.path().join(CONSOLIDATE_LOCK)).unwrap();
    assert_eq!(body, std::process::id().to_string());
    guard.rollback().unwrap();

    // The lock is last: a live holder within the staleness limit blocks.
    let strict = DreamHook::with_parts(
        store.clone(),
        DreamConfig {
            stale_lock_after: Duration::from_secs(48 * 3_600),
            ..DreamConfig::default()
        },
        sessions.clone(),
        Consolidator::new(store.clone()),
    );
    write_lock(tmp.path(), "1", hours_ago(25));
    assert_eq!(
        strict.check_gates("current").await.unwrap_err(),
        DreamGate::Lock
    );
}

#[test]
fn project_dir_sessions_count_touched_transcripts_and_session_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path();
    let mem = project.join("memory");
    std::fs::create_dir_all(mem.join("sub")).unwrap();
    std::fs::create_dir_all(project.join("s2/session-memory")).unwrap();
    std::fs::create_dir_all(project.join(".hidden")).unwrap();
    for f in [
        "s1.jsonl",
        "s3.jsonl",
        "current.jsonl",
        "s2/session-memory/summary.md",
    ] {
        std::fs::write(project.join(f), "x").unwrap();
    }
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    set_mtime(&project.join("s3.jsonl"), old);
    set_mtime(&project.join("s2"), old); // the dir is old, its notes are fresh
    set_mtime(&project.join("s2/session-memory"), old);
    let source = ProjectDirSessions::for_memory_dir(&mem);
    let touched = source.touched_since(hours_ago(1), "current").unwrap();
    assert_eq!(touched, ["s1", "s2"]);
    assert!(
        source
            .touched_since(SystemTime::now() + Duration::from_secs(60), "x")
            .unwrap()
            .is_empty()
    );
}

async fn seeded_project() -> (tempfile::TempDir, Arc<dyn MemoryStore>) {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("memory")).unwrap());
    for (file, desc) in [
        ("testing.md", "integration tests hit a real database"),
        ("testing_db.md", "do not mock the database in tests"),
    ] {
        let doc = MemoryDoc {
            name: file.trim_end_matches(".md").into(),
            description: desc.into(),
            memory_type: Some(MemoryType::Feedback),
            body: format!("{desc}\n"),
        };
        store.write(file, &doc, WriteMode::Overwrite).await.unwrap();
    }
    // Five earlier sessions recorded (as the hook records every session), plus this one.
    let records =
        memloop_memory::dream::SessionRecords::for_memory_dir(store.describe().dir().unwrap());
    for s in ["a", "b", "c", "d", "e", "current"] {
        memloop_memory::dream::SessionSource::record(&records, s).unwrap();
    }
    (tmp, store)
}

#[tokio::test]
async fn dream_hook_consolidates_then_the_time_gate_closes() {
    let (_tmp, store) = seeded_project().await;
    let model = Arc::new(ScriptedModel::new());
    model.push_for(
        DREAM_PURPOSE,
        ScriptStep::tools(vec![
            (
                "memory_write".into(),
                json!({"topic": "testing", "type": "feedback", "name": "Testing",
                       "description": "integration tests use a real database, never mocks",
                       "content": "Use the real database in integration tests.\n**Why:** mocks hid a migration bug.\n**How to apply:** every test touching storage."}),
            ),
            ("memory_delete".into(), json!({"topic": "testing_db.md"})),
        ]),
    );
    model.push_for(
        DREAM_PURPOSE,
        ScriptStep::text("merged 2 testing memories into one"),
    );
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    let hook = DreamHook::new(store.clone());
    let mut ctx = hook_with_model(1, conversation(2), &events, &bg, model.clone());
    ctx.session_id = "current".into();

    hook.on_stop(ctx.clone()).await;
    assert!(bg.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(
        dream_events(&events),
        vec![AgentEvent::from(MemoryEvent::DreamFinished {
            paths: vec!["testing.md".into()]
        })]
    );
    let requests = model.requests_for(DREAM_PURPOSE);
    assert_eq!(
        requests[0].messages.len(),
        1,
        "the dream does not replay the conversation"
    );
    let prompt = requests[0].messages[0].text();
    assert!(
        prompt.contains("testing_db.md") && prompt.contains("Today is"),
        "{prompt}"
    );
    let entries = store.index_entries().await.unwrap();
    assert_eq!(
        entries.iter().map(|e| e.file.as_str()).collect::<Vec<_>>(),
        ["testing.md"]
    );
    let lock = store.describe().dir().unwrap().join(CONSOLIDATE_LOCK);
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        std::process::id().to_string()
    );
    let age = SystemTime::now()
        .duration_since(std::fs::metadata(&lock).unwrap().modified().unwrap())
        .unwrap();
    assert!(age < Duration::from_secs(60));

    hook.on_stop(ctx).await;
    assert!(bg.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(
        dream_events(&events),
        vec![AgentEvent::from(MemoryEvent::DreamSkipped {
            gate: "time".into()
        })]
    );
}

#[tokio::test]
async fn a_failed_dream_rolls_the_lock_back_and_warns() {
    let (_tmp, store) = seeded_project().await;
    let model = Arc::new(ScriptedModel::new()); // no script: the model call fails
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    let hook = DreamHook::new(store.clone());
    let mut ctx = hook_with_model(1, conversation(1), &events, &bg, model);
    ctx.session_id = "current".into();
    hook.on_stop(ctx).await;
    assert!(bg.drain(Duration::from_secs(60)).await.completed);
    let events = dream_events(&events);
    assert!(
        matches!(&events[..], [AgentEvent::Warning { message }] if message.contains("consolidation failed")),
        "{events:?}"
    );
    assert!(
        !store
            .describe()
            .dir()
            .unwrap()
            .join(CONSOLIDATE_LOCK)
            .exists(),
        "new lock removed on failure"
    );
    assert_eq!(store.scan().await.unwrap().len(), 2, "memories untouched");
}

#[tokio::test]
async fn daily_log_mode_appends_to_the_dated_log_through_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let log = DailyLogTool::new(store.clone());
    let day = chrono::NaiveDate::from_ymd_opt(2026, 4, 9).unwrap();
    log.append(day, "09:15", "standup moved to 10:00")
        .await
        .unwrap();
    log.append(day, "16:40", "release freeze starts 2026-04-20")
        .await
        .unwrap();
    let file = store.read("logs/2026/04/2026-04-09.md").await.unwrap();
    assert_eq!(file.header.name.as_deref(), Some("Daily log 2026-04-09"));
    // Logs are raw notes: listed (the dream reads them) but never indexed.
    assert!(store.index_entries().await.unwrap().is_empty());
    assert!(!tmp.path().join("MEMORY.md").exists());
    assert!(file.body.contains("- 09:15 standup moved to 10:00"));
    assert!(
        file.body
            .contains("- 16:40 release freeze starts 2026-04-20")
    );
    let secret = log
        .append(day, "17:00", "api_key = sk-live-0123456789abcdef0123")
        .await;
    assert!(
        matches!(secret, Err(MemoryError::SensitiveData { .. })),
        "{secret:?}"
    );

    // The extractor in daily-log mode gets the tool and the instruction.
    let model = Arc::new(ScriptedModel::new());
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tool(
            "memory_log_append",
            json!({"text": "user prefers short answers"}),
        ),
    );
    model.push_for(EXTRACTOR_PURPOSE, ScriptStep::text("logged"));
    let extractor = ForkedExtractor::new(store.clone()).config(ExtractorConfig {
        daily_log: true,
        ..ExtractorConfig::default()
    });
    let (written, _events) = run_extractor(&extractor, model.clone()).await;
    let today = daily_log_path(chrono::Local::now().date_naive());
    assert_eq!(written, vec![MemoryPath::new(&today).unwrap()]);
    let prompt = model.requests_for(EXTRACTOR_PURPOSE)[0]
        .messages
        .last()
        .unwrap()
        .text();
    assert!(prompt.contains("Daily-log mode is on"));
}

#[tokio::test]
async fn the_hook_ignores_forks_and_reports_disabled() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let (events, bg) = (VecSink::default(), BackgroundTasks::new());
    let off = DreamHook::with_parts(
        store.clone(),
        DreamConfig {
            enabled: false,
            ..DreamConfig::default()
        },
        Arc::new(Listed(Mutex::new(ids(9)))),
        Consolidator::new(store.clone()),
    );
    let mut ctx = hook_with_model(
        1,
        conversation(1),
        &events,
        &bg,
        Arc::new(ScriptedModel::new()),
    );
    off.on_stop(ctx.clone()).await;
    ctx.agent = memloop_core::tool::AgentKind::Forked("extractor".into());
    off.on_stop(ctx).await;
    assert_eq!(
        events.events(),
        vec![AgentEvent::from(MemoryEvent::DreamSkipped {
            gate: "disabled".into()
        })]
    );
}
