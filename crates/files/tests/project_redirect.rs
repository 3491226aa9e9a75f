//! Settings a project ships may not move its memory out of the project, and opening a store to
//! read it never creates a file.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Some tests need Unix (symlinks, socket pairs) and are compiled out elsewhere, with their helpers.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

use memloop_files::FileMemoryStore;
use memloop_host::env::EnvVars;
use memloop_paths::{MemoryDirResolver, ResolutionRule};
use memloop_store::MemoryStore;
use std::path::{Path, PathBuf};

struct Dirs {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (home, project) = (base.join("home"), base.join("proj"));
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(project.join(".memloop")).unwrap();
    Dirs {
        _tmp: tmp,
        home,
        project,
    }
}

fn resolver(d: &Dirs, local: &str) -> MemoryDirResolver {
    std::fs::write(
        d.project.join(".memloop/settings.local.json"),
        serde_json::json!({ "memory_dir": local }).to_string(),
    )
    .unwrap();
    MemoryDirResolver::new(&d.project).env(EnvVars::from_pairs([(
        "HOME",
        d.home.to_string_lossy().into_owned(),
    )]))
}

#[cfg(unix)]
#[test]
fn a_project_redirect_outside_the_project_is_refused_unless_the_user_allows_it() {
    let d = dirs();
    let ssh = d.home.join(".ssh");
    std::os::unix::fs::symlink(&ssh, d.project.join("link")).unwrap();
    for bad in [
        "~/.ssh".to_owned(),
        ssh.to_string_lossy().into_owned(),
        d.project.join("link/mem").to_string_lossy().into_owned(),
        d.project
            .join("../home/.ssh")
            .to_string_lossy()
            .into_owned(),
    ] {
        let err = resolver(&d, &bad).resolve().unwrap_err().to_string();
        assert!(err.contains("outside the project"), "{bad}: {err}");
    }
    let inside = resolver(&d, &d.project.join("mem").to_string_lossy())
        .resolve()
        .unwrap();
    assert_eq!(inside.rule, ResolutionRule::LocalSettings);
    assert_eq!(inside.dir, d.project.join("mem"));

    std::fs::create_dir_all(d.home.join(".memloop")).unwrap();
    std::fs::write(
        d.home.join(".memloop/settings.json"),
        r#"{"allowed_memory_dirs": ["~/notes"]}"#,
    )
    .unwrap();
    let allowed = resolver(&d, "~/notes/proj").resolve().unwrap();
    assert_eq!(allowed.dir, d.home.join("notes/proj"));
    assert!(resolver(&d, "~/.ssh").resolve().is_err());
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walk(dir);
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(e.file_name().to_string_lossy().into_owned());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

#[tokio::test]
async fn opening_and_reading_a_store_creates_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mem");
    std::fs::create_dir_all(dir.join("notes")).unwrap();
    std::fs::write(dir.join("notes/a.md"), "---\nname: a\n---\nbody\n").unwrap();
    std::fs::write(dir.join("MEMORY.md"), "- [a](notes/a.md) — a\n").unwrap();
    let before = files(&dir);
    let store = FileMemoryStore::open(&dir).unwrap();
    let dyn_store: &dyn MemoryStore = &store;
    dyn_store.scan().await.unwrap();
    dyn_store.read("notes/a.md").await.unwrap();
    dyn_store.load_index().await.unwrap();
    dyn_store.index_entries().await.unwrap();
    assert_eq!(files(&dir), before);

    // A temp file left by a killed writer is still swept (under the lock).
    std::fs::write(dir.join("notes/.memloop-tmp-x"), "partial").unwrap();
    FileMemoryStore::open(&dir).unwrap();
    assert!(!dir.join("notes/.memloop-tmp-x").exists());
}
