//! `write_file` and `edit_file`: the generic file writers. Both name their target through
//! [`Tool::write_targets`] so a gate can refuse the call before anything is touched.

use super::input::{str_field, target};
use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use std::path::PathBuf;

/// Creates or replaces a file (parent directories are created).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create or overwrite a file with the given content.".into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(
        &self,
        input: &serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        target(input, ctx).map(|p| vec![p])
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let (path, content) = match target(&input, ctx)
            .and_then(|p| str_field(&input, "content").map(|c| (p, c.to_owned())))
        {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(e),
        };
        match memloop_host::files::ensure_regular(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return ToolOutput::error(format!("cannot write {}: {e}", path.display())),
        }
        if let Some(parent) = path.parent() {
            if let Err(e) = tokio::fs::create_dir_all(parent).await {
                return ToolOutput::error(format!("cannot create {}: {e}", parent.display()));
            }
        }
        match tokio::fs::write(&path, content.as_bytes()).await {
            Ok(()) => ToolOutput::ok(format!(
                "Wrote {} bytes to {}",
                content.len(),
                path.display()
            ))
            .with_file_written(path),
            Err(e) => ToolOutput::error(format!("cannot write {}: {e}", path.display())),
        }
    }
}

/// Replaces an exact string in an existing file. The `old_string` must occur exactly once unless
/// `replace_all` is set.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace `old_string` with `new_string` in a file. `old_string` must \
                          match exactly once unless `replace_all` is true."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"}
                },
                "required": ["path", "old_string", "new_string"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(
        &self,
        input: &serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        target(input, ctx).map(|p| vec![p])
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let args = (|| {
            let path = target(&input, ctx)?;
            let old = str_field(&input, "old_string")?;
            let new = str_field(&input, "new_string")?;
            if old.is_empty() {
                return Err("`old_string` is empty; use write_file to create a file".to_owned());
            }
            let all = input
                .get("replace_all")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false);
            Ok((path, old.to_owned(), new.to_owned(), all))
        })();
        let (path, old, new, all) = match args {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(e),
        };
        let read = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || memloop_host::files::read_regular_to_string(&path))
                .await
        };
        let text = match read {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return ToolOutput::error(format!("cannot read {}: {e}", path.display())),
            Err(e) => return ToolOutput::error(format!("cannot read {}: {e}", path.display())),
        };
        let count = text.matches(old.as_str()).count();
        if count == 0 {
            return ToolOutput::error(format!(
                "`old_string` was not found in {}; read the file and copy the text exactly",
                path.display()
            ));
        }
        if count > 1 && !all {
            return ToolOutput::error(format!(
                "`old_string` occurs {count} times in {}; add context to make it unique or set replace_all",
                path.display()
            ));
        }
        let updated = if all {
            text.replace(old.as_str(), &new)
        } else {
            text.replacen(old.as_str(), &new, 1)
        };
        match tokio::fs::write(&path, updated).await {
            Ok(()) => ToolOutput::ok(format!(
                "Replaced {} occurrence(s) in {}",
                if all { count } else { 1 },
                path.display()
            ))
            .with_file_written(path),
            Err(e) => ToolOutput::error(format!("cannot write {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::test_ctx;
    use serde_json::json;

    #[cfg(unix)]
    #[tokio::test]
    async fn pipes_are_neither_read_nor_written() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.md");
        if !memloop_testkit::fifo(&fifo) {
            return;
        }
        let ctx = test_ctx(dir.path());
        // Both would wait forever for the pipe's other end: they answer at once instead. Should
        // one ever wait, the test opens the other end itself and fails instead of hanging.
        let limit = std::time::Duration::from_secs(10);
        let write = WriteFile.call(json!({"path": "pipe.md", "content": "данные"}), &ctx);
        let Ok(out) = tokio::time::timeout(limit, write).await else {
            drop(std::fs::File::open(&fifo));
            panic!("write_file waited on a named pipe");
        };
        assert!(
            out.is_error && out.content.contains("named pipe"),
            "{out:?}"
        );
        let edit = EditFile.call(
            json!({"path": "pipe.md", "old_string": "a", "new_string": "b"}),
            &ctx,
        );
        let Ok(out) = tokio::time::timeout(limit, edit).await else {
            drop(std::fs::OpenOptions::new().write(true).open(&fifo));
            panic!("edit_file waited on a named pipe");
        };
        assert!(
            out.is_error && out.content.contains("named pipe"),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn write_then_edit_real_files() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_ctx(dir.path());
        let input = json!({"path": "sub/n.md", "content": "one two two"});
        assert_eq!(
            WriteFile.write_targets(&input, &ctx).unwrap(),
            vec![dir.path().join("sub/n.md")]
        );
        let out = WriteFile.call(input, &ctx).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.files_written, vec![dir.path().join("sub/n.md")]);

        let ambiguous = json!({"path": "sub/n.md", "old_string": "two", "new_string": "2"});
        let out = EditFile.call(ambiguous, &ctx).await;
        assert!(out.is_error && out.content.contains("occurs 2 times"));
        assert!(out.files_written.is_empty());

        let unique = json!({"path": "sub/n.md", "old_string": "one", "new_string": "1"});
        let out = EditFile.call(unique, &ctx).await;
        assert!(!out.is_error, "{}", out.content);
        let all = json!({"path": "sub/n.md", "old_string": "two", "new_string": "2", "replace_all": true});
        let out = EditFile.call(all, &ctx).await;
        assert_eq!(out.files_written, vec![dir.path().join("sub/n.md")]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sub/n.md")).unwrap(),
            "1 2 2"
        );

        let missing = json!({"path": "sub/n.md", "old_string": "zzz", "new_string": "y"});
        assert!(EditFile.call(missing, &ctx).await.is_error);
    }

    #[test]
    fn targets_resolve_against_cwd_and_normalise() {
        let ctx = test_ctx(std::path::Path::new("/work/mem"));
        let t = EditFile
            .write_targets(&json!({"path": "../x.md"}), &ctx)
            .unwrap();
        assert_eq!(t, vec![PathBuf::from("/work/x.md")]);
        assert!(WriteFile.write_targets(&json!({}), &ctx).is_err());
    }
}
