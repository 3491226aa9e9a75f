//! Memory dir location: resolution chain, validation, slug rule, canonical git root, env switches.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)] // test helpers

use memloop_host::env::{EnvVars, is_truthy, parse_bool_env};
use memloop_paths::{
    ConfigFlavor, MemoryDirResolver, ResolutionRule, canonical_project_root, project_dir,
    project_slug,
};
use memloop_store::MemoryError;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

struct World {
    _tmp: TempDir,
    home: PathBuf,
    project: PathBuf,
}

fn world() -> World {
    let tmp = TempDir::new().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let project = root.join("proj");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    World {
        _tmp: tmp,
        home,
        project,
    }
}

impl World {
    fn env(&self) -> EnvVars {
        EnvVars::from_pairs([("HOME", self.home.to_str().unwrap())])
    }
    fn resolver(&self) -> MemoryDirResolver {
        MemoryDirResolver::new(&self.project).env(self.env())
    }
    fn write(&self, rel: &str, json: &str) {
        let p = self.project.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, json).unwrap();
    }
}

#[test]
fn default_is_base_projects_slug_memory() {
    let w = world();
    let r = w.resolver().resolve().unwrap();
    assert_eq!(r.rule, ResolutionRule::Default);
    let slug = project_slug(w.project.to_str().unwrap());
    assert_eq!(
        r.dir,
        w.home.join(".memloop/projects").join(&slug).join("memory")
    );
    assert!(r.reason.contains("default"), "{}", r.reason);
}

#[test]
fn memloop_home_changes_the_base() {
    let w = world();
    let base = w.home.join("cfg");
    let env = w.env().with("MEMLOOP_HOME", base.to_str().unwrap());
    let r = MemoryDirResolver::new(&w.project)
        .env(env)
        .resolve()
        .unwrap();
    assert!(r.dir.starts_with(base.join("projects")));
}

#[test]
fn claude_code_flavor_uses_claude_base_and_config_dir() {
    let w = world();
    let r = MemoryDirResolver::claude_code(&w.project)
        .env(w.env())
        .resolve()
        .unwrap();
    let slug = project_slug(w.project.to_str().unwrap());
    assert_eq!(
        r.dir,
        w.home.join(".claude/projects").join(slug).join("memory")
    );
    let cfg = w.home.join("alt-claude");
    let env = w.env().with("CLAUDE_CONFIG_DIR", cfg.to_str().unwrap());
    let r = MemoryDirResolver::new(&w.project)
        .flavor(ConfigFlavor::ClaudeCode)
        .env(env)
        .resolve()
        .unwrap();
    assert!(r.dir.starts_with(&cfg));
}

#[test]
fn claude_codes_path_override_counts_in_its_layout_only() {
    let w = world();
    for dir in ["/srv/cowork-mem", "/srv/記憶/mémoire"] {
        let env = w.env().with("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE", dir);
        let r = MemoryDirResolver::claude_code(&w.project)
            .env(env.clone())
            .resolve()
            .unwrap();
        assert_eq!(
            (r.rule, r.dir),
            (ResolutionRule::EnvVar, PathBuf::from(dir))
        );
        let r = MemoryDirResolver::new(&w.project)
            .env(env.clone())
            .resolve()
            .unwrap();
        assert_ne!(r.dir, PathBuf::from(dir));
        // memloop's own variable still comes first.
        let r = MemoryDirResolver::claude_code(&w.project)
            .env(env.with("MEMLOOP_MEMORY_DIR", "/srv/env-mem"))
            .resolve()
            .unwrap();
        assert_eq!(r.dir, PathBuf::from("/srv/env-mem"));
    }
}

