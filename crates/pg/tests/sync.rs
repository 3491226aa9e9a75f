//! `TeamSync` between real memory dirs (tempdirs) and the machine's PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{EntryState, SyncAction, SyncOptions};
use memloop_store::{MemoryDoc, MemoryStore, WriteMode};
use support::{TestSchema, sync_doc as doc, sync_machine as machine};

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
    assert_eq!(support::rel_paths(&team).await, vec!["ok.md".to_owned()]);
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

/// A memory file as Claude Code writes it: a `metadata:` block, `tags:`, a comment, values in
/// Chinese, Japanese, Korean and Russian, a body with trailing spaces, blank lines at the end
/// and no final newline.
const CLAUDE_FILE: &str = "---\nname: 部署の決定\ndescription: \"デプロイ: 火曜日のみ\"\n# 由 Claude Code 写入\ntags: [部署, デプロイ, 배포, развёртывание]\nmetadata:\n  type: project\n  author: 王小明\n  note: 'Не трогать по пятницам'\n---\n\n只在周二部署。  \nДеплой только по вторникам.\n\n배포는 화요일에만.\n\n\nend without newline";

/// Another: an unknown `type:` value, CRLF line ends, a BOM.
const CRLF_FILE: &str = "\u{feff}---\r\nname: 決定\r\ndescription: 一覧\r\ntype: decision\r\npriority: 高\r\n---\r\n\r\nЗаписано.\r\n";

#[tokio::test]
async fn unknown_frontmatter_and_the_body_travel_byte_for_byte() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let bob = machine(&schema, "memory").await;
    // Written by Claude Code, not through memloop.
    std::fs::write(alice.local.root().join("decisions.md"), CLAUDE_FILE).unwrap();
    std::fs::write(alice.local.root().join("list.md"), CRLF_FILE).unwrap();
    let pushed = alice.sync.push(PULL).await.unwrap();
    assert_eq!(
        pushed.count(|a| matches!(a, SyncAction::Pushed { version: 1 })),
        2,
        "{pushed:?}"
    );

    // The row keeps the file as written; its canonical content keeps every key too.
    let team = schema.open("acme/api").await;
    let row = team.get("decisions.md").await.unwrap().unwrap();
    assert_eq!(row.source, CLAUDE_FILE);
    for key in ["tags:", "metadata:", "王小明", "배포", "развёртывание"] {
        assert!(row.content.contains(key), "{key} missing: {}", row.content);
    }
    let row = team.get("list.md").await.unwrap().unwrap();
    assert_eq!(row.source, CRLF_FILE);
    assert!(row.content.contains("type: decision"), "{}", row.content);

    let pulled = bob.sync.pull(PULL).await.unwrap();
    assert_eq!(pulled.count(|a| matches!(a, SyncAction::Pulled { .. })), 2);
    for (rel, text) in [("decisions.md", CLAUDE_FILE), ("list.md", CRLF_FILE)] {
        assert_eq!(
            std::fs::read(bob.local.root().join(rel)).unwrap(),
            text.as_bytes(),
            "{rel} arrives byte for byte"
        );
    }
    // The teammate's copy is indexed like any pulled memory.
    let index = std::fs::read_to_string(bob.local.root().join("MEMORY.md")).unwrap();
    assert!(
        index.contains("部署の決定") && index.contains("list.md"),
        "{index}"
    );
    assert!(bob.sync.status().await.unwrap().items.is_empty());
    assert!(alice.sync.status().await.unwrap().items.is_empty());

    // A formatting-only difference is no change: the comment gone, a value quoted, keys
    // reordered.
    let reformatted = CLAUDE_FILE
        .replace("# 由 Claude Code 写入\n", "")
        .replace("name: 部署の決定\n", "")
        .replace("  author: 王小明\n", "  author: \"王小明\"\n")
        .replace(
            "  note: 'Не трогать по пятницам'\n",
            "  note: \"Не трогать по пятницам\"\nname: '部署の決定'\n",
        );
    std::fs::write(alice.local.root().join("decisions.md"), &reformatted).unwrap();
    assert!(alice.sync.status().await.unwrap().items.is_empty());
    // A changed unknown key is a change.
    let retagged = CLAUDE_FILE.replace("배포, ", "");
    std::fs::write(alice.local.root().join("decisions.md"), &retagged).unwrap();
    assert_eq!(
        alice
            .sync
            .status()
            .await
            .unwrap()
            .in_state(EntryState::LocalChanged),
        vec!["decisions.md"]
    );
    std::fs::write(alice.local.root().join("decisions.md"), CLAUDE_FILE).unwrap();
    assert!(alice.sync.status().await.unwrap().items.is_empty());
}

