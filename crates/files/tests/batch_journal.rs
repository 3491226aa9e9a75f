//! A batch journal is data, not authority: anyone who can write to the memory dir can plant
//! one. Its replay passes the rules of any write, all or nothing; a journal that breaks one, or
//! that cannot be read or parsed, is set aside with a warning, and the store opens and writes as
//! before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::{BATCH_JOURNAL, FileMemoryStore, REJECTED_BATCH_JOURNAL};
use memloop_store::{
    CheckedWrite, ExpectedVersion, MemoryDoc, MemoryStore, MemoryType, WriteLimits, WriteMode,
};
use memloop_testkit::Warnings;
use std::path::Path;

const OWNER: &str = ".memloop-owner";
const OWNER_TEXT: &str = "owner: the real one\n";

fn memory_text(title: &str, body: &str) -> String {
    MemoryDoc::new(
        title,
        "a memory of the journal",
        Some(MemoryType::Project),
        body,
    )
    .render()
}

fn journal(entries: &[(&str, &str)]) -> String {
    let entries: Vec<_> = entries
        .iter()
        .map(|(rel, text)| serde_json::json!({ "rel": rel, "text": text }))
        .collect();
    serde_json::json!({ "entries": entries }).to_string()
}

/// Every memory file under `dir` (relative, sorted; the indexes left out).
fn memories(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if e.path().extension().is_some_and(|x| x == "md")
                && e.file_name() != "MEMORY.md"
            {
                found.push(
                    e.path()
                        .strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    found.sort();
    found
}

/// A memory dir `<tmp>/memory` holding an owner record and the journal `plant` leaves.
fn dir_with(plant: impl FnOnce(&Path)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memory");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(OWNER), OWNER_TEXT).unwrap();
    plant(&dir);
    tmp
}

/// Open the store over the planted journal: it opens, the journal is set aside with a warning,
/// nothing of it was written (no memory, the owner record as it was), and a batch then lands.
fn rejected_at_open(tmp: &tempfile::TempDir) {
    let dir = tmp.path().join("memory");
    let warnings = Warnings::default();
    let store = warnings.capture(|| FileMemoryStore::open(&dir)).unwrap();
    assert!(
        warnings
            .messages()
            .iter()
            .any(|m| m.contains("batch journal that may not be replayed was set aside")),
        "{:?}",
        warnings.messages()
    );
    assert!(std::fs::symlink_metadata(dir.join(BATCH_JOURNAL)).is_err());
    assert!(std::fs::symlink_metadata(dir.join(REJECTED_BATCH_JOURNAL)).is_ok());
    assert_eq!(memories(tmp.path()), Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(dir.join(OWNER)).unwrap(),
        OWNER_TEXT
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let doc = MemoryDoc::new(
            "Déploiement",
            "les jours de déploiement",
            Some(MemoryType::Project),
            "Только по вторникам. 火曜日のみ。\n",
        );
        let w = CheckedWrite::check(
            "deploy.md",
            &doc,
            WriteMode::Overwrite,
            WriteLimits::default(),
        )
        .unwrap();
        store
            .write_checked_batch(vec![(w, ExpectedVersion::Any)])
            .await
            .unwrap();
        assert_eq!(store.scan().await.unwrap().len(), 1);
    });
    assert_eq!(memories(tmp.path()), ["memory/deploy.md"]);
    assert_eq!(
        std::fs::read_to_string(dir.join(OWNER)).unwrap(),
        OWNER_TEXT
    );
}

fn planted(text: String) -> impl FnOnce(&Path) {
    move |dir: &Path| std::fs::write(dir.join(BATCH_JOURNAL), text).unwrap()
}

#[test]
fn an_entry_outside_the_memory_dir_is_not_replayed() {
    rejected_at_open(&dir_with(planted(journal(&[(
        "../x.md",
        &memory_text("Escape", "outside\n"),
    )]))));
}

#[test]
fn an_entry_naming_an_internal_file_is_not_replayed() {
    for rel in [
        OWNER,
        ".memloop-owner.md",
        "MEMORY.md",
        ".hidden/x.md",
        "team/../x.md",
    ] {
        rejected_at_open(&dir_with(planted(journal(&[(
            rel,
            "owner: the attacker\n",
        )]))));
    }
}

#[test]
fn an_entry_over_the_size_limit_is_not_replayed() {
    let big = memory_text("Огромный", &"x".repeat(5 * 1024 * 1024));
    rejected_at_open(&dir_with(planted(journal(&[("big.md", &big)]))));
}

#[test]
fn an_entry_holding_a_credential_is_not_replayed() {
    let text = memory_text("AWS", "key: AKIAIOSFODNN7EXAMPLE\n");
    rejected_at_open(&dir_with(planted(journal(&[("aws.md", &text)]))));
}

#[test]
fn a_journal_that_is_no_journal_is_set_aside() {
    for text in [
        "{not json".to_owned(),
        "[]".to_owned(),
        // A JSON array serde would read as the journal's one field.
        serde_json::json!([[{ "rel": "a.md", "text": memory_text("A", "a\n") }]]).to_string(),
        r#"{"entries": 3}"#.to_owned(),
        r#"{"entries":[{"rel":"a.md"}]}"#.to_owned(),
    ] {
        rejected_at_open(&dir_with(planted(text)));
    }
    rejected_at_open(&dir_with(|dir: &Path| {
        std::fs::create_dir_all(dir.join(BATCH_JOURNAL).join("inside")).unwrap();
    }));
}

#[test]
fn one_bad_entry_and_nothing_of_the_journal_is_applied() {
    let good = memory_text("Хороший", "valid\n");
    let bad = memory_text("Bad", "key: AKIAIOSFODNN7EXAMPLE\n");
    rejected_at_open(&dir_with(planted(journal(&[
        ("good.md", &good),
        ("bad.md", &bad),
    ]))));
    // The same memory twice is no journal a batch writes either.
    rejected_at_open(&dir_with(planted(journal(&[
        ("good.md", &good),
        ("good.md", &good),
    ]))));
}

#[cfg(unix)]
#[test]
fn a_journal_that_is_a_link_is_set_aside_unread() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("journal.json");
    let valid = journal(&[("linked.md", &memory_text("Linked", "через ссылку\n"))]);
    std::fs::write(&target, &valid).unwrap();
    let tmp = dir_with(|dir: &Path| {
        std::os::unix::fs::symlink(&target, dir.join(BATCH_JOURNAL)).unwrap();
    });
    rejected_at_open(&tmp);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), valid);
}

