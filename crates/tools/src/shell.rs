//! `shell`: runs `sh -c` with a timeout and an output cap, and classifies each command as
//! read-only or not so that a [`WriteScopeGate`](memloop_core::tool::WriteScopeGate) with
//! `allow_read_only_shell` lets only read-only commands through.

use super::input::str_field;
use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_text::truncate_utf8;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Commands that only read (as the first word of every pipeline segment).
const READ_ONLY: [&str; 20] = [
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "pwd", "echo",
    "git", "stat", "du", "basename", "dirname", "realpath", "which", "true",
];
/// `git` subcommands that only read.
const GIT_READ_ONLY: [&str; 4] = ["log", "show", "diff", "status"];
/// Arguments that turn an otherwise read-only command into a writer or a command runner.
const FORBIDDEN_ARGS: [(&str, &str); 10] = [
    ("find", "-delete"),
    ("find", "-exec"),
    ("find", "-execdir"),
    ("find", "-ok"),
    ("find", "-okdir"),
    ("find", "-fprint"),
    ("find", "-fls"),
    ("rg", "--pre"),
    ("git", "--output"),
    ("git", "--ext-diff"),
];

/// Split a command into pipeline segments of words, honouring quotes. Errors name the construct
/// that makes the command not read-only.
fn segments(cmd: &str) -> Result<Vec<Vec<String>>, String> {
    let mut segs = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = cmd.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '`') if quote != Some('\'') => return Err("command substitution (`)".into()),
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '$') if chars.peek() == Some(&'(') => {
                return Err("command substitution $(...)".into());
            }
            (Some(_), '\\') if quote == Some('"') => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    word.push(n);
                    in_word = true;
                }
            }
            (None, '$') if chars.peek() == Some(&'(') => {
                return Err("command substitution $(...)".into());
            }
            (None, '>' | '<') => return Err(format!("redirection ({c})")),
            (None, '&') if chars.peek() != Some(&'&') => {
                return Err("background job (&)".into());
            }
            (None, '|' | '&' | ';' | '\n') => {
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                if in_word {
                    push_word(&mut segs, &mut word);
                    in_word = false;
                }
                segs.push(Vec::new());
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    push_word(&mut segs, &mut word);
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_word {
        push_word(&mut segs, &mut word);
    }
    segs.retain(|s| !s.is_empty());
    Ok(segs)
}

fn push_word(segs: &mut [Vec<String>], word: &mut String) {
    if let Some(last) = segs.last_mut() {
        last.push(std::mem::take(word));
    }
}

/// `Ok(())` when `cmd` only reads: every pipeline segment starts with an allow-listed command
/// (`ls`, `cat`, `head`, `tail`, `wc`, `grep`, `rg`, `find`, `pwd`, `echo`, `git
/// log|show|diff|status`, ...), with no redirection, command substitution, background job, or
/// writing flag (`find -delete`/`-exec`, ...). `Err` says why not.
///
/// ```
/// use memloop_tools::classify_command;
/// assert!(classify_command("git log --oneline | head -5").is_ok());
/// assert!(classify_command("grep -r 'a|b' src").is_ok());
/// assert!(classify_command("echo hi > x.md").is_err());
/// assert!(classify_command("cat a | tee b").is_err());
/// assert!(classify_command("find . -delete").is_err());
/// ```
pub fn classify_command(cmd: &str) -> Result<(), String> {
    let segs = segments(cmd)?;
    if segs.is_empty() {
        return Err("empty command".into());
    }
    for seg in &segs {
        let prog = seg[0].as_str();
        if !READ_ONLY.contains(&prog) {
            return Err(format!("`{prog}` is not a read-only command"));
        }
        if prog == "git" {
            let sub = seg.get(1).map(String::as_str).unwrap_or("");
            if !GIT_READ_ONLY.contains(&sub) {
                return Err(format!("`git {sub}` is not a read-only git command"));
            }
        }
        for arg in &seg[1..] {
            if let Some((_, bad)) = FORBIDDEN_ARGS
                .iter()
                .find(|(p, a)| *p == prog && arg.starts_with(a))
            {
                return Err(format!("`{prog} {bad}` can write or run commands"));
            }
        }
    }
    Ok(())
}

/// Runs a shell command (`sh -c`) in the working directory with a timeout and an output cap.
#[derive(Debug, Clone)]
pub struct Shell {
    /// Time limit per command.
    pub timeout: Duration,
    /// Cap on stdout and on stderr, each, in bytes.
    pub max_output: usize,
}

impl Default for Shell {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_output: 32 * 1024,
        }
    }
}

async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    if let Some(s) = stream {
        // Read one byte past the cap to know whether there was more; dropping the pipe then
        // makes a chatty child stop with SIGPIPE instead of blocking.
        let _ = s.take(cap as u64 + 1).read_to_end(&mut buf).await;
    }
    let more = buf.len() > cap;
    buf.truncate(cap);
    (buf, more)
}

