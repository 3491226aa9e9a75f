//! A hand-written memory dir in Claude Code's format (tests/fixtures/claude_code: frontmatter
//! topic files plus a `MEMORY.md` index) is read completely and round-trips byte for byte.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)] // test helpers

use memloop_files::FileMemoryStore;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use pretty_assertions::assert_eq;
use std::collections::BTreeMap;
use std::path::Path;
use tempfile::TempDir;

fn fixture() -> (TempDir, FileMemoryStore) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude_code");
    let d = TempDir::new().unwrap();
    let dst = d.path().join("memory");
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let s = FileMemoryStore::open(&dst).unwrap();
    (d, s)
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .filter(|(n, _)| n != ".memloop.lock")
        .collect()
}

const CANONICAL: [&str; 4] = [
    "user_role.md",
    "feedback_testing.md",
    "project_release_freeze.md",
    "reference_linear.md",
];

#[tokio::test]
async fn every_memory_is_listed_with_its_type() {
    let (_d, s) = fixture();
    let mut got: Vec<(String, Option<MemoryType>, bool)> = s
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.rel_path, h.memory_type, h.description.is_some()))
        .collect();
    got.sort();
    use MemoryType::*;
    let expected = [
        ("feedback_terse.md", Some(Feedback), true),
        ("feedback_testing.md", Some(Feedback), true),
        ("notes.md", None, false),
        ("project_parser_ünïcode.md", Some(Project), true),
        ("project_release_freeze.md", Some(Project), true),
        ("reference_linear.md", Some(Reference), true),
        ("user_role.md", Some(User), true),
    ];
    assert_eq!(got, expected.map(|(p, t, d)| (p.to_owned(), t, d)));
    let entries = s.index_entries().await.unwrap();
    assert_eq!(entries.len(), 7);
    assert_eq!(entries[5].title, "Résumé parser");
    let loaded = s.load_index().await.unwrap();
    assert!(!loaded.truncated_by_lines && !loaded.truncated_by_bytes);
    assert!(loaded.content.starts_with("# Memory index"));
}

#[tokio::test]
async fn canonical_files_render_back_to_the_same_bytes() {
    let (_d, s) = fixture();
    let before = snapshot(s.root());
    for rel in CANONICAL {
        let f = s.read(rel).await.unwrap();
        let doc = MemoryDoc {
            name: f.header.name.clone().unwrap(),
            description: f.header.description.clone().unwrap(),
            memory_type: f.header.memory_type,
            body: f.body.clone(),
        };
        assert_eq!(doc.render(), f.raw, "{rel}");
        // Writing the same memory back changes no byte, of the file or of MEMORY.md.
        s.write(rel, &doc, WriteMode::Overwrite).await.unwrap();
    }
    assert_eq!(snapshot(s.root()), before);
}

#[tokio::test]
async fn writing_and_deleting_another_memory_leaves_the_rest_untouched() {
    let (_d, s) = fixture();
    let before = snapshot(s.root());
    let doc = MemoryDoc {
        name: "On-call".into(),
        description: "the user is on call the week of 2026-04-13".into(),
        memory_type: Some(MemoryType::Project),
        body: "Keep changes small that week.\n".into(),
    };
    s.write("project_oncall.md", &doc, WriteMode::Overwrite)
        .await
        .unwrap();
    let mid = snapshot(s.root());
    for (name, bytes) in &before {
        if name != "MEMORY.md" {
            assert_eq!(&mid[name], bytes, "{name} changed");
        }
    }
    let index = String::from_utf8(mid["MEMORY.md"].clone()).unwrap();
    assert_eq!(
        index,
        format!(
            "{}- [On-call](project_oncall.md) — the user is on call the week of 2026-04-13\n",
            String::from_utf8(before["MEMORY.md"].clone()).unwrap()
        )
    );
    s.delete("project_oncall.md").await.unwrap();
    assert_eq!(snapshot(s.root()), before);
}

#[tokio::test]
async fn appending_keeps_nested_metadata_bytes() {
    let (_d, s) = fixture();
    let before = snapshot(s.root());
    let add = MemoryDoc {
        body: "Also applies to commit messages.".into(),
        ..Default::default()
    };
    s.write("feedback_terse.md", &add, WriteMode::Append)
        .await
        .unwrap();
    let after = snapshot(s.root());
    let old = &before["feedback_terse.md"];
    assert_eq!(&after["feedback_terse.md"][..old.len()], &old[..]);
    assert_eq!(
        &after["feedback_terse.md"][old.len()..],
        b"\nAlso applies to commit messages.\n"
    );
    assert_eq!(
        after["MEMORY.md"], before["MEMORY.md"],
        "the index line was already right"
    );
    assert_eq!(
        s.read("feedback_terse.md")
            .await
            .unwrap()
            .header
            .memory_type,
        Some(MemoryType::Feedback)
    );
}
