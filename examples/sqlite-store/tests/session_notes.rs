//! `SqliteSessionNotes` on its own: updates that overlap (in one process or two) lose no line,
//! an update is in flight until it ends, and an update that ends late never moves the point the
//! notes cover back (nor behind a compaction).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::SessionMemory;
use memloop::core::HookContext;
use memloop::core::message::Message;
use memloop::core::tool::AgentKind;
use memloop::memory::session_notes::{UpdateThresholds, UpdateTrigger};
use memloop::testkit::{ScriptedModel, hook_context};
use memloop_sqlite_store::{SqliteMemoryStore, SqliteSessionNotes};
use std::path::Path;
use std::sync::Arc;

fn ctx(messages: Vec<Message>, context_tokens: u64) -> HookContext {
    HookContext {
        context_tokens,
        ..hook_context(Arc::new(ScriptedModel::new()), messages)
    }
}

async fn notes(db: &Path, session: &str) -> SqliteSessionNotes {
    let store = SqliteMemoryStore::open(db).unwrap();
    SqliteSessionNotes::open(&store, session, UpdateThresholds::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_updates_from_two_handles_lose_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.sqlite3");
    // Two handles on one file and one session, as two processes resuming it would have.
    let (a, b) = (notes(&db, "s1").await, notes(&db, "s1").await);
    let said = Message::user("The release is on Monday.");
    let reply = Message::assistant("Noted.");
    let seen_by_a = vec![
        said.clone(),
        reply.clone(),
        Message::user("Ship the billing fix first."),
    ];
    let seen_by_b = vec![said, reply, Message::user("Then the audit log.")];
    let (ra, rb) = tokio::join!(
        a.update(&ctx(seen_by_a, 100), UpdateTrigger::Auto),
        b.update(&ctx(seen_by_b, 100), UpdateTrigger::Auto),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    // Whichever ran second added only its own new line.
    let mut edits = [ra.edits, rb.edits];
    edits.sort_unstable();
    assert_eq!(edits, [1, 2]);
    let text = a.current_notes().await.unwrap().unwrap();
    for line in [
        "- The release is on Monday.\n",
        "- Ship the billing fix first.\n",
        "- Then the audit log.\n",
    ] {
        assert_eq!(text.matches(line).count(), 1, "{line:?} once in {text}");
    }
    assert_eq!(b.current_notes().await.unwrap(), Some(text));
    // Another session's notes are another row.
    assert_eq!(notes(&db, "s2").await.current_notes().await.unwrap(), None);
}

#[tokio::test]
async fn an_update_is_in_flight_until_it_ends_and_a_late_one_does_not_move_the_notes_back() {
    let dir = tempfile::tempdir().unwrap();
    let notes = notes(&dir.path().join("memory.sqlite3"), "s1").await;
    let first = vec![
        Message::user("Use the blue theme."),
        Message::assistant("OK."),
    ];
    let mut second = first.clone();
    second.extend([
        Message::user("And dark mode at night."),
        Message::assistant("OK."),
    ]);

    // Queued, then run out of order: the newer snapshot stays the covered point.
    let older = notes.update(&ctx(first.clone(), 50), UpdateTrigger::Auto);
    let newer = notes.update(&ctx(second.clone(), 90), UpdateTrigger::Auto);
    assert!(notes.update_in_flight_since().is_some());
    newer.await.unwrap();
    assert!(
        notes.update_in_flight_since().is_some(),
        "the older one waits"
    );
    older.await.unwrap();
    assert!(notes.update_in_flight_since().is_none());
    let got = notes.notes_for_compaction().await.unwrap().unwrap();
    assert_eq!(got.last_summarized, Some(second[3].id.clone()));
    assert!(!got.is_template);
    assert!(got.content.contains("- And dark mode at night.\n"));

    // An update abandoned unrun leaves the in-flight set too.
    drop(notes.update(&ctx(second.clone(), 90), UpdateTrigger::Manual));
    assert!(notes.update_in_flight_since().is_none());

    // An update queued before a compaction ends after it: the covered point stays the summary.
    let before = notes.update(&ctx(second.clone(), 90), UpdateTrigger::Auto);
    let summary = Message::user("(the summary)");
    notes.reset_baselines(40, Some(summary.id.clone()));
    before.await.unwrap();
    let got = notes.notes_for_compaction().await.unwrap().unwrap();
    assert_eq!(got.last_summarized, Some(summary.id));
}

#[tokio::test]
async fn updates_are_due_by_the_thresholds_and_only_for_the_main_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteMemoryStore::open(dir.path().join("memory.sqlite3")).unwrap();
    let thresholds = UpdateThresholds {
        init_tokens: 1_000,
        min_tokens_between_updates: 500,
        tool_calls_between_updates: 3,
    };
    let notes = SqliteSessionNotes::open(&store, "s1", thresholds)
        .await
        .unwrap();
    let talk = vec![Message::user("Hello."), Message::assistant("Hi.")];
    assert!(!notes.should_update(&ctx(talk.clone(), 999)));
    assert!(notes.should_update(&ctx(talk.clone(), 1_000)));
    let forked = HookContext {
        agent: AgentKind::Forked("extractor".into()),
        ..ctx(talk.clone(), 5_000)
    };
    assert!(!notes.should_update(&forked));
    notes
        .update(&ctx(talk.clone(), 1_000), UpdateTrigger::Auto)
        .await
        .unwrap();
    assert!(!notes.should_update(&ctx(talk.clone(), 1_499)));
    assert!(notes.should_update(&ctx(talk, 1_500)));
    assert!(
        notes
            .notes_path()
            .to_string_lossy()
            .ends_with("#session_notes/s1")
    );
}
