//! The index through the store's public API: whatever sequence of writes, renames and deletes of
//! valid names (spaces, parentheses, angle brackets, nested dirs), MEMORY.md keeps exactly one
//! line per memory file and none for missing files, and the prose of a hand-written index (with
//! a byte-order mark) keeps its bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use proptest::prelude::*;
use std::collections::BTreeSet;

const NAMES: &[&str] = &[
    "testing prefs.md",
    "plain.md",
    "a)b.md",
    "x (draft).md",
    "we<ird>.md",
    "brack[et]s &amp; more.md",
    "notes/deep dive.md",
    "notes/plain.md",
];

const PROSE: &str =
    "\u{feff}# My memories\n\nSee [the docs](https://example.com/a b) first.\n\n## Topics\n";

#[derive(Debug, Clone)]
enum Op {
    Write(usize, bool),
    Rename(usize, usize),
    Delete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let n = NAMES.len();
    prop_oneof![
        3 => (0..n, any::<bool>()).prop_map(|(i, a)| Op::Write(i, a)),
        1 => (0..n, 0..n).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (0..n).prop_map(Op::Delete),
    ]
}

fn doc(i: usize) -> MemoryDoc {
    MemoryDoc::new(
        format!("Title {i}"),
        format!("hook {i}"),
        MemoryType::Project,
        "body\n",
    )
}

async fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("MEMORY.md"), PROSE).unwrap();
    let store = FileMemoryStore::open(dir.path()).unwrap();
    for (k, op) in ops.into_iter().enumerate() {
        // Errors (renaming onto an existing name, deleting a missing one) are fine; the
        // invariant must hold whatever happened.
        match op {
            Op::Write(i, append) => {
                let mode = if append {
                    WriteMode::Append
                } else {
                    WriteMode::Overwrite
                };
                store.write(NAMES[i], &doc(k), mode).await.unwrap();
            }
            Op::Rename(a, b) => {
                let _ = store.rename(NAMES[a], NAMES[b]).await;
            }
            Op::Delete(i) => {
                let _ = store.delete(NAMES[i]).await;
            }
        }
        let on_disk: BTreeSet<String> = store
            .scan()
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.rel_path)
            .collect();
        let entries: Vec<String> = store
            .index_entries()
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.file)
            .collect();
        let unique: BTreeSet<String> = entries.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            entries.len(),
            "duplicate index lines: {entries:?}"
        );
        assert_eq!(unique, on_disk, "index lines vs files");
        let text = std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap();
        assert!(
            text.starts_with(PROSE),
            "hand-written prose changed:\n{text}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn one_index_line_per_memory_file(ops in prop::collection::vec(op(), 1..25)) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(ops));
    }
}

/// The reported case: three edits of topic "testing prefs" leave one line, and deleting it
/// removes that line.
#[tokio::test]
async fn a_name_with_a_space_has_one_line_and_delete_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(dir.path()).unwrap();
    for k in 0..3 {
        store
            .write("testing prefs.md", &doc(k), WriteMode::Overwrite)
            .await
            .unwrap();
    }
    let text = std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap();
    assert_eq!(text, "- [Title 2](<testing prefs.md>) — hook 2\n");
    store.delete("testing prefs.md").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap(),
        ""
    );
}
