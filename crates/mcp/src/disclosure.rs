//! What a client is told of the server's own errors: their text, never a path on the server's
//! disk. A limited token must not learn where a memory dir is, where a link in it leads or where
//! the server's settings live; the log keeps every error whole.

use memloop_store::MemoryError;

/// A store error as a client reads it: its text, except that it never names a path on the
/// server's disk (a limited token must not learn where a memory dir is, nor where a link in it
/// leads). The log keeps the whole error.
pub(crate) fn client_text(e: &MemoryError) -> String {
    match e {
        MemoryError::OutsideMemoryDir { path, root } => match path.strip_prefix(root) {
            Ok(rel) => format!(
                "refused: `{}` leads outside the memory directory",
                rel.display()
            ),
            Err(_) => "refused: the target leads outside the memory directory".to_owned(),
        },
        MemoryError::InvalidMemoryDir { reason, .. } => {
            format!("invalid memory directory: {reason}")
        }
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn store_errors_are_told_without_the_servers_paths() {
        let root = PathBuf::from("/srv/memloop/projects/-srv-équipe-app/memory");
        for (path, shown) in [
            (root.join("knowledge/链接.md"), "`knowledge/链接.md`"),
            (PathBuf::from("/home/ops/.ssh/id_ed25519"), "the target"),
        ] {
            let e = MemoryError::OutsideMemoryDir {
                path,
                root: root.clone(),
            };
            let told = client_text(&e);
            assert!(told.contains(shown), "{told}");
            assert!(!told.contains("/srv") && !told.contains("/home"), "{told}");
        }
        let e = MemoryError::InvalidMemoryDir {
            path: "/home/ops/.ssh".into(),
            reason: "it lies outside the project".into(),
        };
        let told = client_text(&e);
        assert!(
            told.contains("outside the project") && !told.contains("/home"),
            "{told}"
        );
    }
}
