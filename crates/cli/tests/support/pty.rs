//! Running the real binary on a pseudo-terminal through util-linux `script`, for what the CLI
//! does only when a stream is a terminal (included with `#[path]`, not a test target).
#![allow(dead_code)]

use std::process::Command;

/// Whether `script` runs here; when it does not, the test is skipped (a failure under `CI=1`).
pub fn pty_available() -> bool {
    if Command::new("script").arg("--version").output().is_ok() {
        return true;
    }
    memloop_testkit::skip_unless_ci("`script` (util-linux) is not installed");
    false
}

/// `words` as one POSIX shell command line, each word single-quoted.
pub fn shell_line(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The arguments that make `script` run the shell command `line` on a new pty, quietly, and
/// exit with its status.
pub fn script_args(line: &str) -> [&str; 3] {
    ["-qec", line, "/dev/null"]
}