#[tokio::test]
async fn a_teammates_body_edit_keeps_the_authors_unknown_keys() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let bob = machine(&schema, "memory").await;
    std::fs::write(alice.local.root().join("decisions.md"), CLAUDE_FILE).unwrap();
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();

    // Bob edits the body in his editor; the frontmatter is untouched.
    let edited = CLAUDE_FILE.replace("只在周二部署。", "周二和周四部署。");
    std::fs::write(bob.local.root().join("decisions.md"), &edited).unwrap();
    let push = bob.sync.push(PULL).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::Pushed { version: 2 });
    // And Bob appends through memloop (the library's own write keeps the keys too).
    let append = MemoryDoc {
        name: String::new(),
        description: String::new(),
        memory_type: None,
        body: "追記: 금요일 금지.\n".into(),
    };
    bob.local
        .write("decisions.md", &append, WriteMode::Append)
        .await
        .unwrap();
    let appended = std::fs::read_to_string(bob.local.root().join("decisions.md")).unwrap();
    let push = bob.sync.push(PULL).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::Pushed { version: 3 });

    let pull = alice.sync.pull(PULL).await.unwrap();
    assert_eq!(pull.items[0].action, SyncAction::Pulled { version: 3 });
    let mine = std::fs::read_to_string(alice.local.root().join("decisions.md")).unwrap();
    assert_eq!(mine, appended);
    for kept in [
        "tags: [部署, デプロイ, 배포, развёртывание]",
        "  author: 王小明",
        "# 由 Claude Code 写入",
    ] {
        assert!(mine.contains(kept), "{kept} lost: {mine}");
    }
    assert!(mine.contains("周二和周四部署。") && mine.contains("금요일 금지"));
    assert!(
        !alice.local.root().join(memloop_pg::CONFLICT_DIR).exists(),
        "no conflict: nothing of Alice's was overwritten"
    );
}

#[tokio::test]
async fn a_secret_in_an_unknown_key_never_leaves_the_machine() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let token = format!("ghp_{}", "a1B2c3D4".repeat(5));
    let text = format!(
        "---\nname: 部署\ndescription: デプロイ\nmetadata:\n  type: project\n  token: {token}\n---\n\nТело без секретов.\n"
    );
    std::fs::write(alice.local.root().join("ops.md"), &text).unwrap();
    let push = alice.sync.push(PULL).await.unwrap();
    assert_eq!(push.items[0].state, EntryState::Secret);
    assert!(
        matches!(&push.items[0].action, SyncAction::SecretRefused { pattern } if pattern == "GitHub token")
    );
    let team = schema.open("acme/api").await;
    assert!(team.get("ops.md").await.unwrap().is_none());

    // The checked raw writes themselves refuse it, on both stores: no way around the filter.
    let err = team
        .write_versioned_raw("ops.md", &text, memloop_pg::Expected::Any)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            memloop_pg::StoreError::Memory(memloop_store::MemoryError::SensitiveData { .. })
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains(&token));
    let err = alice
        .local
        .write_raw_if("other.md", &text, &memloop_store::ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(
        matches!(err, memloop_store::MemoryError::SensitiveData { .. }),
        "{err:?}"
    );
    assert!(!alice.local.root().join("other.md").exists());
    // Path rules and the size cap apply to raw writes too.
    let err = team
        .write_versioned_raw("MEMORY.md", CLAUDE_FILE, memloop_pg::Expected::Any)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("MEMORY.md"), "{err}");
    let huge = format!("{CLAUDE_FILE}\n{}", "字".repeat(400_000));
    let err = team
        .write_versioned_raw("big.md", &huge, memloop_pg::Expected::Any)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            memloop_pg::StoreError::Memory(memloop_store::MemoryError::TooLarge { .. })
        ),
        "{err:?}"
    );
}

