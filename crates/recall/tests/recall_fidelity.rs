//! Recall as the original surfaces memories: the header names the age (`saved N days ago`) in
//! every language a memory is written in, a resumed session recognises those headers, and the
//! chosen files are read concurrently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recall_common;

use memloop_core::events::VecSink;
use memloop_core::message::{ContentBlock, Message, Role};
use memloop_core::{CancellationToken, Hook};
use memloop_files::FileMemoryStore;
use memloop_recall::{KeywordSelector, ManualClock, RecallHook, Selector};
use memloop_store::MemoryStore;
use memloop_testkit::{Forwarding, Hold, Method};
use recall_common::{hook_ctx, put};
use std::sync::Arc;
use std::time::Duration;

fn keyword() -> Arc<dyn Selector> {
    Arc::new(KeywordSelector::default())
}

async fn turn(hook: &RecallHook, messages: Vec<Message>, query: &str) -> Option<String> {
    let events = VecSink::default();
    let ctx = hook_ctx(messages, &events, CancellationToken::new());
    let pending = hook.on_turn_start(&ctx, query).await?;
    pending.wait().await.map(|a| a.render())
}

const MEMORIES: [(&str, &str, &str); 3] = [
    (
        "deploy_zh.md",
        "部署 流程 周二",
        "我们在周二部署,部署前先冻结账单。",
    ),
    (
        "deploy_fr.md",
        "déploiement le mardi",
        "Le déploiement se fait le mardi, après le gel de la facturation.",
    ),
    (
        "deploy_en.md",
        "deploy on tuesday",
        "We deploy on Tuesdays after the billing freeze.",
    ),
];

#[tokio::test]
async fn header_says_saved_n_days_ago_in_every_language() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("memory")).unwrap());
    for (rel, description, body) in MEMORIES {
        put(&store, rel, description, body).await;
    }
    let mtime = store
        .scan()
        .await
        .unwrap()
        .iter()
        .map(|h| h.mtime)
        .max()
        .unwrap();
    let dir = store.describe().dir().unwrap().to_path_buf();
    for (query, rel, body) in [
        ("部署 周二 流程", "deploy_zh.md", MEMORIES[0].2),
        ("déploiement mardi", "deploy_fr.md", MEMORIES[1].2),
        ("deploy tuesday", "deploy_en.md", MEMORIES[2].2),
    ] {
        let clock = Arc::new(ManualClock::new(
            mtime + Duration::from_secs(3 * 86_400 + 60),
        ));
        let hook = RecallHook::new(store.clone(), keyword()).with_clock(clock);
        let text = turn(&hook, vec![], query).await.expect(query);
        let path = dir.join(rel).display().to_string();
        assert!(
            text.contains(&format!("\n\nMemory (saved 3 days ago): {path}:\n")),
            "{query}: {text}"
        );
        assert!(text.contains(body), "{query}: {text}");
        assert!(!text.contains(&format!("Memory: {path}:")), "{text}");

        // A resumed session recognises the header: the memory is not surfaced again, and its
        // bytes count against the budget.
        let resumed = vec![Message::new(
            Role::User,
            vec![ContentBlock::text(query), ContentBlock::text(&text)],
        )];
        let clock = Arc::new(ManualClock::new(
            mtime + Duration::from_secs(3 * 86_400 + 60),
        ));
        let again = RecallHook::new(store.clone(), keyword()).with_clock(clock);
        let second = turn(&again, resumed, query).await;
        assert!(
            second.as_deref().is_none_or(|t| !t.contains(&path)),
            "{query}: surfaced twice: {second:?}"
        );
        assert!(
            again.spent_bytes() > 0,
            "{query}: resumed budget not counted"
        );
    }
}

#[tokio::test]
async fn chosen_memories_are_read_concurrently() {
    let tmp = tempfile::tempdir().unwrap();
    let overlap = Arc::new(Forwarding::new(
        FileMemoryStore::open(tmp.path().join("memory")).unwrap(),
    ));
    let store: Arc<dyn MemoryStore> = overlap.clone();
    for (rel, body) in [
        ("release_a.md", "release checklist alpha"),
        ("release_b.md", "release checklist beta"),
        ("release_c.md", "release checklist gamma"),
    ] {
        put(&store, rel, "release checklist", body).await;
    }
    // Every read is held until three are in flight at once: reads made one after another
    // never get there (the bound only turns that into a failure instead of a hang).
    let reads = overlap.hold(Method::ReadPath, Hold::Call);
    let hook = RecallHook::new(store.clone(), keyword());
    let (text, ()) = tokio::join!(turn(&hook, vec![], "the release checklist"), async {
        tokio::time::timeout(Duration::from_secs(60), reads.wait_entered(3))
            .await
            .expect("reads did not overlap: fewer than three in flight at once");
        reads.open();
    });
    let text = text.unwrap();
    // Shown in the selector's order, all three.
    for body in ["alpha", "beta", "gamma"] {
        assert!(text.contains(body), "{text}");
    }
    assert_eq!(
        overlap.count(Method::ReadPath),
        3,
        "each chosen memory read once"
    );
}

#[test]
fn session_budget_is_sixty_thousand_bytes() {
    assert_eq!(
        memloop_recall::RecallConfig::default().session_budget_bytes,
        60_000
    );
}
