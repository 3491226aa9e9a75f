//! Stop-hook overhead on the agent's turn: `ExtractionScheduler::on_stop` and
//! `DreamHook::on_stop` while a slow extraction / dream is running. The hooks only take a short
//! lock (or flip a flag) and return; the slow work lives in a tracked background task.
//!
//! `cargo bench --bench stop_hook -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use memloop::Extractor;
use memloop::MemoryStore;
use memloop::core::Hook;
use memloop::core::{BackgroundTasks, HookContext, message::Message};
use memloop::memory::dream::{Consolidator, DreamConfig, DreamHook, SessionSource};
use memloop::memory::extract::{ExtractError, ExtractionContext, ExtractionScheduler};
use memloop::memory::files::FileMemoryStore;
use memloop::memory::store::MemoryError;
use memloop::testkit::{ScriptedModel, hook_context};
use std::sync::Arc;
use std::time::SystemTime;

/// An extractor that never finishes on its own (a very slow model).
struct Stuck(Arc<tokio::sync::Notify>);

#[async_trait]
impl Extractor for Stuck {
    async fn extract(
        &self,
        _ctx: &ExtractionContext,
    ) -> Result<Vec<memloop::memory::store::MemoryPath>, ExtractError> {
        self.0.notified().await;
        Ok(Vec::new())
    }
}

/// Enough sessions to pass the session gate, slowly (the scan blocks the dream task, not the hook).
struct SlowSessions(std::sync::Mutex<()>);

impl SessionSource for SlowSessions {
    fn touched_since(&self, _: SystemTime, _: &str) -> Result<Vec<String>, MemoryError> {
        let _held = self.0.lock().unwrap();
        Ok((0..10).map(|i| format!("s{i}")).collect())
    }
}

fn ctx(turn: u64, bg: &BackgroundTasks, messages: Arc<Vec<Message>>) -> HookContext {
    HookContext {
        session_id: "bench".into(),
        turn,
        cwd: std::env::temp_dir(),
        system: Arc::new(vec!["system".into()]),
        messages,
        background: bg.clone(),
        ..hook_context(Arc::new(ScriptedModel::new()), Vec::new())
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path()).unwrap());
    let bg = BackgroundTasks::new();
    let messages: Arc<Vec<Message>> = Arc::new(
        (0..200)
            .map(|i| Message::user(format!("message {i} with some text in it")))
            .collect(),
    );

    let release = Arc::new(tokio::sync::Notify::new());
    let sched = ExtractionScheduler::new(store.clone(), Arc::new(Stuck(release.clone())));
    rt.block_on(sched.on_stop(ctx(0, &bg, messages.clone())));
    assert!(sched.is_running());
    let base = ctx(1, &bg, messages.clone());
    c.bench_function("extraction_on_stop_while_extractor_runs", |b| {
        b.to_async(&rt).iter(|| sched.on_stop(base.clone()))
    });
    release.notify_one();

    let gate = Arc::new(SlowSessions(std::sync::Mutex::new(())));
    let held = gate.0.lock().unwrap();
    let dream = DreamHook::with_parts(
        store.clone(),
        DreamConfig::default(),
        gate.clone(),
        Consolidator::new(store.clone()),
    );
    rt.block_on(dream.on_stop(ctx(0, &bg, messages.clone())));
    c.bench_function("dream_on_stop_while_dream_runs", |b| {
        b.to_async(&rt).iter(|| dream.on_stop(base.clone()))
    });
    drop(held);
    release.notify_one();
    rt.block_on(bg.drain(std::time::Duration::from_secs(10)));
}

criterion_group!(benches, bench);
criterion_main!(benches);
