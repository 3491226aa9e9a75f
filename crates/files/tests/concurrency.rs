//! Storage guarantees: concurrent writers (tokio tasks and OS processes) into one memory dir lose
//! no index line and leave no temp file; a writer killed mid-write leaves no torn file.
//!
//! Child processes are this test binary itself, run with `--exact <helper>` and an env var that
//! tells the helper what to do; without the env var the helpers return at once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)] // test helpers

use memloop_files::FileMemoryStore;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use tempfile::TempDir;

const WRITER_ENV: &str = "MEMLOOP_TEST_WRITER";
const CRASH_ENV: &str = "MEMLOOP_TEST_CRASH_WRITER";
const PER_WRITER: usize = 12;
const BIG: usize = 4 * 1024 * 1024;

fn doc(name: &str, body: String) -> MemoryDoc {
    MemoryDoc {
        name: name.into(),
        description: format!("memory {name}"),
        memory_type: Some(MemoryType::Project),
        body,
    }
}

fn child(helper: &str, env: (&str, String)) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", helper, "--nocapture", "--test-threads=1"])
        .env(env.0, env.1);
    c
}

/// Temp files of the store's atomic writes (hidden, so scans skip them).
const TEMP_PREFIX: &str = ".memloop-tmp-";

/// The files the index lines of `index` point at (`- [Title](file.md) — hook`).
fn index_files(index: &str) -> Vec<String> {
    index
        .lines()
        .filter(|l| l.starts_with("- ["))
        .filter_map(|l| Some(l.split_once("](")?.1.split_once(')')?.0.to_owned()))
        .collect()
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(TEMP_PREFIX))
        .collect()
}

/// Helper run in a child process: writes PER_WRITER memories named `proc<id>_<k>.md`.
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let (dir, id) = spec.split_once('|').unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = FileMemoryStore::open(dir).unwrap();
        for k in 0..PER_WRITER {
            let name = format!("proc{id}_{k}");
            store
                .write(
                    &format!("{name}.md"),
                    &doc(&name, format!("from process {id}\n")),
                    WriteMode::Overwrite,
                )
                .await
                .unwrap();
        }
    });
}

#[test]
fn tasks_and_processes_writing_at_once_lose_no_index_line() {
    const PROCS: usize = 4;
    const TASKS: usize = 16;
    let d = TempDir::new().unwrap();
    let dir = d.path().join("memory");
    let store = Arc::new(FileMemoryStore::open(&dir).unwrap());
    std::fs::write(
        dir.join("MEMORY.md"),
        "# Index\n\nHand-written prose that must survive.\n",
    )
    .unwrap();

    let mut children: Vec<_> = (0..PROCS)
        .map(|p| {
            child(
                "child_writer",
                (WRITER_ENV, format!("{}|{p}", dir.display())),
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
        let handles: Vec<_> = (0..TASKS)
            .map(|t| {
                let (store, barrier) = (store.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    for k in 0..PER_WRITER {
                        let name = format!("task{t}_{k}");
                        store
                            .write(
                                &format!("{name}.md"),
                                &doc(&name, format!("from task {t}\n")),
                                WriteMode::Overwrite,
                            )
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }

    let index = std::fs::read_to_string(dir.join("MEMORY.md")).unwrap();
    assert!(index.starts_with("# Index\n\nHand-written prose that must survive.\n"));
    let mut files: Vec<String> = index_files(&index);
    files.sort();
    let mut expected: Vec<String> = (0..TASKS)
        .flat_map(|t| (0..PER_WRITER).map(move |k| format!("task{t}_{k}.md")))
        .chain((0..PROCS).flat_map(|p| (0..PER_WRITER).map(move |k| format!("proc{p}_{k}.md"))))
        .collect();
    expected.sort();
    assert_eq!(files, expected, "every write has exactly one index line");
    for f in &expected {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(MemoryDoc::parse(&text, f).is_ok(), "{f} is complete");
    }
    assert_eq!(temp_files(&dir), Vec::<String>::new());
}

/// Helper run in a child process: rewrites `big.md` (4 MiB of one letter per round) forever,
/// printing READY after the first complete write. The parent kills it with SIGKILL.
#[test]
fn child_crash_writer() {
    let Ok(dir) = std::env::var(CRASH_ENV) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // 4 MiB bodies (a wide kill window) are over the default 1 MiB write cap: raise it.
        let config = memloop_files::StoreConfig {
            write: memloop_store::WriteLimits {
                max_text_bytes: 2 * BIG,
            },
            ..Default::default()
        };
        let store = FileMemoryStore::open(&dir).unwrap().with_config(config);
        for round in 0usize.. {
            let letter = char::from(b'a' + (round % 26) as u8);
            let body: String = std::iter::repeat_n(letter, BIG).collect();
            store
                .write("big.md", &doc("big", body), WriteMode::Overwrite)
                .await
                .unwrap();
            if round == 0 {
                println!("READY");
            }
        }
    });
}

#[test]
fn writer_killed_mid_write_leaves_no_torn_file() {
    let d = TempDir::new().unwrap();
    let dir = d.path().join("memory");
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = child("child_crash_writer", (CRASH_ENV, dir.display().to_string()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("READY") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child exited before its first write"
        );
    }
    // Aim the kill at a write in progress: wait (without sleeping) until a temp file exists.
    let mut seen = false;
    for _ in 0..1_000_000 {
        if !temp_files(&dir).is_empty() {
            seen = true;
            break;
        }
        std::thread::yield_now();
    }
    c.kill().unwrap(); // SIGKILL on unix: no destructors, no cleanup
    c.wait().unwrap();
    let left_behind = temp_files(&dir);
    eprintln!(
        "temp file seen before the kill: {seen}; left by the killed writer: {}",
        left_behind.len()
    );

    let text = std::fs::read_to_string(dir.join("big.md")).unwrap();
    let parsed = MemoryDoc::parse(&text, "big.md").unwrap();
    assert_eq!(parsed.name, "big");
    let body = parsed.body.strip_suffix('\n').unwrap();
    assert_eq!(body.len(), BIG, "the file is one complete version");
    let first = body.as_bytes()[0];
    assert!(body.bytes().all(|b| b == first), "no mix of two versions");
    let index = std::fs::read_to_string(dir.join("MEMORY.md")).unwrap();
    assert_eq!(index_files(&index).len(), 1);

    // Reopening sweeps what the killed writer left; scans never saw it anyway (hidden).
    let store = FileMemoryStore::open(&dir).unwrap();
    assert_eq!(temp_files(&dir), Vec::<String>::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(store.scan()).unwrap().len(), 1);
}
