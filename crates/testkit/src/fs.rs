//! Files a test needs that are not regular files.

use std::path::Path;

/// Make a named pipe at `path`; `false` when this machine cannot (no `mkfifo`, or not Unix), so
/// the test has nothing to check and returns.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let pipe = dir.path().join("MEMORY.md");
/// if memloop_testkit::fifo(&pipe) {
///     assert!(!std::fs::metadata(&pipe).unwrap().is_file());
/// }
/// ```
pub fn fifo(path: &Path) -> bool {
    cfg!(unix)
        && std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success())
}
