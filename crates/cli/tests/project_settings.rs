//! The CLI against a project that ships settings: a memory dir outside the project is refused
//! (nothing is written there), and `memory list` / `show` write nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(home: &Path, project: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memloop"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("MEMLOOP_HOME", home.join(".memloop"))
        .env("MEMLOOP_LOG", "warn")
        .env("EDITOR", "true")
        .current_dir(project)
        .args(args)
        .output()
        .unwrap()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
            out.push(e.path());
        }
    }
    out.sort();
    out
}

#[test]
fn a_project_cannot_point_its_memory_at_the_users_ssh_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (home, project) = (base.join("home"), base.join("proj"));
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(project.join(".memloop")).unwrap();
    std::fs::write(
        project.join(".memloop/settings.local.json"),
        r#"{"memory_dir": "~/.ssh"}"#,
    )
    .unwrap();
    for args in [
        &["memory", "edit", "note"][..],
        &["memory", "list"][..],
        &["memory", "path"][..],
    ] {
        let out = run(&home, &project, args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("outside the project"), "{args:?}: {err}");
    }
    assert!(files(&home.join(".ssh")).is_empty());
}

#[test]
fn list_and_show_create_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (home, project) = (base.join("home"), base.join("proj"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let mem = project.join("mem");
    std::fs::create_dir_all(mem.join("notes")).unwrap();
    std::fs::write(
        mem.join("notes/a.md"),
        "---\nname: a\ndescription: a\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(mem.join("MEMORY.md"), "- [a](notes/a.md) — a\n").unwrap();
    let before = files(&base);
    let dir = mem.to_string_lossy().into_owned();
    for args in [
        vec!["--memory-dir", dir.as_str(), "memory", "list"],
        vec!["--memory-dir", dir.as_str(), "memory", "show", "notes/a"],
    ] {
        let out = run(&home, &project, &args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(files(&base), before);
}