fn render(bytes: &[u8], more: bool, cap: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut s = truncate_utf8(&text, cap).to_owned();
    if more {
        s.push_str(&format!("\n[output truncated at {cap} bytes]"));
    }
    s
}

#[async_trait]
impl Tool for Shell {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "shell".into(),
            description: "Run a shell command (sh -c) in the working directory. Output is capped \
                          and the command is killed at the time limit."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"]
            }),
            effect: ToolEffect::Shell,
        }
    }

    /// `Ok(empty)` for read-only commands ([`classify_command`]), else `Err("not read-only: ...")`.
    fn write_targets(
        &self,
        input: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        let cmd = str_field(input, "command")?;
        classify_command(cmd)
            .map(|()| Vec::new())
            .map_err(|why| format!("not read-only: {why}"))
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let cmd = match str_field(&input, "command") {
            Ok(c) => c.to_owned(),
            Err(e) => return ToolOutput::error(e),
        };
        let mut child = match tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .current_dir(&ctx.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("cannot start sh: {e}")),
        };
        let cap = self.max_output;
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let run = async {
            let ((o, o_more), (e, e_more)) =
                tokio::join!(read_capped(out, cap), read_capped(err, cap));
            let status = child.wait().await;
            (o, o_more, e, e_more, status)
        };
        let Ok((o, o_more, e, e_more, status)) = tokio::time::timeout(self.timeout, run).await
        else {
            return ToolOutput::error(format!(
                "command timed out after {} s and was killed",
                self.timeout.as_secs_f64()
            ));
        };
        let code = match status {
            Ok(s) => s
                .code()
                .map_or("killed by a signal".to_owned(), |c| c.to_string()),
            Err(e) => return ToolOutput::error(format!("waiting for the command failed: {e}")),
        };
        let mut text = render(&o, o_more, cap);
        if !e.is_empty() {
            text.push_str("\n[stderr]\n");
            text.push_str(&render(&e, e_more, cap));
        }
        let failed = code != "0";
        if failed {
            text.push_str(&format!("\n[exit status: {code}]"));
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::test_ctx;
    use serde_json::json;

    #[test]
    fn classifies_read_only_and_writers() {
        for ok in [
            "ls -la",
            "cat a.md | grep -n foo | head -3",
            "git diff HEAD~1 && git status",
            "echo 'a > b'",
            "find . -name '*.md'",
            "rg 'x|y' src; wc -l a",
        ] {
            assert_eq!(classify_command(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("echo hi > x.md", "redirection"),
            ("cat a >> b", "redirection"),
            ("cat a | tee b", "`tee`"),
            ("rm -rf x", "`rm`"),
            ("sed -i s/a/b/ f", "`sed`"),
            ("mv a b", "`mv`"),
            ("cp a b", "`cp`"),
            ("find . -delete", "-delete"),
            ("find . -exec rm {} ;", "-exec"),
            ("git commit -m x", "git commit"),
            ("git diff --output=x", "--output"),
            ("echo $(rm x)", "substitution"),
            ("echo `rm x`", "substitution"),
            ("sleep 1 &", "background"),
            ("echo 'unterminated", "quote"),
            ("", "empty"),
        ] {
            let err = classify_command(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let ctx = test_ctx(std::path::Path::new("/"));
        let err = Shell::default()
            .write_targets(&json!({"command": "touch x"}), &ctx)
            .unwrap_err();
        assert!(err.starts_with("not read-only: "), "{err}");
    }

    #[tokio::test]
    async fn runs_real_processes_with_cap_and_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "hello\n").unwrap();
        let ctx = test_ctx(dir.path());
        let sh = Shell::default();
        let out = sh.call(json!({"command": "cat f.txt"}), &ctx).await;
        assert_eq!((out.is_error, out.content.as_str()), (false, "hello\n"));
        let out = sh
            .call(json!({"command": "echo oops >&2; exit 3"}), &ctx)
            .await;
        assert!(out.is_error);
        assert_eq!(out.content, "\n[stderr]\noops\n\n[exit status: 3]");
        let capped = Shell {
            max_output: 10,
            ..Shell::default()
        };
        let out = capped.call(json!({"command": "yes"}), &ctx).await;
        assert!(out.content.starts_with("y\ny\ny\ny\ny\n"));
        assert!(out.content.contains("[output truncated at 10 bytes]"));
    }

    #[tokio::test]
    async fn kills_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let sh = Shell {
            timeout: Duration::from_millis(200),
            ..Shell::default()
        };
        let out = sh
            .call(json!({"command": "exec sleep 30"}), &test_ctx(dir.path()))
            .await;
        assert!(
            out.is_error && out.content.contains("timed out"),
            "{}",
            out.content
        );
    }
}
