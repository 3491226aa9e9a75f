//! `memloop team push|pull|status` and `--database-url`, end to end: the built binary, two memory
//! dirs standing for two machines, and the machine's PostgreSQL (a fresh schema per test,
//! dropped with `psql` when the test ends).
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;

#[path = "support/embeddings.rs"]
mod embeddings;
#[path = "support/pty.rs"]
mod pty;

use pty::{pty_available, script_args, shell_line};

struct Schema(String);

impl Schema {
    fn new() -> Self {
        let name = format!("memloop_cli_{}", std::process::id())
            + &format!(
                "_{}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            );
        psql(&format!("CREATE SCHEMA {name}"));
        Self(name)
    }

    fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port=5432 user=root dbname=test options='-c search_path={}'",
            self.0
        )
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        psql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
    }
}

fn psql(sql: &str) {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "root",
            "-d",
            "test",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn memloop(home: &Path, mem: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memloop"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("MEMLOOP_HOME", home.join("base"))
        .current_dir(home)
        .arg("--memory-dir")
        .arg(mem)
        .args(["--team-project", "acme/api"])
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn push_pull_status_between_two_machines() {
    let schema = Schema::new();
    let url = schema.url();
    let tmp = TempDir::new().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    std::fs::create_dir_all(&alice).unwrap();
    std::fs::write(
        alice.join("deploy.md"),
        "---\nname: Deploys\ndescription: when we deploy\ntype: project\n---\n\nTuesdays only.\n",
    )
    .unwrap();

    let out = memloop(
        tmp.path(),
        &alice,
        &["--database-url", &url, "team", "status"],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("local_changed"), "{}", stdout(&out));
    let out = memloop(
        tmp.path(),
        &alice,
        &["--database-url", &url, "--json", "team", "push"],
    );
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["items"][0]["action"]["action"], "pushed");

    let out = memloop(tmp.path(), &bob, &["--database-url", &url, "team", "pull"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(bob.join("deploy.md"))
            .unwrap()
            .contains("Tuesdays only.")
    );
    let out = memloop(
        tmp.path(),
        &bob,
        &["--database-url", &url, "team", "status"],
    );
    assert!(
        stdout(&out).contains("everything in sync"),
        "{}",
        stdout(&out)
    );

    // `memory` commands act on the team store with --database-url.
    let out = memloop(
        tmp.path(),
        &bob,
        &["--database-url", &url, "memory", "show", "deploy"],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("Tuesdays only."));
}

#[test]
fn a_down_server_or_a_missing_url_is_a_clear_error() {
    let tmp = TempDir::new().unwrap();
    let mem = tmp.path().join("mem");
    let out = memloop(tmp.path(), &mem, &["team", "status"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MEMLOOP_DATABASE_URL"));
    let out = memloop(
        tmp.path(),
        &mem,
        &[
            "--database-url",
            "host=127.0.0.1 port=1 user=root dbname=test",
            "memory",
            "list",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect to the team memory database"),
        "{err}"
    );
    assert!(err.contains("127.0.0.1:1"), "names the server: {err}");
}

/// `memory search --semantic --database-url`: semantic search over the PostgreSQL store, with
/// the vector cache in a real directory keyed by the store's identity
/// (`$HOME/.cache/memloop/vectors/<identity hash>/`), not beside an invented memory dir.
#[test]
fn semantic_search_over_the_database_caches_vectors_in_a_real_dir() {
    let schema = Schema::new();
    let url = schema.url();
    let tmp = TempDir::new().unwrap();
    let alice = tmp.path().join("alice");
    std::fs::create_dir_all(&alice).unwrap();
    std::fs::write(
        alice.join("deadline.md"),
        "---\nname: Release freeze\ndescription: mobile release freeze starts on Thursday\ntype: project\n---\n\nMerges after Thursday wait for the next cycle.\n",
    )
    .unwrap();
    std::fs::write(
        alice.join("testing.md"),
        "---\nname: Testing\ndescription: integration tests hit a real database\ntype: feedback\n---\n\nNever mock the database.\n",
    )
    .unwrap();
    let out = memloop(
        tmp.path(),
        &alice,
        &["--database-url", &url, "team", "push"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An empty local dir: the hits can only come from the database.
    let bob = tmp.path().join("bob");
    std::fs::create_dir_all(&bob).unwrap();
    let embed = embeddings::concept_embeddings_server();
    let args = [
        "--database-url",
        url.as_str(),
        "--json",
        "memory",
        "search",
        "when does shipping stop?",
        "--semantic",
        "--embed-url",
        embed.as_str(),
        "--embed-name",
        "concepts",
        "--limit",
        "1",
    ];
    let out = memloop(tmp.path(), &bob, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v[0]["path"], "deadline.md", "{v}");

    let vectors = tmp.path().join(".cache/memloop/vectors");
    let dirs: Vec<_> = std::fs::read_dir(&vectors)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let files: Vec<_> = std::fs::read_dir(&dirs[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "bin"));
    assert!(std::fs::metadata(&files[0]).unwrap().len() > 0);
    assert!(!tmp.path().join("bob.vectors").exists());
    assert!(!Path::new("/memloop-team").exists());

    // A second search reuses the same cache file (same identity, same model).
    let out = memloop(tmp.path(), &bob, &args);
    assert!(out.status.success());
    assert_eq!(std::fs::read_dir(&dirs[0]).unwrap().count(), 1);
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A push or pull that did not go through says so in its exit code and on stderr: conflicts
/// exit 7, failures (a body the secret filter keeps local, here a Chinese credential) exit 6,
/// with or without `--json`; a clean run exits 0.
#[test]
fn conflicts_and_failures_have_their_own_exit_codes() {
    let schema = Schema::new();
    let url = schema.url();
    let tmp = TempDir::new().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    std::fs::create_dir_all(&alice).unwrap();
    let memory = |text: &str| {
        format!("---\nname: 部署\ndescription: 什么时候部署\ntype: project\n---\n\n{text}\n")
    };
    std::fs::write(alice.join("deploy.md"), memory("每周二部署。")).unwrap();
    let team = |dir: &Path, args: &[&str]| {
        let mut all = vec!["--database-url", url.as_str()];
        all.extend_from_slice(args);
        memloop(tmp.path(), dir, &all)
    };
    assert!(team(&alice, &["team", "push"]).status.success());
    assert!(team(&bob, &["team", "pull"]).status.success());

    // Both edit the same memory; Alice pushes first, Bob's push conflicts.
    std::fs::write(alice.join("deploy.md"), memory("改成每周三部署。")).unwrap();
    assert!(team(&alice, &["team", "push"]).status.success());
    std::fs::write(bob.join("deploy.md"), memory("改成每周四部署。")).unwrap();
    let out = team(&bob, &["team", "push"]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert!(stderr(&out).contains("1 conflict(s)"), "{}", stderr(&out));
    let out = team(&bob, &["--json", "team", "push"]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        report["items"][0]["action"]["action"], "conflict",
        "{report}"
    );

    // A credential written in Chinese never leaves the machine, and the push says it failed.
    std::fs::write(
        alice.join("db.md"),
        "---\nname: 数据库\ndescription: 生产数据库\ntype: reference\n---\n\n生产数据库密码是 S3cr3tPass2024\n",
    )
    .unwrap();
    let out = team(&alice, &["team", "push"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert!(
        stderr(&out).contains("1 refused by the secret filter"),
        "{}",
        stderr(&out)
    );
    let out = team(&alice, &["--json", "team", "push"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert!(!stdout(&out).contains("S3cr3tPass2024"));
}

#[test]
fn team_sync_over_verified_tls_and_a_clear_refusal() {
    let snakeoil = Path::new("/etc/ssl/certs/ssl-cert-snakeoil.pem");
    if !snakeoil.exists() {
        memloop_testkit::skip_unless_ci(
            "/etc/ssl/certs/ssl-cert-snakeoil.pem is missing: the local PostgreSQL is expected \
             to serve TLS with Debian's snakeoil certificate",
        );
        return;
    }
    let schema = Schema::new();
    let tls = format!(
        "sslmode=verify-full sslrootcert='{}' password='Пароль密码'",
        snakeoil.display()
    );
    let good = schema.url().replace("host=127.0.0.1", "host=localhost") + " " + &tls;
    let tmp = TempDir::new().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    std::fs::create_dir_all(&alice).unwrap();
    std::fs::write(
        alice.join("db.md"),
        "---\nname: 主数据库\ndescription: 数据库的选择\ntype: project\n---\n\nМы используем PostgreSQL.\n",
    )
    .unwrap();
    let out = memloop(
        tmp.path(),
        &alice,
        &["--database-url", &good, "team", "push"],
    );
    assert!(out.status.success(), "{out:?}");
    let out = memloop(tmp.path(), &bob, &["--database-url", &good, "team", "pull"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(bob.join("db.md"))
            .unwrap()
            .contains("Мы используем PostgreSQL.")
    );
    // The certificate names localhost, not 127.0.0.1: refused, saying so, without the password.
    let wrong_host = schema.url() + " " + &tls;
    let out = memloop(
        tmp.path(),
        &bob,
        &["--database-url", &wrong_host, "team", "status"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not name the host `127.0.0.1`"), "{err}");
    assert!(!err.contains("Пароль"), "{err}");
}

/// End to end: a Claude Code file with `metadata:`/`tags:` reaches the teammate byte for byte;
/// the teammate edits it after the author pruned it from the server: pull exits 0 and keeps it,
/// one push re-creates it, and both sides are in sync. `--help` says so.
#[test]
fn files_travel_as_written_and_a_pruned_edit_is_recreated_by_one_push() {
    let schema = Schema::new();
    let url = schema.url();
    let tmp = TempDir::new().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    std::fs::create_dir_all(&alice).unwrap();
    let text = "---\nname: 部署\ndescription: デプロイの曜日\nmetadata:\n  type: project\n  owner: 김민수\ntags: [Деплой]\n---\n\n只在周二。\n";
    std::fs::write(alice.join("deploy.md"), text).unwrap();
    let run = |dir: &Path, args: &[&str]| {
        let mut all = vec!["--database-url", url.as_str(), "team"];
        all.extend_from_slice(args);
        memloop(tmp.path(), dir, &all)
    };
    assert!(run(&alice, &["push"]).status.success());
    assert!(run(&bob, &["pull"]).status.success());
    assert_eq!(
        std::fs::read_to_string(bob.join("deploy.md")).unwrap(),
        text
    );

    std::fs::remove_file(alice.join("deploy.md")).unwrap();
    assert!(run(&alice, &["push", "--prune"]).status.success());
    let edited = text.replace("只在周二。", "周二和周四。");
    std::fs::write(bob.join("deploy.md"), &edited).unwrap();
    let out = run(&bob, &["pull", "--prune"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout(&out).contains("CONFLICT"), "{}", stdout(&out));
    assert_eq!(
        std::fs::read_to_string(bob.join("deploy.md")).unwrap(),
        edited
    );
    let out = run(&bob, &["push"]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("pushed (v1)"), "{}", stdout(&out));
    for dir in [&bob, &alice] {
        let out = run(dir, &["pull"]);
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(
        std::fs::read_to_string(alice.join("deploy.md")).unwrap(),
        edited
    );
    for dir in [&bob, &alice] {
        assert!(stdout(&run(dir, &["status"])).contains("everything in sync"));
    }

    let help = stdout(&memloop(tmp.path(), &bob, &["team", "push", "--help"]));
    assert!(help.contains("re-created on the server"), "{help}");
    let help = stdout(&memloop(tmp.path(), &bob, &["team", "pull", "--help"]));
    assert!(help.contains("`push` re-creates it"), "{help}");
}

#[test]
fn with_team_memory_on_push_and_pull_move_only_the_team_dir() {
    let schema = Schema::new();
    let url = schema.url();
    let tmp = TempDir::new().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    std::fs::create_dir_all(alice.join("team")).unwrap();
    std::fs::write(
        alice.join("user_роль.md"),
        "---\nname: Роль\ndescription: бэкенд\ntype: user\n---\n\nДесять лет Go.\n",
    )
    .unwrap();
    std::fs::write(
        alice.join("team/デプロイ.md"),
        "---\nname: デプロイ\ndescription: 火曜日だけ\ntype: project\n---\n\n火曜日の午後。\n",
    )
    .unwrap();
    let run = |mem: &Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("MEMLOOP_HOME", tmp.path().join("base"))
            .env("MEMLOOP_TEAM_MEMORY", "1")
            .current_dir(tmp.path())
            .arg("--memory-dir")
            .arg(mem)
            .args(["--team-project", "acme/api", "--database-url", &url])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&alice, &["team", "push"]);
    assert!(out.status.success(), "{out:?}");
    let out = run(&bob, &["team", "pull"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(bob.join("team/デプロイ.md")).unwrap(),
        "---\nname: デプロイ\ndescription: 火曜日だけ\ntype: project\n---\n\n火曜日の午後。\n"
    );
    assert_eq!(
        std::fs::read_to_string(bob.join("team/MEMORY.md")).unwrap(),
        "- [デプロイ](デプロイ.md) — 火曜日だけ\n"
    );
    // The private memory stayed on Alice's machine.
    assert!(!bob.join("user_роль.md").exists());
    assert!(!bob.join("team/user_роль.md").exists());
}

/// `team push` and `team pull` show a progress bar on a terminal (a real pty, through `script`),
/// and none when stderr is a pipe.
#[test]
fn sync_shows_progress_on_a_terminal_only() {
    if !pty_available() {
        return;
    }
    let schema = Schema::new();
    let url = schema.url();
    let tmp = TempDir::new().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    std::fs::create_dir_all(&alice).unwrap();
    for (i, word) in ["部署", "デプロイ", "배포", "выкладка"].iter().enumerate() {
        std::fs::write(
            alice.join(format!("{word}.md")),
            format!("---\nname: {word}\ndescription: {word} {i}\ntype: project\n---\n\n{word}\n"),
        )
        .unwrap();
    }
    let on_a_pty = |mem: &Path, verb: &str| {
        let line = shell_line(&[
            env!("CARGO_BIN_EXE_memloop"),
            "--memory-dir",
            &mem.to_string_lossy(),
            "--team-project",
            "acme/api",
            "--database-url",
            &url,
            "team",
            verb,
        ]);
        let o = Command::new("script")
            .args(script_args(&line))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("MEMLOOP_HOME", tmp.path().join("base"))
            .env("MEMLOOP_PROGRESS_DELAY_MS", "0")
            .env("TERM", "xterm")
            .current_dir(tmp.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let pushed = on_a_pty(&alice, "push");
    assert!(pushed.contains("team push ["), "{pushed}");
    assert!(pushed.contains("выкладка.md"), "{pushed}");
    let pulled = on_a_pty(&bob, "pull");
    assert!(pulled.contains("team pull ["), "{pulled}");
    assert!(bob.join("배포.md").exists());

    // A pipe: no bar.
    let out = memloop(
        tmp.path(),
        &alice,
        &["--database-url", &url, "team", "status"],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("team status ["));
}