#[test]
fn a_second_rejected_journal_replaces_the_first() {
    let tmp = dir_with(planted("{not json".into()));
    rejected_at_open(&tmp);
    let dir = tmp.path().join("memory");
    std::fs::remove_file(dir.join("deploy.md")).unwrap();
    std::fs::write(dir.join(BATCH_JOURNAL), "[]").unwrap();
    rejected_at_open(&tmp);
    assert_eq!(
        std::fs::read_to_string(dir.join(REJECTED_BATCH_JOURNAL)).unwrap(),
        "[]"
    );
}

#[tokio::test]
async fn a_journal_planted_while_the_store_is_open_does_not_block_the_next_batch() {
    let tmp = dir_with(|_| {});
    let dir = tmp.path().join("memory");
    let store = FileMemoryStore::open(&dir).unwrap();
    std::fs::write(
        dir.join(BATCH_JOURNAL),
        journal(&[("../x.md", &memory_text("Escape", "outside\n"))]),
    )
    .unwrap();
    let doc = MemoryDoc::new("Ok", "fine", Some(MemoryType::Project), "ok\n");
    let w =
        CheckedWrite::check("ok.md", &doc, WriteMode::Overwrite, WriteLimits::default()).unwrap();
    store
        .write_checked_batch(vec![(w, ExpectedVersion::Any)])
        .await
        .unwrap();
    assert_eq!(memories(tmp.path()), ["memory/ok.md"]);
}

#[test]
fn a_valid_journal_is_still_finished_whole() {
    let tmp = dir_with(planted(journal(&[
        ("a.md", &memory_text("Ä", "eins\n")),
        ("team/b.md", &memory_text("Б", "два\n")),
    ])));
    let dir = tmp.path().join("memory");
    let _store = FileMemoryStore::open(&dir).unwrap();
    assert!(!dir.join(BATCH_JOURNAL).exists());
    assert!(!dir.join(REJECTED_BATCH_JOURNAL).exists());
    assert_eq!(memories(tmp.path()), ["memory/a.md", "memory/team/b.md"]);
}
