//! Fitting messages into a token budget: cut one oversized message in the middle (with a marker
//! saying how much was elided and, for tool results, where the full text was kept), and trim a
//! conversation by dropping its oldest user turns, then cutting the largest messages.
//!
//! Used by forks (whose prompt must fit the window) and by compaction (no message is too big to
//! compact). Cuts only touch text; tool-use/tool-result pairing is never changed, so the
//! [invariant checker](crate::invariants::check_invariants) holds afterwards.

use crate::message::{ContentBlock, Message, Role, ToolResultContent};
use crate::tokens::{TokenCounter, estimate_message, estimate_messages};
use memloop_text::truncate_utf8;
use std::path::{Path, PathBuf};

/// A cut never shrinks a block below this many tokens of kept text.
pub const MIN_KEPT_TOKENS: u64 = 64;

/// Tokens set aside for the marker of one cut.
const MARKER_TOKENS: u64 = 48;

/// Sub-directory of the spill directory holding the full text of cut tool results.
pub const TOOL_RESULTS_DIR: &str = "tool-results";

/// Keep the first and last `keep_bytes / 2` bytes of `text` (on character boundaries) and put a
/// marker saying how many characters were elided in between; `note` is appended to the marker
/// (e.g. where the full text is). Text that already fits is returned unchanged.
///
/// ```
/// use memloop_core::fit::cut_middle;
/// let text = format!("{}{}{}", "a".repeat(100), "b".repeat(1_000), "c".repeat(100));
/// let cut = cut_middle(&text, 200, "");
/// assert!(cut.starts_with(&"a".repeat(100)) && cut.ends_with(&"c".repeat(100)));
/// assert!(cut.contains("[... 1,000 characters elided from the middle ...]"));
/// ```
pub fn cut_middle(text: &str, keep_bytes: usize, note: &str) -> String {
    if text.len() <= keep_bytes {
        return text.to_owned();
    }
    let head = truncate_utf8(text, keep_bytes / 2);
    let mut tail_start = text.len() - keep_bytes / 2;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let tail = &text[tail_start..];
    let elided = text[head.len()..tail_start].chars().count();
    format!(
        "{head}\n\n[... {} characters elided from the middle{note} ...]\n\n{tail}",
        thousands(elided as u64)
    )
}

/// `12345` → `12,345`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Write the full text of a tool result under `dir/tool-results/` (unless that call's text is
/// already kept there) and return the path.
pub(crate) fn spill(dir: &Path, tool_use_id: &str, text: &str) -> Option<PathBuf> {
    let name: String = tool_use_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = dir.join(TOOL_RESULTS_DIR);
    let path = dir.join(format!("{name}.txt"));
    // Call ids are unique, and the first spill of a call is its fullest text (the engine's cap
    // keeps the whole output; a later compaction only sees the capped version): never replace it.
    if path.is_file() {
        return Some(path);
    }
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text));
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot keep the full tool result");
            None
        }
    }
}

/// Tokens of the block's cuttable text (text blocks and text tool results; thinking carries a
/// signature and tool inputs are JSON, so neither is cut).
fn cuttable_tokens(counter: &dyn TokenCounter, block: &ContentBlock) -> u64 {
    match block {
        ContentBlock::Text { text } => counter.count(text),
        ContentBlock::ToolResult {
            content: ToolResultContent::Text(t),
            ..
        } => counter.count(t),
        _ => 0,
    }
}

/// Cut the largest text blocks of `message` in the middle until its estimate is at most about
/// `max_tokens`. The full text of a cut tool result is written under
/// `spill_dir/tool-results/<tool_use_id>.txt` and the marker names that file. Returns `None`
/// when the message already fits or has nothing left to cut. The cut message loses its usage
/// (it described the uncut context).
pub fn cut_message(
    message: &Message,
    max_tokens: u64,
    counter: &dyn TokenCounter,
    spill_dir: Option<&Path>,
) -> Option<Message> {
    let total = estimate_message(counter, message);
    if total <= max_tokens {
        return None;
    }
    let mut over = total - max_tokens;
    let mut order: Vec<(usize, u64)> = message
        .content
        .iter()
        .enumerate()
        .map(|(i, b)| (i, cuttable_tokens(counter, b)))
        .filter(|&(_, t)| t > MIN_KEPT_TOKENS + MARKER_TOKENS)
        .collect();
    order.sort_by_key(|&(_, t)| std::cmp::Reverse(t));
    let mut out = message.clone();
    let mut changed = false;
    for (i, tokens) in order {
        if over == 0 {
            break;
        }
        let keep_tokens = tokens
            .saturating_sub(over + MARKER_TOKENS)
            .max(MIN_KEPT_TOKENS);
        if keep_tokens + MARKER_TOKENS >= tokens {
            continue;
        }
        over = over.saturating_sub(tokens - keep_tokens - MARKER_TOKENS);
        let ratio = keep_tokens as f64 / tokens as f64;
        match &mut out.content[i] {
            ContentBlock::Text { text } => {
                let keep = (text.len() as f64 * ratio) as usize;
                *text = cut_middle(text, keep, "");
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content: ToolResultContent::Text(t),
                ..
            } => {
                let keep = (t.len() as f64 * ratio) as usize;
                let note = match spill_dir.and_then(|d| spill(d, tool_use_id, t)) {
                    Some(p) => format!("; the full output is in {}", p.display()),
                    None => "; the full output was not kept".to_owned(),
                };
                *t = cut_middle(t, keep, &note);
            }
            _ => continue,
        }
        changed = true;
    }
    changed.then(|| {
        out.usage = None;
        out
    })
}

