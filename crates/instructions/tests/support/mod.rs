//! Helpers shared by the `instructions_*` integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use memloop_instructions::{InstructionConfig, LoadReport, ReportEntry};
use std::path::{Path, PathBuf};

/// A config reading only the project at `root`: no managed dir, no user base, no home.
pub fn isolated(root: &Path) -> InstructionConfig {
    InstructionConfig::claude(&memloop_host::env::EnvVars::default())
        .with_project_root(root)
        .with_managed_root(None)
        .with_user_base(None)
        .with_home_dir(None)
}

/// Write `text` to `path`, creating parent dirs.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

pub use memloop_testkit::shared_data;

/// `<shared data>/<rel>` if it is a directory. Otherwise `None` and the test skips, except
/// under CI, where the missing data fails it.
pub fn shared_dir(rel: &str) -> Option<PathBuf> {
    let dir = shared_data().join(rel);
    if dir.is_dir() {
        return Some(dir);
    }
    memloop_testkit::skip_unless_ci(format!(
        "{} is absent (the shared test data is not next to the workspace; \
         MEMLOOP_TEST_DATA names it elsewhere)",
        dir.display()
    ));
    None
}

/// `<shared data>/claudemd/<repo>` if present (see [`shared_dir`]).
pub fn claudemd_repo(repo: &str) -> Option<PathBuf> {
    shared_dir(&format!("claudemd/{repo}"))
}

/// The first report entry whose path ends with `suffix`.
pub fn entry<'a>(report: &'a LoadReport, suffix: &str) -> &'a ReportEntry {
    report
        .entries
        .iter()
        .find(|e| e.path.ends_with(suffix))
        .unwrap_or_else(|| panic!("no report entry for {suffix}: {report:#?}"))
}

/// Every report entry whose path ends with `suffix`.
pub fn entries<'a>(report: &'a LoadReport, suffix: &str) -> Vec<&'a ReportEntry> {
    report
        .entries
        .iter()
        .filter(|e| e.path.ends_with(suffix))
        .collect()
}
