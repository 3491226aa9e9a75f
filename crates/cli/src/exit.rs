//! Exit codes that mean something, and the mapping from errors to them.

use memloop_instructions::InstructionError;
use memloop_store::MemoryError;

/// The process exit codes of `memloop` (also listed in `memloop --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Ok = 0,
    /// 1: runtime or I/O error.
    Runtime = 1,
    /// 2: usage error (clap's own code).
    Usage = 2,
    /// 3: not found (topic, memory dir, project dir).
    NotFound = 3,
    /// 4: refused (secret filter, containment, validation).
    Refused = 4,
    /// 5: aborted by the user.
    Aborted = 5,
    /// 6: `team push|pull`: some entries failed (a write the database refused, a file that could
    /// not be read or parsed, a body the secret filter kept on this machine).
    SyncFailed = 6,
    /// 7: `team push|pull`: some entries conflict (edited on both sides) and nothing failed.
    SyncConflict = 7,
}

impl Exit {
    /// The numeric code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// An error that carries its own exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// The exit code.
    pub exit: Exit,
    /// What to tell the user.
    pub message: String,
}

impl Failure {
    /// A failure with `exit` and `message`.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self {
            exit,
            message: message.into(),
        }
    }
}

/// The exit code of a memory-layer error.
pub fn memory_exit(e: &MemoryError) -> Exit {
    match e {
        MemoryError::NotFound(_) => Exit::NotFound,
        MemoryError::InvalidName { .. }
        | MemoryError::OutsideMemoryDir { .. }
        | MemoryError::InvalidMemoryDir { .. }
        | MemoryError::SensitiveData { .. } => Exit::Refused,
        _ => Exit::Runtime,
    }
}

/// The exit code for an error returned by a command: the first [`Failure`], [`MemoryError`] or
/// [`InstructionError`] in its chain decides; anything else is a runtime error.
pub fn exit_for(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return f.exit;
        }
        if let Some(m) = cause.downcast_ref::<MemoryError>() {
            return memory_exit(m);
        }
        if let Some(InstructionError::Directory { source, .. }) =
            cause.downcast_ref::<InstructionError>()
            && source.kind() == std::io::ErrorKind::NotFound
        {
            return Exit::NotFound;
        }
    }
    Exit::Runtime
}

/// Whether the error is a closed stdout (e.g. `memloop memory list | head -1`): not worth a
/// message.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                cause
                    .downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            })
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// The one-line message for an error: its chain joined with `: `, leaving out a cause whose
/// text the message already holds (an error that prints its source, as `reading MEMORY.md: not
/// a regular file` does, would otherwise show it twice).
pub fn error_message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidInput, "не обычный файл");
        let err = anyhow::Error::new(MemoryError::io("reading MEMORY.md", io));
        assert_eq!(error_message(&err), "reading MEMORY.md: не обычный файл");
        let err = anyhow::Error::new(std::io::Error::other("接続が切れました"))
            .context("pushing to the team database");
        assert_eq!(
            error_message(&err),
            "pushing to the team database: 接続が切れました"
        );
    }

    #[test]
    fn memory_errors_map_to_documented_codes() {
        let nf = anyhow::Error::new(MemoryError::NotFound("x.md".into()));
        assert_eq!(exit_for(&nf), Exit::NotFound);
        let secret = anyhow::Error::new(MemoryError::SensitiveData {
            pattern: "aws".into(),
        })
        .context("saving");
        assert_eq!(exit_for(&secret), Exit::Refused);
        let abort = anyhow::Error::new(Failure::new(Exit::Aborted, "no"));
        assert_eq!(exit_for(&abort).code(), 5);
        assert_eq!(exit_for(&anyhow::anyhow!("disk on fire")), Exit::Runtime);
    }
}
