//! `read_file`: a bounded, line-numbered read.

use super::input::{target, usize_field};
use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_text::truncate_utf8;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Reads a text file: `offset` (0-based first line) and `limit` (lines, default 2,000), with the
/// output capped at [`max_bytes`](Self::max_bytes). Lines are numbered (1-based) like `cat -n`.
#[derive(Debug, Clone)]
pub struct ReadFile {
    /// Default number of lines when the call gives no `limit`.
    pub default_limit: usize,
    /// Cap on the returned text, in bytes.
    pub max_bytes: usize,
}

impl Default for ReadFile {
    fn default() -> Self {
        Self {
            default_limit: 2_000,
            max_bytes: 256 * 1024,
        }
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a text file. Lines are numbered from 1. Use offset (0-based line) \
                          and limit (number of lines) for large files."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path (absolute or relative to the working directory)"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1}
                },
                "required": ["path"]
            }),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let args = target(&input, ctx).and_then(|p| {
            let offset = usize_field(&input, "offset")?.unwrap_or(0);
            let limit = usize_field(&input, "limit")?.unwrap_or(self.default_limit);
            Ok((p, offset, limit))
        });
        let (path, offset, limit) = match args {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(e),
        };
        let max_bytes = self.max_bytes;
        let shown = path.display().to_string();
        match tokio::task::spawn_blocking(move || read_lines(&path, offset, limit, max_bytes)).await
        {
            Ok(Ok(text)) => ToolOutput::ok(text),
            Ok(Err(e)) => ToolOutput::error(format!("cannot read {shown}: {e}")),
            Err(e) => ToolOutput::error(format!("cannot read {shown}: {e}")),
        }
    }
}

fn read_lines(
    path: &Path,
    offset: usize,
    limit: usize,
    max_bytes: usize,
) -> Result<String, String> {
    if path.is_dir() {
        return Err("it is a directory (use glob to list files)".into());
    }
    let file = memloop_host::files::open_regular(path).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(file);
    let mut out = String::new();
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    let mut shown = 0usize;
    // Never hold more than one capped line in memory, however long the file's lines are.
    let line_cap = max_bytes as u64 + 1;
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(line_cap)
            .read_until(b'\n', &mut buf)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        if n as u64 == line_cap && buf.last() != Some(&b'\n') {
            // The rest of an over-long line is skipped unread into memory.
            reader.skip_until(b'\n').map_err(|e| e.to_string())?;
        }
        if buf.contains(&0) {
            return Err("binary file (contains NUL bytes)".into());
        }
        line_no += 1;
        if line_no <= offset {
            continue;
        }
        if shown == limit {
            out.push_str(&format!(
                "[more lines follow; continue with offset {}]\n",
                line_no - 1
            ));
            break;
        }
        let line = String::from_utf8_lossy(&buf);
        let entry = format!("{line_no:>6}\t{}\n", line.trim_end_matches(['\n', '\r']));
        if out.len() + entry.len() > max_bytes {
            let room = max_bytes.saturating_sub(out.len());
            out.push_str(truncate_utf8(&entry, room));
            out.push_str(&format!(
                "\n[output truncated at {max_bytes} bytes; continue with offset {}]\n",
                line_no - 1
            ));
            break;
        }
        out.push_str(&entry);
        shown += 1;
    }
    if out.is_empty() {
        out = if line_no == 0 {
            "(empty file)".into()
        } else {
            format!("(no lines at offset {offset}; the file has {line_no} lines)")
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::test_ctx;

    #[test]
    fn a_huge_single_line_is_capped_and_the_next_line_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("min.js");
        let mut body = "x".repeat(5_000_000);
        body.push_str("\nsecond line\n");
        std::fs::write(&path, body).unwrap();
        let out = read_lines(&path, 0, 10, 1_000).unwrap();
        assert!(out.len() < 1_200, "{}", out.len());
        assert!(out.contains("[output truncated at 1000 bytes; continue with offset 0]"));
        let next = read_lines(&path, 1, 10, 1_000).unwrap();
        assert_eq!(next, "     2\tsecond line\n");
    }
    use serde_json::json;

    #[tokio::test]
    async fn reads_with_offset_limit_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), body).unwrap();
        let ctx = test_ctx(dir.path());
        let tool = ReadFile::default();
        let out = tool
            .call(json!({"path": "a.txt", "offset": 2, "limit": 3}), &ctx)
            .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            "     3\tline 3\n     4\tline 4\n     5\tline 5\n[more lines follow; continue with offset 5]\n"
        );
        let small = ReadFile {
            default_limit: 100,
            max_bytes: 20,
        };
        let out = small.call(json!({"path": "a.txt"}), &ctx).await;
        assert!(out.content.contains("[output truncated at 20 bytes"));
        assert!(out.content.starts_with("     1\tline 1\n"));
    }

    #[tokio::test]
    async fn refuses_binary_missing_and_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.bin"), b"ab\0cd").unwrap();
        let ctx = test_ctx(dir.path());
        let tool = ReadFile::default();
        let out = tool.call(json!({"path": "b.bin"}), &ctx).await;
        assert!(out.is_error && out.content.contains("binary"));
        let out = tool.call(json!({"path": "nope.txt"}), &ctx).await;
        assert!(out.is_error && out.content.contains("nope.txt"));
        let out = tool.call(json!({"path": "b.bin", "limit": -1}), &ctx).await;
        assert!(out.is_error && out.content.contains("limit"));
        let out = tool.call(json!({}), &ctx).await;
        assert!(out.is_error && out.content.contains("path"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_named_pipe_or_a_device_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        if !memloop_testkit::fifo(&dir.path().join("ログ.pipe")) {
            return;
        }
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.txt")).unwrap();
        let ctx = test_ctx(dir.path());
        let tool = ReadFile::default();
        // Should the tool ever wait for a writer, the test opens the other end itself and fails
        // instead of hanging.
        let read = tool.call(json!({"path": "ログ.pipe"}), &ctx);
        let Ok(out) = tokio::time::timeout(std::time::Duration::from_secs(10), read).await else {
            drop(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.path().join("ログ.pipe")),
            );
            panic!("read_file waited on a named pipe");
        };
        assert!(
            out.is_error && out.content.contains("named pipe"),
            "{out:?}"
        );
        let out = tool.call(json!({"path": "zero.txt"}), &ctx).await;
        assert!(out.is_error && out.content.contains("device"), "{out:?}");
    }
}