#[test]
fn chain_order_override_env_local_user() {
    let w = world();
    std::fs::create_dir_all(w.home.join(".memloop")).unwrap();
    // The user allows the project's local settings to put its memory in `~/local-mem`.
    std::fs::write(
        w.home.join(".memloop/settings.json"),
        r#"{"memory_dir": "~/user-mem", "allowed_memory_dirs": ["~/local-mem"]}"#,
    )
    .unwrap();
    let r = w.resolver().resolve().unwrap();
    assert_eq!(
        (r.rule, r.dir.clone()),
        (ResolutionRule::UserSettings, w.home.join("user-mem"))
    );
    assert!(r.reason.contains("user settings"));

    w.write(
        ".memloop/settings.local.json",
        r#"{"memory_dir": "~/local-mem"}"#,
    );
    let r = w.resolver().resolve().unwrap();
    assert_eq!(
        (r.rule, r.dir.clone()),
        (ResolutionRule::LocalSettings, w.home.join("local-mem"))
    );

    let env = w.env().with("MEMLOOP_MEMORY_DIR", "/srv/env-mem/");
    let r = MemoryDirResolver::new(&w.project)
        .env(env.clone())
        .resolve()
        .unwrap();
    assert_eq!(
        (r.rule, r.dir.clone()),
        (ResolutionRule::EnvVar, PathBuf::from("/srv/env-mem/"))
    );

    let r = MemoryDirResolver::new(&w.project)
        .env(env)
        .override_dir("/srv/api")
        .resolve()
        .unwrap();
    assert_eq!(
        (r.rule, r.dir),
        (ResolutionRule::Override, PathBuf::from("/srv/api"))
    );
}

#[test]
fn project_settings_cannot_redirect_the_memory_dir() {
    let w = world();
    let ssh = w.home.join(".ssh");
    w.write(
        ".memloop/settings.json",
        &format!(r#"{{"memory_dir": "{}"}}"#, ssh.display()),
    );
    let r = w.resolver().resolve().unwrap();
    assert_eq!(r.rule, ResolutionRule::Default);
    assert!(!r.dir.starts_with(&ssh));
    // Same for Claude Code's committed settings.
    w.write(
        ".claude/settings.json",
        r#"{"autoMemoryDirectory": "/etc"}"#,
    );
    let r = MemoryDirResolver::claude_code(&w.project)
        .env(w.env())
        .resolve()
        .unwrap();
    assert_eq!(r.rule, ResolutionRule::Default);
}

#[test]
fn env_dir_is_verbatim_no_tilde_expansion() {
    let w = world();
    let env = w.env().with("MEMLOOP_MEMORY_DIR", "~/mem");
    let err = MemoryDirResolver::new(&w.project)
        .env(env)
        .resolve()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("absolute") && msg.contains("no `~` expansion"),
        "{msg}"
    );
}

#[test]
fn broken_settings_json_is_ignored() {
    let w = world();
    w.write(".memloop/settings.local.json", "{not json");
    assert_eq!(
        w.resolver().resolve().unwrap().rule,
        ResolutionRule::Default
    );
}

#[test]
fn invalid_settings_path_is_a_clear_error() {
    let w = world();
    w.write(".memloop/settings.local.json", r#"{"memory_dir": "~/.."}"#);
    match w.resolver().resolve() {
        Err(MemoryError::InvalidMemoryDir { reason, .. }) => {
            assert!(reason.contains("home"), "{reason}")
        }
        other => panic!("expected InvalidMemoryDir, got {other:?}"),
    }
}

#[test]
fn slug_rule_utf16_and_long_paths() {
    assert_eq!(
        project_slug("/Users/ann/code/my-app"),
        "-Users-ann-code-my-app"
    );
    assert_eq!(project_slug("/x/ü"), "-x--");
    assert_eq!(project_slug("/x/🦀"), "-x---");
    assert_eq!(project_slug("/x/日本"), "-x---");
    let long = format!("/{}", "a".repeat(300));
    let s = project_slug(&long);
    assert_eq!(s.len(), 200 + 1 + 8);
    assert!(s.starts_with(&format!("-{}", "a".repeat(199))));
    assert_eq!(s, project_slug(&long), "stable");
    let other = format!("/{}b", "a".repeat(300));
    assert_ne!(
        s,
        project_slug(&other),
        "hash distinguishes paths sharing a prefix"
    );
    assert_eq!(project_slug(&"/".repeat(200)).len(), 200);
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn git_root_and_linked_worktrees_share_one_memory_dir() {
    let w = world();
    let repo = w.project.join("repo");
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "x").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "init"]);
    let wt = w.project.join("wt-feature");
    git(&repo, &["worktree", "add", "-q", wt.to_str().unwrap()]);

    assert_eq!(canonical_project_root(&repo.join("src/deep")), repo);
    assert_eq!(
        canonical_project_root(&wt),
        repo,
        "worktree maps to the main repo"
    );
    let base = w.home.join(".memloop");
    assert_eq!(project_dir(&base, &wt), project_dir(&base, &repo));
    let a = MemoryDirResolver::new(&wt).env(w.env()).resolve().unwrap();
    let b = MemoryDirResolver::new(repo.join("src"))
        .env(w.env())
        .resolve()
        .unwrap();
    assert_eq!(a.dir, b.dir);

    // A forged worktree whose back-pointer does not match keeps its own root.
    let forged = w.project.join("forged");
    std::fs::create_dir_all(&forged).unwrap();
    let gitdir = repo.join(".git/worktrees/wt-feature");
    std::fs::write(
        forged.join(".git"),
        format!("gitdir: {}\n", gitdir.display()),
    )
    .unwrap();
    assert_eq!(canonical_project_root(&forged), forged);

    // Not in git: the dir itself.
    let plain = w.project.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    assert_eq!(canonical_project_root(&plain), plain);
}

