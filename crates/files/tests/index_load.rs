//! `load_index` on a memory dir reads the start of `MEMORY.md` its caps need, not the whole
//! file: what it loads and the truncation it reports are those of the whole index, at any
//! size.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_store::{IndexCaps, MemoryStore, load_capped};

fn lines(n: usize, hook: &str) -> String {
    (0..n)
        .map(|i| format!("- [Заметка {i}](notes/n{i}.md) — {hook} {i}\n"))
        .collect()
}

/// The loaded text without its warning line.
fn kept(content: &str) -> &str {
    content.split("\n\n> WARNING").next().unwrap_or_default()
}

#[tokio::test]
async fn a_large_index_loads_its_start_and_says_it_was_cut() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(dir.path()).unwrap();
    // 100,000 lines (about 6 MB): only the start is read, yet the line cap is known to fire.
    let text = format!("\n\n{}", lines(100_000, "крючок"));
    std::fs::write(dir.path().join("MEMORY.md"), &text).unwrap();
    let loaded = store.load_index().await.unwrap();
    let whole = load_capped(&text, IndexCaps::default());
    assert_eq!(kept(&loaded.content), kept(&whole.content));
    assert!(loaded.truncated_by_lines, "the line cap fired");
    assert_eq!(loaded.truncated_by_bytes, whole.truncated_by_bytes);
    // What was counted is the start, not the file.
    assert!(
        loaded.original_lines < 1_000 && loaded.original_bytes < 4 * 25_004,
        "{} lines, {} bytes read",
        loaded.original_lines,
        loaded.original_bytes
    );
    assert!(
        loaded
            .content
            .contains("MEMORY.md is over 200 lines (limit 200)")
    );
}

#[tokio::test]
async fn every_size_around_the_caps_loads_as_the_whole_index_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(dir.path()).unwrap();
    // Short and long lines, around the line cap and the byte cap, with whitespace around.
    let long = "очень длинное описание ".repeat(12);
    let cases = [
        String::new(),
        "   \n\n".to_owned(),
        lines(3, "h"),
        lines(200, "h"),
        lines(201, "h"),
        format!("{}\n\n   \n", lines(201, "h")),
        lines(80, &long),
        lines(150, &long),
        format!("{}{}", lines(90, &long), lines(130, "h")),
        format!("{}{}", lines(199, "h"), "x".repeat(60_000)),
        format!("{}{}\n", "  \n".repeat(40_000), lines(210, "h")),
    ];
    for (i, text) in cases.iter().enumerate() {
        std::fs::write(dir.path().join("MEMORY.md"), text).unwrap();
        let loaded = store.load_index().await.unwrap();
        let whole = load_capped(text, IndexCaps::default());
        assert_eq!(kept(&loaded.content), kept(&whole.content), "case {i}");
        assert_eq!(
            (loaded.truncated_by_lines, loaded.truncated_by_bytes),
            (whole.truncated_by_lines, whole.truncated_by_bytes),
            "case {i}"
        );
        if !whole.truncated_by_lines && !whole.truncated_by_bytes {
            assert_eq!(
                loaded, whole,
                "case {i}: an index under the caps is read whole"
            );
        }
    }
}
