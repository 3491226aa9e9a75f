//! `glob` (find files by pattern) and `grep` (search file contents with a regex).

use super::input::{str_field, usize_field};
use super::walk::files_under;
use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_host::paths::resolve_path;
use memloop_text::glob_to_regex;
use memloop_text::truncate_utf8;
use regex::{Regex, RegexBuilder};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Files visited at most by one call.
const MAX_VISITED: usize = 50_000;
/// Files larger than this are not searched by `grep`.
const MAX_GREP_FILE: u64 = 10 * 1024 * 1024;

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

fn base_dir(input: &serde_json::Value, ctx: &ToolContext) -> PathBuf {
    match input.get("path").and_then(serde_json::Value::as_str) {
        Some(p) if !p.is_empty() => resolve_path(&ctx.cwd, p),
        _ => ctx.cwd.clone(),
    }
}

/// Lists files matching a glob pattern under a directory, sorted by path.
#[derive(Debug, Clone)]
pub struct Glob {
    /// Maximum paths returned.
    pub max_results: usize,
}

impl Default for Glob {
    fn default() -> Self {
        Self { max_results: 500 }
    }
}

#[async_trait]
impl Tool for Glob {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "glob".into(),
            description: "List files whose path (relative to `path`, default the working \
                          directory) matches a glob such as `**/*.md`."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string", "description": "Directory to search (optional)"}
                },
                "required": ["pattern"]
            }),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let re = match str_field(&input, "pattern").map(glob_to_regex) {
            Ok(Ok(re)) => re,
            Ok(Err(e)) => return ToolOutput::error(format!("invalid glob: {e}")),
            Err(e) => return ToolOutput::error(e),
        };
        let root = base_dir(&input, ctx);
        let max = self.max_results;
        let found = tokio::task::spawn_blocking(move || {
            let mut hits: Vec<String> = files_under(&root, MAX_VISITED)
                .iter()
                .map(|p| rel(&root, p))
                .filter(|r| re.is_match(r))
                .collect();
            let total = hits.len();
            hits.truncate(max);
            (hits, total)
        })
        .await;
        match found {
            Ok((hits, _)) if hits.is_empty() => ToolOutput::ok("No files matched."),
            Ok((hits, total)) => {
                let mut text = hits.join("\n");
                if total > hits.len() {
                    text.push_str(&format!("\n[{} more not shown]", total - hits.len()));
                }
                ToolOutput::ok(text)
            }
            Err(e) => ToolOutput::error(format!("glob failed: {e}")),
        }
    }
}

/// Searches file contents with a regular expression (the `regex` crate's syntax).
#[derive(Debug, Clone)]
pub struct Grep {
    /// Maximum matching lines returned.
    pub max_matches: usize,
    /// Longest line shown, in bytes.
    pub max_line_bytes: usize,
}

impl Default for Grep {
    fn default() -> Self {
        Self {
            max_matches: 200,
            max_line_bytes: 300,
        }
    }
}

#[async_trait]
impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "grep".into(),
            description: "Search file contents with a regular expression. Returns \
                          `path:line: text` for each matching line."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression"},
                    "path": {"type": "string", "description": "File or directory (optional)"},
                    "glob": {"type": "string", "description": "Only files matching this glob"},
                    "case_insensitive": {"type": "boolean"},
                    "max_matches": {"type": "integer", "minimum": 1}
                },
                "required": ["pattern"]
            }),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let prepared = (|| {
            let pattern = str_field(&input, "pattern")?;
            let ci = input
                .get("case_insensitive")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false);
            let re = RegexBuilder::new(pattern)
                .case_insensitive(ci)
                .build()
                .map_err(|e| format!("invalid regex: {e}"))?;
            let filter = match input.get("glob").and_then(serde_json::Value::as_str) {
                Some(g) => Some(glob_to_regex(g).map_err(|e| format!("invalid glob: {e}"))?),
                None => None,
            };
            let max = usize_field(&input, "max_matches")?
                .unwrap_or(self.max_matches)
                .min(self.max_matches);
            Ok::<_, String>((re, filter, max))
        })();
        let (re, filter, max) = match prepared {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let root = base_dir(&input, ctx);
        let line_cap = self.max_line_bytes;
        let found = tokio::task::spawn_blocking(move || {
            grep_files(&root, &re, filter.as_ref(), max, line_cap)
        })
        .await;
        match found {
            Ok(lines) if lines.is_empty() => ToolOutput::ok("No matches."),
            Ok(lines) => ToolOutput::ok(lines.join("\n")),
            Err(e) => ToolOutput::error(format!("grep failed: {e}")),
        }
    }
}

fn grep_files(
    root: &Path,
    re: &Regex,
    filter: Option<&Regex>,
    max: usize,
    line_cap: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let shown_root = if root.is_file() {
        root.parent().unwrap_or(root)
    } else {
        root
    };
    for path in files_under(root, MAX_VISITED) {
        let r = rel(shown_root, &path);
        if filter.is_some_and(|f| !f.is_match(&r)) {
            continue;
        }
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut bytes = Vec::new();
        if file.take(MAX_GREP_FILE).read_to_end(&mut bytes).is_err() || bytes.contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                out.push(format!("{r}:{}: {}", i + 1, truncate_utf8(line, line_cap)));
                if out.len() >= max {
                    out.push(format!("[stopped after {max} matches]"));
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::test_ctx;
    use serde_json::json;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("notes/deep")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("a.md"), "alpha\nBeta gamma\n").unwrap();
        std::fs::write(dir.path().join("notes/b.md"), "beta\n").unwrap();
        std::fs::write(dir.path().join("notes/deep/c.txt"), "gamma beta\n").unwrap();
        std::fs::write(dir.path().join("notes/bin.md"), b"beta\0").unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "beta").unwrap();
        dir
    }

    #[tokio::test]
    async fn glob_matches_recursively_and_skips_git() {
        let dir = tree();
        let ctx = test_ctx(dir.path());
        let out = Glob::default()
            .call(json!({"pattern": "**/*.md"}), &ctx)
            .await;
        assert_eq!(out.content, "a.md\nnotes/b.md\nnotes/bin.md");
        let out = Glob::default()
            .call(json!({"pattern": "*.{txt,md}", "path": "notes/deep"}), &ctx)
            .await;
        assert_eq!(out.content, "c.txt");
        let out = Glob { max_results: 1 }
            .call(json!({"pattern": "**"}), &ctx)
            .await;
        assert_eq!(out.content, "a.md\n[3 more not shown]");
    }

    #[tokio::test]
    async fn grep_finds_lines_with_filters() {
        let dir = tree();
        let ctx = test_ctx(dir.path());
        let out = Grep::default()
            .call(json!({"pattern": "beta", "case_insensitive": true}), &ctx)
            .await;
        assert_eq!(
            out.content,
            "a.md:2: Beta gamma\nnotes/b.md:1: beta\nnotes/deep/c.txt:1: gamma beta"
        );
        let out = Grep::default()
            .call(json!({"pattern": "beta", "glob": "**/*.txt"}), &ctx)
            .await;
        assert_eq!(out.content, "notes/deep/c.txt:1: gamma beta");
        let out = Grep::default()
            .call(json!({"pattern": "(unclosed"}), &ctx)
            .await;
        assert!(out.is_error && out.content.contains("invalid regex"));
        let out = Grep::default()
            .call(json!({"pattern": "zzz", "path": "a.md"}), &ctx)
            .await;
        assert_eq!(out.content, "No matches.");
    }
}
