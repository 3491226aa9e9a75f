//! `MemorySetup` refuses a memory dir that a project's own settings put outside the project.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;

#[test]
fn memory_setup_refuses_a_project_redirect_outside_the_project() {
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
    let env = EnvVars::from_pairs([("HOME", home.to_string_lossy().into_owned())]);
    let err = MemorySetup::with_resolver(MemoryDirResolver::new(&project).env(env.clone()), env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the project"), "{err}");
    assert_eq!(std::fs::read_dir(home.join(".ssh")).unwrap().count(), 0);
}
