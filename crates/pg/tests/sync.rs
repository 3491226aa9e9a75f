//! `TeamSync` between real memory dirs (tempdirs) and the machine's PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_memory::store::{FileMemoryStore, MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_pg::{EntryState, SyncAction, SyncOptions, TeamSync};
use support::TestSchema;

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, format!("about {name}"), MemoryType::Project, body)
}

struct Machine {
    _dir: tempfile::TempDir,
    local: FileMemoryStore,
    sync: TeamSync,
}

async fn machine(schema: &TestSchema, sub: &str) -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let local = FileMemoryStore::open(dir.path().join(sub)).unwrap();
    let team = schema.open("acme/api").await;
    Machine {
        sync: TeamSync::new(local.clone(), team),
        local,
        _dir: dir,
    }
}

const PULL: SyncOptions = SyncOptions { prune: false };
const PRUNE: SyncOptions = SyncOptions { prune: true };

#[tokio::test]
async fn push_then_pull_moves_only_changed_entries() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "team").await;
    let bob = machine(&schema, "memory").await;
    alice
        .local
        .write(
            "deploy.md",
            &doc("Deploys", "Tuesdays."),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    alice
        .local
        .write(
            "ci.md",
            &doc("CI", "Retry flaky jobs once."),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();

    let status = alice.sync.status().await.unwrap();
    assert_eq!(
        status.in_state(EntryState::LocalChanged),
        vec!["ci.md", "deploy.md"]
    );
    let pushed = alice.sync.push(PULL).await.unwrap();
    assert_eq!(
        pushed.count(|a| matches!(a, SyncAction::Pushed { version: 1 })),
        2
    );
    // Nothing changed: nothing moves.
    assert!(alice.sync.push(PULL).await.unwrap().items.is_empty());
    assert!(alice.sync.status().await.unwrap().items.is_empty());

    let pulled = bob.sync.pull(PULL).await.unwrap();
    assert_eq!(pulled.count(|a| matches!(a, SyncAction::Pulled { .. })), 2);
    assert_eq!(
        bob.local.read("deploy.md").await.unwrap().body,
        "Tuesdays.\n"
    );
    assert!(
        bob.local
            .load_index()
            .await
            .unwrap()
            .content
            .contains("](ci.md)")
    );
    assert!(bob.sync.status().await.unwrap().items.is_empty());

    // Alice edits one entry: only that one moves.
    alice
        .local
        .write(
            "ci.md",
            &doc("CI", "Retry flaky jobs twice."),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let pushed = alice.sync.push(PULL).await.unwrap();
    assert_eq!(pushed.items.len(), 1);
    assert_eq!(pushed.items[0].action, SyncAction::Pushed { version: 2 });
    let pulled = bob.sync.pull(PULL).await.unwrap();
    assert_eq!(pulled.items.len(), 1);
    assert_eq!(pulled.items[0].rel_path, "ci.md");
    assert_eq!(
        bob.local.read("ci.md").await.unwrap().body,
        "Retry flaky jobs twice.\n"
    );
}

#[tokio::test]
async fn server_wins_on_pull_and_the_local_edit_is_kept_in_a_recovery_file() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "m").await;
    let bob = machine(&schema, "m").await;
    alice
        .local
        .write("rules.md", &doc("Rules", "v1"), WriteMode::Overwrite)
        .await
        .unwrap();
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();

    alice
        .local
        .write("rules.md", &doc("Rules", "alice v2"), WriteMode::Overwrite)
        .await
        .unwrap();
    alice.sync.push(PULL).await.unwrap();
    bob.local
        .write("rules.md", &doc("Rules", "bob v2"), WriteMode::Overwrite)
        .await
        .unwrap();

    // Bob's push is refused (the server changed since his last sync); nothing is overwritten.
    let status = bob.sync.status().await.unwrap();
    assert_eq!(status.in_state(EntryState::Conflict), vec!["rules.md"]);
    let push = bob.sync.push(PULL).await.unwrap();
    assert_eq!(push.conflicts(), 1);
    assert_eq!(alice.sync.status().await.unwrap().items.len(), 0);

    // Bob pulls: the server's version wins, his text is in the recovery file.
    let pull = bob.sync.pull(PULL).await.unwrap();
    let SyncAction::Conflict {
        recovery: Some(path),
        ..
    } = &pull.items[0].action
    else {
        panic!("{pull:?}");
    };
    assert!(std::fs::read_to_string(path).unwrap().contains("bob v2"));
    assert_eq!(bob.local.read("rules.md").await.unwrap().body, "alice v2\n");
    // The recovery file is not a memory.
    assert_eq!(bob.local.scan().await.unwrap().len(), 1);
    assert!(bob.sync.status().await.unwrap().items.is_empty());
}

