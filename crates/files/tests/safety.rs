//! Storage safety: containment gate, names, atomic writes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)] // test helpers

use memloop_files::ContainmentGate;
use memloop_store::{MemoryError, topic_to_rel_path, validate_rel_path};
use std::path::Path;
use tempfile::TempDir;

fn gate() -> (TempDir, ContainmentGate) {
    let d = TempDir::new().unwrap();
    let mem = d.path().join("mem");
    std::fs::create_dir_all(&mem).unwrap();
    let g = ContainmentGate::new(&mem).unwrap();
    (d, g)
}

#[test]
fn containment_accepts_inside_and_refuses_escapes() {
    let (d, g) = gate();
    let root = g.root().to_path_buf();
    assert_eq!(g.check(Path::new("a.md")).unwrap(), root.join("a.md"));
    assert_eq!(
        g.check(Path::new("new/dir/a.md")).unwrap(),
        root.join("new/dir/a.md")
    );
    assert_eq!(g.check(&root.join("x/../b.md")).unwrap(), root.join("b.md"));
    for bad in ["../a.md", "x/../../a.md", "/etc/passwd", "", ".", "a\0b.md"] {
        assert!(
            matches!(
                g.check(Path::new(bad)),
                Err(MemoryError::OutsideMemoryDir { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(
        g.check(&root).is_err(),
        "the dir itself is not a file inside it"
    );
    // A sibling sharing the prefix is outside: root + separator.
    let sibling = d.path().join("mem-evil/a.md");
    assert!(g.check(&sibling).is_err());
}

#[cfg(unix)]
#[test]
fn symlinks_escaping_the_dir_are_refused() {
    use std::os::unix::fs::symlink;
    let (d, g) = gate();
    let root = g.root().to_path_buf();
    let outside = d.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    symlink(&outside, root.join("escape")).unwrap();
    symlink(outside.join("f.md"), root.join("dangling.md")).unwrap();
    std::fs::write(outside.join("real.md"), "x").unwrap();
    symlink(outside.join("real.md"), root.join("file-link.md")).unwrap();
    symlink(root.join("inner"), root.join("inner-link")).unwrap();
    std::fs::create_dir_all(root.join("inner")).unwrap();
    assert!(g.check(Path::new("escape/a.md")).is_err());
    assert!(g.check(Path::new("escape/new/deeper.md")).is_err());
    assert!(g.check(Path::new("dangling.md")).is_err());
    assert!(g.check(Path::new("file-link.md")).is_err());
    assert_eq!(
        g.check(Path::new("inner-link/ok.md")).unwrap(),
        root.join("inner/ok.md")
    );
    // The gate as a closure for WriteScopeGate.
    let f = g.as_contains_fn();
    assert!(f(&root.join("ok.md")).is_ok());
    let msg = f(&root.join("escape/x.md")).unwrap_err();
    assert!(msg.contains("outside the memory directory"), "{msg}");
}

/// An ancestor of the memory dir swapped for a link to another tree after the gate was made:
/// the dir's path now reaches another directory, and nothing is inside any more (a path with
/// no link below the dir is answered without resolving it from `/` only while the dir's path
/// reaches the directory the gate was made for).
#[cfg(unix)]
#[test]
fn an_ancestor_swapped_for_a_link_is_noticed() {
    let d = TempDir::new().unwrap();
    let mem = d.path().join("a/mem");
    std::fs::create_dir_all(&mem).unwrap();
    std::fs::create_dir_all(mem.join("notes")).unwrap();
    let g = ContainmentGate::new(&mem).unwrap();
    let root = g.root().to_path_buf();
    assert_eq!(
        g.check(Path::new("notes/a.md")).unwrap(),
        root.join("notes/a.md")
    );
    let elsewhere = d.path().join("b/mem/notes");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::rename(d.path().join("a"), d.path().join("a-old")).unwrap();
    std::os::unix::fs::symlink(d.path().join("b"), d.path().join("a")).unwrap();
    for rel in ["notes/a.md", "new.md", "new/dir/a.md"] {
        assert!(
            matches!(
                g.check(Path::new(rel)),
                Err(MemoryError::OutsideMemoryDir { .. })
            ),
            "{rel}"
        );
    }
    // Swapped back, the dir is reached again.
    std::fs::remove_file(d.path().join("a")).unwrap();
    std::fs::rename(d.path().join("a-old"), d.path().join("a")).unwrap();
    assert_eq!(g.check(Path::new("new.md")).unwrap(), root.join("new.md"));
}

#[cfg(unix)]
#[test]
fn memory_dir_reached_through_a_symlink_still_works() {
    let (d, g) = gate();
    let alias = d.path().join("alias");
    std::os::unix::fs::symlink(g.root(), &alias).unwrap();
    let g2 = ContainmentGate::new(&alias).unwrap();
    assert_eq!(g2.root(), g.root());
    assert!(g2.check(&alias.join("a.md")).is_ok());
}

#[test]
fn topic_and_path_validation() {
    for bad in [
        "",
        " ",
        "..",
        "a..b",
        "../x",
        "a/b",
        "a\\b",
        "nul\0",
        ".env",
        "\n",
        &"x".repeat(201),
    ] {
        assert!(topic_to_rel_path(bad).is_err(), "{bad:?}");
    }
    assert_eq!(topic_to_rel_path("user_role").unwrap(), "user_role.md");
    assert_eq!(topic_to_rel_path("user_role.md").unwrap(), "user_role.md");
    assert!(topic_to_rel_path("MEMORY").is_err());
    assert!(topic_to_rel_path("memory.md").is_err());
    assert!(validate_rel_path("feedback/testing.md").is_ok());
    for bad in [
        "/abs.md",
        "a//b.md",
        "../a.md",
        "a/../b.md",
        ".x/a.md",
        "a.txt",
        "MEMORY.md",
        "sub/MEMORY.md",
        "a\\b.md",
    ] {
        assert!(validate_rel_path(bad).is_err(), "{bad:?}");
    }
    let msg = topic_to_rel_path("a\0b").unwrap_err().to_string();
    assert!(!msg.contains('\0'), "NUL is escaped in the message");
}

#[test]
fn asking_whether_a_path_is_contained_logs_nothing_refusing_a_write_warns() {
    let (_d, g) = gate();
    let store = memloop_files::FileMemoryStore::open(g.root()).unwrap();
    let outside = Path::new("/somewhere/else/src/main.rs");
    let warnings = memloop_testkit::Warnings::default();
    warnings.capture(|| {
        assert!(!g.contains(outside));
        assert!(g.contains(Path::new("notes.md")));
        assert!(g.check(outside).is_err());
        assert!(memloop_store::MemoryStore::check_contained(&store, "../else/main.md").is_err());
        let dyn_store: &dyn memloop_store::MemoryStore = &store;
        assert!(dyn_store.memory_path_of(outside).is_err());
    });
    assert_eq!(
        warnings.messages(),
        Vec::<String>::new(),
        "questions are quiet"
    );

    warnings.capture(|| {
        assert!(g.check_write(outside).is_err());
        assert!((g.as_contains_fn())(outside).is_err());
        assert!((g.as_contains_fn())(Path::new("notes.md")).is_ok());
    });
    assert_eq!(
        warnings.messages(),
        vec!["write refused: outside the memory dir".to_owned(); 2]
    );
}
