//! `@path` imports on hand-made trees: cycles, depth, symlinks, containment, code, escapes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use memloop_instructions::{
    InstructionError, InstructionLoader, Instructions, LoadOptions, SkipReason,
};
use std::path::Path;
use support::{entries, entry, isolated, write};
use tempfile::TempDir;

fn load(root: &Path) -> Instructions {
    InstructionLoader::new(isolated(root))
        .load(root, &LoadOptions::default())
        .unwrap()
}

#[test]
fn cycles_load_each_file_once() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(&root.join("CLAUDE.md"), "top @a.md\n");
    write(&root.join("a.md"), "A imports @./b.md\n");
    write(
        &root.join("b.md"),
        "B imports @a.md and @../b.md and @./b.md\n",
    );
    let loaded = load(root);
    let names: Vec<_> = loaded
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap())
        .collect();
    assert_eq!(names, ["CLAUDE.md", "a.md", "b.md"]);
    let b_repeats = entries(&loaded.report, "b.md");
    // Loaded once; `@./b.md` from b.md is a repeat; `@../b.md` points outside the project.
    assert!(b_repeats[0].is_loaded());
    assert!(b_repeats.iter().skip(1).all(|e| !e.is_loaded()));
    assert_eq!(
        entry(&loaded.report, "a.md").depth,
        1,
        "the first a.md entry is the import from CLAUDE.md"
    );
    assert_eq!(
        entries(&loaded.report, "a.md")[1].skip_reason(),
        Some(&SkipReason::AlreadyLoaded)
    );
}

#[test]
fn depth_six_is_not_loaded() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(&root.join("CLAUDE.md"), "level 0 @d1.md\n");
    for level in 1..=6 {
        let next = level + 1;
        write(
            &root.join(format!("d{level}.md")),
            &format!("level {level} @d{next}.md\n"),
        );
    }
    let loaded = load(root);
    let depths: Vec<_> = loaded.files.iter().map(|f| f.depth).collect();
    assert_eq!(depths, [0, 1, 2, 3, 4, 5]);
    let six = entry(&loaded.report, "d6.md");
    assert_eq!(
        six.skip_reason(),
        Some(&SkipReason::TooDeep { depth: 6, max: 5 })
    );
    assert!(
        loaded
            .report
            .entries
            .iter()
            .all(|e| !e.path.ends_with("d7.md"))
    );
}

#[cfg(unix)]
#[test]
fn symlink_loops_are_safe() {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(
        &root.join("CLAUDE.md"),
        "@loop1.md @alias.md @real.md @dirloop/x.md\n",
    );
    symlink(root.join("loop2.md"), root.join("loop1.md")).unwrap();
    symlink(root.join("loop1.md"), root.join("loop2.md")).unwrap();
    write(
        &root.join("real.md"),
        "real, importing its alias @alias.md\n",
    );
    symlink(root.join("real.md"), root.join("alias.md")).unwrap();
    symlink(root, root.join("dirloop")).unwrap();
    let loaded = load(root);
    assert!(matches!(
        entry(&loaded.report, "loop1.md").skip_reason(),
        Some(SkipReason::Unreadable { .. })
    ));
    // alias.md and real.md are one file: loaded once (through the alias, which came first).
    assert!(entry(&loaded.report, "alias.md").is_loaded());
    assert_eq!(
        entry(&loaded.report, "real.md").skip_reason(),
        Some(&SkipReason::AlreadyLoaded)
    );
    assert_eq!(
        entry(&loaded.report, "dirloop/x.md").skip_reason(),
        Some(&SkipReason::Missing)
    );
    assert_eq!(loaded.files.len(), 2);
}

#[test]
fn escaping_the_project_needs_permission() {
    let outer = TempDir::new().unwrap();
    let root = outer.path().join("project");
    write(&outer.path().join("secret.md"), "outside text\n");
    write(&root.join("CLAUDE.md"), "@../secret.md\n");
    let refused = load(&root);
    let entry_ = entry(&refused.report, "secret.md");
    assert!(matches!(
        entry_.skip_reason(),
        Some(SkipReason::OutsideProject { .. })
    ));
    assert_eq!(refused.files.len(), 1);

    let allowed = InstructionLoader::new(isolated(&root).allow_outside_project(true))
        .load(&root, &LoadOptions::default())
        .unwrap();
    assert_eq!(allowed.files.len(), 2);
    assert_eq!(allowed.files[1].content, "outside text\n");
}

#[test]
fn code_html_comments_and_non_imports_are_ignored() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    for name in [
        "fenced", "indented", "span", "comment", "inline", "block", "real", "list",
    ] {
        write(&root.join(format!("{name}.md")), &format!("{name} body\n"));
    }
    write(
        &root.join("CLAUDE.md"),
        "# Title\n\nUse @real.md.\n\n- item @list.md\n\n```sh\ncat @fenced.md\n```\n\n    @indented.md\n\n\
         Run `@span.md` here.\n\n<!-- old: @comment.md -->\n\nText <span>@inline.md</span>\n\n<div>\n@block.md\n</div>\n\n\
         mail me@real.md, decorate @app.route and @pytest.mark.benchmark, see @types/node\n",
    );
    let loaded = load(root);
    let names: Vec<_> = loaded
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // `<span>@inline.md</span>`: `@` right after `>` does not start an import; `@block.md` sits
    // in an HTML block.
    assert_eq!(names, ["CLAUDE.md", "real.md", "list.md"]);
    // Only those two were considered as imports.
    assert_eq!(
        loaded
            .report
            .entries
            .iter()
            .filter(|e| e.depth == 1)
            .count(),
        2
    );
    // The block comment is stripped from the content, the code stays.
    let content = &loaded.files[0].content;
    assert!(!content.contains("old: @comment.md"));
    assert!(content.contains("cat @fenced.md"));
}