#[tokio::test]
async fn deletions_move_only_with_prune() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "m").await;
    let bob = machine(&schema, "m").await;
    for n in ["a.md", "b.md"] {
        alice
            .local
            .write(n, &doc(n, "x"), WriteMode::Overwrite)
            .await
            .unwrap();
    }
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();

    alice.local.delete("a.md").await.unwrap();
    let push = alice.sync.push(PULL).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::DeletionSkipped);
    assert!(
        bob.sync.status().await.unwrap().items.is_empty(),
        "server untouched"
    );
    let push = alice.sync.push(PRUNE).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::DeletedRemote);

    let pull = bob.sync.pull(PULL).await.unwrap();
    assert_eq!(pull.items[0].state, EntryState::DeletedOnServer);
    assert_eq!(pull.items[0].action, SyncAction::DeletionSkipped);
    assert!(bob.local.read("a.md").await.is_ok());
    let pull = bob.sync.pull(PRUNE).await.unwrap();
    assert_eq!(pull.items[0].action, SyncAction::DeletedLocal);
    assert!(bob.local.read("a.md").await.is_err());
    assert_eq!(bob.local.scan().await.unwrap().len(), 1);
}

#[tokio::test]
async fn secrets_never_leave_the_machine() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "m").await;
    // Written by hand (not through the store, which would refuse it).
    std::fs::write(
        alice.local.root().join("ops.md"),
        "---\nname: Ops\ndescription: db\ntype: project\n---\n\nprod password = hunter22xyz\n",
    )
    .unwrap();
    alice
        .local
        .write("ok.md", &doc("Ok", "fine"), WriteMode::Overwrite)
        .await
        .unwrap();
    let push = alice.sync.push(PULL).await.unwrap();
    let ops = push.items.iter().find(|i| i.rel_path == "ops.md").unwrap();
    assert_eq!(ops.state, EntryState::Secret);
    assert!(
        matches!(&ops.action, SyncAction::SecretRefused { pattern } if !pattern.contains("hunter"))
    );
    let team = schema.open("acme/api").await;
    let names: Vec<String> = team
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.rel_path)
        .collect();
    assert_eq!(names, vec!["ok.md".to_owned()]);
}

/// A pull killed between writing a memory and its index line leaves the file without its
/// `MEMORY.md` line; the next pull puts the line back (pulls converge), and keeps the file's
/// bytes and its unknown frontmatter.
#[tokio::test]
async fn a_later_pull_restores_a_missing_index_line() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let bob = machine(&schema, "memory").await;
    for (rel, name) in [("deploy.md", "部署"), ("ci.md", "CI")] {
        alice
            .local
            .write(rel, &doc(name, "正文。"), WriteMode::Overwrite)
            .await
            .unwrap();
    }
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();
    let index = bob.local.root().join("MEMORY.md");
    let full = std::fs::read_to_string(&index).unwrap();
    assert!(
        full.contains("deploy.md") && full.contains("ci.md"),
        "{full}"
    );

    // The kill: deploy.md is on disk, its line is not.
    let cut: String = full
        .lines()
        .filter(|l| !l.contains("deploy.md"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&index, cut).unwrap();
    let before = std::fs::read(bob.local.root().join("deploy.md")).unwrap();

    bob.sync.pull(PULL).await.unwrap();
    let repaired = std::fs::read_to_string(&index).unwrap();
    assert!(repaired.contains("deploy.md"), "{repaired}");
    assert!(repaired.contains("部署"), "{repaired}");
    assert_eq!(
        repaired.matches("ci.md").count(),
        1,
        "the other line is not duplicated: {repaired}"
    );
    let after = std::fs::read(bob.local.root().join("deploy.md")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&after),
        String::from_utf8_lossy(&before),
        "the memory itself is unchanged"
    );
}
