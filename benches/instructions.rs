//! Project-instruction loading: a 20-file tree (4 directory levels, rules, `@path` imports with
//! nesting and a cycle) loaded end to end, and the prompt rendering of the result.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use memloop_instructions::{
    InstructionConfig, InstructionLoader, LoadOptions, render_instructions,
};
use std::hint::black_box;
use std::path::{Path, PathBuf};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// 20 files: 4 levels x (CLAUDE.md, .claude/CLAUDE.md, local), 3 rules (one conditional),
/// 5 imported docs (a chain of 3 plus a cycle back to the first).
fn build_tree(root: &Path) -> PathBuf {
    let body = "Keep functions small; prefer explicit error types. ".repeat(30);
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let mut dir = root.to_path_buf();
    for level in 0..4 {
        let imports = if level == 0 {
            "\n\n## References\n- @docs/a.md\n- @docs/b.md\n`@not/an/import.md`\n"
        } else {
            ""
        };
        write(
            &dir.join("CLAUDE.md"),
            &format!("# Level {level}\n{body}{imports}"),
        );
        write(
            &dir.join(".claude/CLAUDE.md"),
            &format!("Level {level} tools.\n{body}"),
        );
        write(
            &dir.join("CLAUDE.local.md"),
            &format!("Local {level}.\n{body}"),
        );
        dir.push(format!("l{}", level + 1));
    }
    write(
        &root.join(".claude/rules/style.md"),
        &format!("Style.\n{body}"),
    );
    write(
        &root.join(".claude/rules/tests.md"),
        &format!("Tests.\n{body}"),
    );
    write(
        &root.join(".claude/rules/rust.md"),
        &format!("---\npaths:\n  - \"src/**/*.rs\"\n---\nRust.\n{body}"),
    );
    write(&root.join("docs/a.md"), &format!("A. See @./c.md\n{body}"));
    write(&root.join("docs/b.md"), &format!("B.\n{body}"));
    write(&root.join("docs/c.md"), &format!("C. See @d.md\n{body}"));
    write(
        &root.join("docs/d.md"),
        &format!("D. Back to @a.md\n{body}"),
    );
    write(
        &root.join("docs/e.md"),
        &format!("E, never imported.\n{body}"),
    );
    root.join("l1/l2/l3")
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = build_tree(dir.path());
    let config = InstructionConfig::claude(&memloop::host::env::EnvVars::from_process())
        .with_project_root(dir.path())
        .with_managed_root(None)
        .with_user_base(None);
    let loader = InstructionLoader::new(config);
    let options = LoadOptions {
        touched_files: vec![dir.path().join("src/main.rs")],
        memory_index: None,
    };
    let loaded = loader.load(&cwd, &options).unwrap();
    assert_eq!(loaded.files.len(), 19, "tree has 19 loadable files");
    c.bench_function("instructions_load_20_files", |b| {
        b.iter(|| black_box(loader.load(black_box(&cwd), &options).unwrap()))
    });
    c.bench_function("instructions_render", |b| {
        b.iter(|| black_box(render_instructions(black_box(&loaded))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