#[test]
fn escapes_fragments_home_absolute_and_non_text() {
    let dir = TempDir::new().unwrap();
    let home = TempDir::new().unwrap();
    let root = dir.path();
    write(&root.join("my notes.md"), "spaced\n");
    write(&home.path().join("prefs.md"), "home prefs\n");
    write(&root.join("sub/abs.txt"), "absolute\n");
    write(&root.join("img/logo.png"), "not really a png\n");
    std::fs::write(root.join("bad.md"), [0xff, 0xfe, b'x']).unwrap();
    let abs = root.join("sub/abs.txt");
    write(
        &root.join("CLAUDE.md"),
        &format!(
            "@my\\ notes.md#section\n@~/prefs.md\n@{}\n@img/logo.png\n@bad.md\n",
            abs.display()
        ),
    );
    let config = isolated(root).with_home_dir(Some(home.path().to_path_buf()));
    let loaded = InstructionLoader::new(config)
        .load(root, &LoadOptions::default())
        .unwrap();
    let contents: Vec<_> = loaded
        .files
        .iter()
        .skip(1)
        .map(|f| f.content.as_str())
        .collect();
    // `~/` files are user files outside the project: refused by default.
    assert_eq!(contents, ["spaced\n", "absolute\n"]);
    let r = &loaded.report;
    assert_eq!(
        entry(r, "my notes.md").reference.as_deref(),
        Some("my\\ notes.md#section")
    );
    assert!(matches!(
        entry(r, "prefs.md").skip_reason(),
        Some(SkipReason::OutsideProject { .. })
    ));
    assert_eq!(
        entry(r, "logo.png").skip_reason(),
        Some(&SkipReason::NotText {
            extension: "png".into()
        })
    );
    assert_eq!(
        entry(r, "bad.md").skip_reason(),
        Some(&SkipReason::InvalidUtf8)
    );
    assert_eq!(entry(r, "bad.md").bytes, 3);
}

#[test]
fn frontmatter_stripped_and_large_files_warned() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    let big = "x".repeat(50);
    write(
        &root.join("CLAUDE.md"),
        &format!("---\ntitle: t\n---\nBody {big}\n"),
    );
    let mut config = isolated(root);
    config.large_file_chars = 40;
    let loaded = InstructionLoader::new(config)
        .load(root, &LoadOptions::default())
        .unwrap();
    assert_eq!(loaded.files[0].content, format!("Body {big}\n"));
    let warnings = loaded.report.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("56 characters"), "{warnings:?}");
    assert_eq!(loaded.report.entries[0].bytes, 56);
}

#[test]
fn bad_working_dirs_are_typed_errors() {
    let dir = TempDir::new().unwrap();
    let root = dir.path().join("project");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let loader = InstructionLoader::new(isolated(&root));
    let err = loader
        .load(&elsewhere, &LoadOptions::default())
        .unwrap_err();
    assert!(matches!(err, InstructionError::OutsideRoot { .. }), "{err}");
    let err = loader
        .load(&root.join("missing"), &LoadOptions::default())
        .unwrap_err();
    assert!(matches!(err, InstructionError::Directory { .. }), "{err}");
    assert!(err.to_string().contains("missing"));
}

#[cfg(unix)]
#[test]
fn looping_symlink_at_a_standard_location_is_reported() {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    symlink(root.join("CLAUDE.local.md"), root.join("CLAUDE.md")).unwrap();
    symlink(root.join("CLAUDE.md"), root.join("CLAUDE.local.md")).unwrap();
    let loaded = load(root);
    assert!(loaded.files.is_empty());
    assert_eq!(loaded.report.skipped().count(), 2);
    assert!(
        loaded
            .report
            .skipped()
            .all(|e| matches!(e.skip_reason(), Some(SkipReason::Unreadable { .. })))
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_inside_the_project_cannot_smuggle_an_outside_file() {
    let outer = TempDir::new().unwrap();
    let root = outer.path().join("project");
    write(
        &outer.path().join("creds.yaml"),
        "token: not for the prompt\n",
    );
    write(&root.join("CLAUDE.md"), "@docs/config.yaml\n");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::os::unix::fs::symlink(
        outer.path().join("creds.yaml"),
        root.join("docs/config.yaml"),
    )
    .unwrap();
    let loaded = load(&root);
    assert_eq!(loaded.files.len(), 1);
    assert!(matches!(
        entry(&loaded.report, "docs/config.yaml").skip_reason(),
        Some(SkipReason::OutsideProject { .. })
    ));
}
