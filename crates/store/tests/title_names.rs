//! File names from free-form titles in any script (`title_file_stem`): readable, stable, and
//! one-to-one on titles.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_store::{title_file_stem, title_key, validate_rel_path};
use proptest::prelude::*;
use std::collections::HashMap;

/// Plain ASCII titles (letters, digits, spaces) keep the name they had before titles in other
/// scripts were handled.
#[test]
fn plain_ascii_titles_keep_their_names() {
    for (title, stem) in [
        ("Queue", "queue"),
        ("Deploy days", "deploy-days"),
        ("  Use   Postgres 16  ", "use-postgres-16"),
        ("ＤＢ choice", "db-choice"), // fullwidth letters are the ASCII title
    ] {
        assert_eq!(title_file_stem(title, "decision"), stem, "{title}");
    }
}

/// Titles differing only in ASCII punctuation are different titles, with different files; a
/// hostile title stays one readable segment.
#[test]
fn titles_differing_in_punctuation_get_different_names() {
    let titles = [
        "C++",
        "C#",
        "C",
        "Use Postgres!",
        "Use Postgres",
        "use-postgres",
    ];
    let stems: std::collections::HashSet<String> = titles
        .iter()
        .map(|t| title_file_stem(t, "knowledge"))
        .collect();
    assert_eq!(stems.len(), titles.len(), "{stems:?}");
    let hostile = title_file_stem("../../etc/passwd", "decision");
    assert!(hostile.starts_with("etc-passwd_"), "{hostile}");
    assert!(validate_rel_path(&format!("decisions/{hostile}.md")).is_ok());
    // Case and runs of spaces do not make another title.
    assert_eq!(
        title_file_stem("Use  POSTGRES!", "d"),
        title_file_stem("use postgres!", "d")
    );
}

/// The same title gives the same name on every run and machine: the hash is pinned here.
#[test]
fn names_are_stable_and_readable() {
    assert_eq!(
        title_file_stem("Использовать Postgres", "decision"),
        "ispolzovat-postgres_f25ea721"
    );
    assert_eq!(title_file_stem("🎉", "knowledge"), "tada_6146299c");
    assert!(title_file_stem("数据库", "knowledge").starts_with("shu-ju-ku_"));
    // No letter or digit at all: the fallback name with a hash.
    assert!(title_file_stem("???", "knowledge").starts_with("knowledge_"));
    assert_ne!(
        title_file_stem("???", "knowledge"),
        title_file_stem("!!!", "knowledge")
    );
    // Longer than 60 characters: cut, with a hash so two long titles sharing a prefix differ.
    let long_a = format!("{} alpha", "word ".repeat(20));
    let long_b = format!("{} beta", "word ".repeat(20));
    assert_ne!(
        title_file_stem(&long_a, "decision"),
        title_file_stem(&long_b, "decision")
    );
}

/// The collisions: titles differing only outside ASCII.
#[test]
fn titles_differing_outside_ascii_get_different_names() {
    let titles = [
        "Использовать Postgres",
        "Не использовать Postgres",
        "数据库",
        "缓存",
        "🎉",
        "🚀",
        "Café",
        "Cafe",
        "Cafè",
    ];
    let mut seen = HashMap::new();
    for t in titles {
        let stem = title_file_stem(t, "knowledge");
        assert!(
            seen.insert(stem.clone(), t).is_none(),
            "{t} and {:?} share {stem}",
            seen[&stem]
        );
    }
}

fn title() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{1,40}",
        "[a-zA-Z0-9 ,.!?-]{1,70}",
        "[а-яА-Я ]{1,20}",
        "[\u{4e00}-\u{4e40}]{1,6}",
        "[\u{1f300}-\u{1f320}]{1,3}",
        "[a-z]{1,8}[éèêüöçñ][a-z]{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// n titles that are different titles (different `title_key`) map to n different file
    /// names, each a valid memory path; the same title twice maps to one name.
    #[test]
    fn distinct_titles_map_to_distinct_files(titles in prop::collection::vec(title(), 1..40)) {
        let mut by_stem: HashMap<String, &str> = HashMap::new();
        for t in &titles {
            let stem = title_file_stem(t, "knowledge");
            prop_assert_eq!(&stem, &title_file_stem(t, "knowledge"));
            prop_assert!(validate_rel_path(&format!("knowledge/{stem}.md")).is_ok(), "{}", stem);
            if let Some(other) = by_stem.insert(stem.clone(), t) {
                prop_assert!(
                    title_key(other) == title_key(t),
                    "{:?} and {:?} share {}", other, t, stem
                );
            }
        }
    }
}