#[test]
fn bare_repo_worktree_maps_to_common_dir() {
    let w = world();
    let bare = w.project.join("bare.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    let seed = w.project.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q"]);
    std::fs::write(seed.join("f"), "x").unwrap();
    git(&seed, &["add", "."]);
    git(&seed, &["commit", "-qm", "c"]);
    git(&seed, &["push", "-q", bare.to_str().unwrap(), "HEAD:main"]);
    let wt = w.project.join("bare-wt");
    git(
        &bare,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "main"],
    );
    assert_eq!(canonical_project_root(&wt), bare);
}

#[test]
fn bool_switches() {
    for t in ["1", "true", "TRUE", "Yes", "on", " On "] {
        assert_eq!(parse_bool_env(t), Some(true), "{t}");
    }
    for f in ["0", "false", "No", "OFF"] {
        assert_eq!(parse_bool_env(f), Some(false), "{f}");
    }
    assert_eq!(parse_bool_env("2"), None);
    assert!(!is_truthy(Some("")));
    assert!(
        EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "yes")])
            .switch(memloop_paths::env::DISABLE_AUTO_MEMORY)
    );
    assert!(
        !EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "off")])
            .switch(memloop_paths::env::DISABLE_AUTO_MEMORY)
    );
    assert!(!EnvVars::default().switch(memloop_paths::env::DISABLE_AUTO_MEMORY));
}

#[test]
fn claude_code_flavor_reads_auto_memory_directory_from_user_and_local_settings() {
    let w = world();
    std::fs::create_dir_all(w.home.join(".claude")).unwrap();
    std::fs::write(
        w.home.join(".claude/settings.json"),
        r#"{"autoMemoryDirectory": "~/cc-mem", "memory_dir": "/ignored", "allowed_memory_dirs": ["/srv/cc-local"]}"#,
    )
    .unwrap();
    let r = MemoryDirResolver::claude_code(&w.project)
        .env(w.env())
        .resolve()
        .unwrap();
    assert_eq!(
        (r.rule, r.dir),
        (ResolutionRule::UserSettings, w.home.join("cc-mem"))
    );
    w.write(
        ".claude/settings.local.json",
        r#"{"autoMemoryDirectory": "/srv/cc-local"}"#,
    );
    let r = MemoryDirResolver::claude_code(&w.project)
        .env(w.env())
        .resolve()
        .unwrap();
    assert_eq!(
        (r.rule, r.dir.clone()),
        (
            ResolutionRule::LocalSettings,
            PathBuf::from("/srv/cc-local")
        )
    );
    assert!(r.reason.contains("autoMemoryDirectory"));
}

/// An unrecognised switch value is off, and says so in a warning naming the variable.
#[test]
fn unrecognised_switch_values_warn() {
    let warnings = memloop_testkit::Warnings::default();
    let env = EnvVars::from_pairs([
        ("MEMLOOP_DISABLE_AUTO_MEMORY", "enabled"),
        ("OK_SWITCH", "off"),
    ]);
    let (disabled, ok) = warnings.capture(|| {
        (
            env.switch(memloop_paths::env::DISABLE_AUTO_MEMORY),
            env.switch("OK_SWITCH"),
        )
    });
    assert!(!disabled && !ok);
    let msgs = warnings.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(msgs[0].contains("unrecognised switch value"), "{msgs:?}");
}