/// Cut every message of `messages` larger than `max_tokens` (see [`cut_message`]); returns how
/// many were cut.
pub fn cut_oversized(
    messages: &mut [Message],
    max_tokens: u64,
    counter: &dyn TokenCounter,
    spill_dir: Option<&Path>,
) -> usize {
    let mut n = 0;
    for m in messages.iter_mut() {
        if let Some(cut) = cut_message(m, max_tokens, counter, spill_dir) {
            *m = cut;
            n += 1;
        }
    }
    n
}

/// Fit `messages` into `budget` tokens: first drop the oldest user turns (a turn starts at a user
/// message that holds no tool results, so tool pairs stay whole; the newest turn is always
/// kept), then cut the largest remaining messages in the middle. `None` when even that cannot
/// fit (e.g. the budget is smaller than what cannot be cut).
///
/// ```
/// use memloop_core::{fit::fit_messages, message::Message, tokens::CharEstimator};
/// let conv = vec![
///     Message::user("old question"),
///     Message::assistant("x".repeat(40_000)),
///     Message::user("new question"),
///     Message::assistant("y".repeat(40_000)),
/// ];
/// let fitted = fit_messages(&conv, 2_000, &CharEstimator, None).unwrap();
/// assert_eq!(fitted[0].text(), "new question"); // the oldest turn went first
/// assert!(fitted[1].text().contains("elided from the middle")); // then the reply was cut
/// ```
pub fn fit_messages(
    messages: &[Message],
    budget: u64,
    counter: &dyn TokenCounter,
    spill_dir: Option<&Path>,
) -> Option<Vec<Message>> {
    let sizes: Vec<u64> = messages
        .iter()
        .map(|m| estimate_message(counter, m))
        .collect();
    let mut total: u64 = sizes.iter().sum();
    if total <= budget {
        return Some(messages.to_vec());
    }
    let starts: Vec<usize> = (1..messages.len())
        .filter(|&i| {
            messages[i].role == Role::User && messages[i].tool_result_ids().next().is_none()
        })
        .collect();
    let mut start = 0;
    for &s in &starts {
        total -= sizes[start..s].iter().sum::<u64>();
        start = s;
        if total <= budget {
            break;
        }
    }
    let mut out = messages[start..].to_vec();
    if start > 0 {
        tracing::info!(
            dropped = start,
            "left out the oldest messages to fit the budget"
        );
    }
    // Cut the largest message down by what is over, then the next largest, ...
    for _ in 0..out.len() * 2 + 2 {
        let total = estimate_messages(counter, &out);
        if total <= budget {
            return Some(out);
        }
        let (i, size) = out
            .iter()
            .enumerate()
            .map(|(i, m)| (i, estimate_message(counter, m)))
            .max_by_key(|&(_, s)| s)?;
        let target = size.saturating_sub(total - budget);
        match cut_message(&out[i], target, counter, spill_dir) {
            Some(cut) if estimate_message(counter, &cut) < size => out[i] = cut,
            _ => return None,
        }
    }
    (estimate_messages(counter, &out) <= budget).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants::check_invariants;
    use crate::tokens::CharEstimator;

    #[test]
    fn cut_middle_keeps_both_ends_on_char_boundaries() {
        let text = "é".repeat(1_000);
        let cut = cut_middle(&text, 101, "; see x");
        assert!(cut.contains("[... 950 characters elided from the middle; see x ...]"));
        assert!(cut.starts_with("éé") && cut.ends_with("éé"));
        assert_eq!(cut_middle("short", 100, ""), "short");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_huge_tool_result_is_cut_and_kept_in_a_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let big = format!("START{}END", "line of output\n".repeat(20_000));
        let msgs = vec![
            Message::user("run it"),
            Message::new(
                Role::Assistant,
                vec![ContentBlock::tool_use(
                    "call/1",
                    "shell",
                    serde_json::json!({}),
                )],
            ),
            Message::new(
                Role::User,
                vec![ContentBlock::tool_result("call/1", big.clone(), false)],
            ),
        ];
        let fitted = fit_messages(&msgs, 4_000, &CharEstimator, Some(dir.path()))
            .unwrap_or_else(|| panic!("fits"));
        assert!(estimate_messages(&CharEstimator, &fitted) <= 4_000);
        assert!(check_invariants(&fitted).is_ok());
        let text = fitted[2].content[0].clone();
        let ContentBlock::ToolResult { content, .. } = text else {
            panic!("tool result expected")
        };
        let text = content.text();
        assert!(
            text.starts_with("START") && text.ends_with("END"),
            "both ends kept"
        );
        let path = dir.path().join("tool-results/call_1.txt");
        assert!(text.contains(&path.display().to_string()), "{text:.300}");
        assert_eq!(std::fs::read_to_string(&path).ok(), Some(big));
    }

    #[test]
    fn nothing_cuttable_does_not_fit() {
        let msgs = vec![Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use(
                "t",
                "x",
                serde_json::json!({"pad": "p".repeat(4_000)}),
            )],
        )];
        assert!(fit_messages(&msgs, 100, &CharEstimator, None).is_none());
    }
}