/// Another member pushed with `--prune` while Bob edited the entry: the edit is newer
/// information, so pull leaves it (even with prune) and one push re-creates it; then every side
/// is in sync.
#[tokio::test]
async fn a_pruned_entry_edited_locally_is_recreated_by_one_push() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let bob = machine(&schema, "memory").await;
    alice
        .local
        .write("runbook.md", &doc("手順", "Шаг 1."), WriteMode::Overwrite)
        .await
        .unwrap();
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();

    alice.local.delete("runbook.md").await.unwrap();
    let push = alice.sync.push(PRUNE).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::DeletedRemote);
    let path = bob.local.root().join("runbook.md");
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("Шаг 1.", "Шаг 1. 2단계: 재시작.");
    std::fs::write(&path, &edited).unwrap();

    let pull = bob.sync.pull(PRUNE).await.unwrap();
    assert_eq!(pull.items.len(), 1);
    assert_eq!(pull.items[0].state, EntryState::LocalChanged);
    assert_eq!(pull.items[0].action, SyncAction::None);
    assert_eq!(pull.conflicts(), 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);

    let push = bob.sync.push(PULL).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::Pushed { version: 1 });
    assert!(bob.sync.pull(PULL).await.unwrap().items.is_empty());
    assert!(bob.sync.push(PULL).await.unwrap().items.is_empty());

    let pull = alice.sync.pull(PULL).await.unwrap();
    assert_eq!(pull.items[0].action, SyncAction::Pulled { version: 1 });
    assert_eq!(
        std::fs::read_to_string(alice.local.root().join("runbook.md")).unwrap(),
        edited
    );
    assert!(alice.sync.status().await.unwrap().items.is_empty());
}

/// The same, pushing straight away (no pull first): one push ends it.
#[tokio::test]
async fn a_pruned_entry_edited_locally_needs_no_pull_first() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let bob = machine(&schema, "memory").await;
    alice
        .local
        .write("runbook.md", &doc("手順", "Шаг 1."), WriteMode::Overwrite)
        .await
        .unwrap();
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();
    alice.local.delete("runbook.md").await.unwrap();
    alice.sync.push(PRUNE).await.unwrap();
    bob.local
        .write(
            "runbook.md",
            &doc("手順", "新しい手順。"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(
        bob.sync
            .status()
            .await
            .unwrap()
            .in_state(EntryState::LocalChanged),
        vec!["runbook.md"]
    );
    let push = bob.sync.push(PULL).await.unwrap();
    assert_eq!(push.items[0].action, SyncAction::Pushed { version: 1 });
    assert!(bob.sync.status().await.unwrap().items.is_empty());
}

/// Rows written before the `source` column existed (NULL there) are pulled as their content.
#[tokio::test]
async fn rows_from_before_the_source_column_pull_their_content() {
    let schema = TestSchema::new();
    let alice = machine(&schema, "memory").await;
    let bob = machine(&schema, "memory").await;
    alice
        .local
        .write("old.md", &doc("旧い", "Старое."), WriteMode::Overwrite)
        .await
        .unwrap();
    alice.sync.push(PULL).await.unwrap();
    support::admin()
        .await
        .execute(
            &format!("UPDATE {}.memloop_memories SET source = NULL", schema.name),
            &[],
        )
        .await
        .unwrap();
    let row = schema
        .open("acme/api")
        .await
        .get("old.md")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.source, row.content);
    bob.sync.pull(PULL).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(bob.local.root().join("old.md")).unwrap(),
        row.content
    );
    assert!(bob.sync.status().await.unwrap().items.is_empty());
}
