//! Turning one memory file into surfaced text: the per-file caps with the truncation note, and
//! the age header (`saved today`, `saved yesterday`, or `saved N days ago` after a staleness note).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const DAY: u64 = 24 * 60 * 60;

/// Where "now" comes from, so tests can cross day boundaries.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: SystemTime) -> Self {
        Self(Mutex::new(now))
    }

    /// Set the time.
    pub fn set(&self, now: SystemTime) {
        if let Ok(mut t) = self.0.lock() {
            *t = now;
        }
    }

    /// Move the time forward.
    pub fn advance(&self, by: Duration) {
        if let Ok(mut t) = self.0.lock() {
            *t += by;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        self.0.lock().map(|t| *t).unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// Whole days between `mtime` and `now` (24-hour periods, rounded down); 0 when `mtime` is in
/// the future.
pub fn age_days(now: SystemTime, mtime: SystemTime) -> u64 {
    now.duration_since(mtime).map_or(0, |d| d.as_secs() / DAY)
}

/// The header put before a surfaced memory: `Memory (saved today): <path>:` or `(saved
/// yesterday)` up to one day old; older memories get a staleness note, a blank line and
/// `Memory (saved N days ago): <path>:`.
pub fn memory_header(path: &str, days: u64) -> String {
    match days {
        0 => format!("Memory (saved today): {path}:"),
        1 => format!("Memory (saved yesterday): {path}:"),
        n => format!(
            "This memory is {n} days old. It records what was true when it was saved; claims \
             about code (files, functions, flags) may be outdated, so verify them before relying \
             on them.\n\nMemory (saved {n} days ago): {path}:"
        ),
    }
}

/// Which per-file cap cut a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// More than the line cap.
    pub by_lines: bool,
    /// More than the byte cap (after the line cap).
    pub by_bytes: bool,
}

/// The longest prefix of `content` made of whole lines with at most `max_lines` lines and at most
/// `max_bytes` bytes (a line's `\n` counts). When not even the first line fits, it is cut on a
/// char boundary. Returns the prefix and which cap fired, if any.
pub fn cut_whole_lines(content: &str, max_lines: usize, max_bytes: usize) -> (&str, Option<Cut>) {
    let mut end = 0;
    let mut by_lines = false;
    let mut by_bytes = false;
    for (lines, line) in content.split_inclusive('\n').enumerate() {
        if lines == max_lines {
            by_lines = true;
            break;
        }
        if end + line.len() > max_bytes {
            by_bytes = true;
            if lines == 0 {
                end = memloop_text::truncate_utf8(content, max_bytes).len();
            }
            break;
        }
        end += line.len();
    }
    let cut = (by_lines || by_bytes).then_some(Cut { by_lines, by_bytes });
    (&content[..end], cut)
}

/// The note appended to a cut memory: why, and where the rest is.
pub fn truncation_note(cut: Cut, max_lines: usize, max_bytes: usize, path: &str) -> String {
    let why = match (cut.by_lines, cut.by_bytes) {
        (true, true) => format!("more than {max_lines} lines and {max_bytes} bytes"),
        (true, false) => format!("more than {max_lines} lines"),
        _ => format!("more than {max_bytes} bytes"),
    };
    format!("[This memory was cut because it is {why}. Read the full file at {path} for the rest.]")
}

/// One memory rendered for surfacing: header, (possibly cut) content, note. Credential-shaped
/// text in the content (a hand-written file can hold one) is replaced by a `[redacted: ...]`
/// marker, since surfaced text is sent to the model provider.
pub fn render_surfaced(
    path: &str,
    content: &str,
    days: u64,
    max_lines: usize,
    max_bytes: usize,
) -> String {
    let (content, _) = memloop_secrets::redact_secrets(content);
    let (kept, cut) = cut_whole_lines(&content, max_lines, max_bytes);
    let mut out = memory_header(path, days);
    out.push('\n');
    out.push_str(kept.trim_end_matches('\n'));
    if let Some(cut) = cut {
        out.push('\n');
        out.push_str(&truncation_note(cut, max_lines, max_bytes, path));
    }
    out
}

/// The rest of `line` after `Memory (saved N days ago): `, for a whole number N.
fn saved_days_ago(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("Memory (saved ")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    rest[digits..].strip_prefix(" days ago): ")
}

/// The memories a recall attachment in the conversation surfaced: for a text block rendered as
/// a `<system-reminder>` holding [`render_surfaced`] blocks joined by blank lines, the path shown
/// in each block's [`memory_header`] and the bytes the blocks took (what the session budget
/// counted). `None` for any other text.
pub fn surfaced_in(text: &str) -> Option<(Vec<String>, usize)> {
    let inner = text
        .strip_prefix("<system-reminder>\n")?
        .strip_suffix("\n</system-reminder>")?;
    let mut paths = Vec::new();
    for line in inner.lines() {
        let rest = line
            .strip_prefix("Memory (saved today): ")
            .or_else(|| line.strip_prefix("Memory (saved yesterday): "))
            .or_else(|| saved_days_ago(line))
            // Attachments written before the header named the age.
            .or_else(|| line.strip_prefix("Memory: "));
        if let Some(path) = rest.and_then(|r| r.strip_suffix(':')) {
            paths.push(path.to_owned());
        }
    }
    if paths.is_empty() {
        return None;
    }
    let separators = 2 * (paths.len() - 1);
    Some((paths, inner.len().saturating_sub(separators)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_byte_exact_at_whole_lines() {
        let lines: String = (0..250).map(|i| format!("line {i}\n")).collect();
        let (kept, cut) = cut_whole_lines(&lines, 200, 4_096);
        assert_eq!(kept.lines().count(), 200);
        assert!(kept.ends_with("line 199\n"));
        assert!(cut.unwrap().by_lines && !cut.unwrap().by_bytes);

        let hundred = format!("{}\n", "x".repeat(99));
        let big = hundred.repeat(41); // 4,100 bytes
        let (kept, cut) = cut_whole_lines(&big, 200, 4_096);
        assert_eq!(kept.len(), 4_000);
        assert!(cut.unwrap().by_bytes);

        let exact = format!("{}{}", hundred.repeat(40), "y".repeat(96)); // exactly 4,096 bytes
        assert_eq!(cut_whole_lines(&exact, 200, 4_096), (exact.as_str(), None));

        let wide = "é".repeat(3_000); // one 6,000-byte line: hard cut on a char boundary
        let (kept, cut) = cut_whole_lines(&wide, 200, 4_096);
        assert_eq!(kept.len(), 4_096);
        assert!(cut.unwrap().by_bytes);
        let shifted = format!("a{wide}");
        let (kept, _) = cut_whole_lines(&shifted, 200, 4_096);
        assert_eq!(kept.len(), 4_095);

        let shown = render_surfaced("/m/big.md", &big, 0, 200, 4_096);
        assert!(
            shown.ends_with("more than 4096 bytes. Read the full file at /m/big.md for the rest.]")
        );
    }

    #[test]
    fn age_days_example() {
        use std::time::{Duration, UNIX_EPOCH};
        let t = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(age_days(t + Duration::from_secs(86_399), t), 0);
        assert_eq!(age_days(t + Duration::from_secs(86_400), t), 1);
        assert_eq!(age_days(t, t + Duration::from_secs(5)), 0);
    }

    #[test]
    fn memory_header_example() {
        assert_eq!(
            memory_header("/m/a.md", 0),
            "Memory (saved today): /m/a.md:"
        );
        assert!(memory_header("/m/a.md", 3).starts_with("This memory is 3 days old"));
        assert!(memory_header("/m/a.md", 3).ends_with("\n\nMemory (saved 3 days ago): /m/a.md:"));
    }

    #[test]
    fn cut_whole_lines_example() {
        let (kept, cut) = cut_whole_lines("ab\ncd\nef\n", 10, 6);
        assert_eq!(kept, "ab\ncd\n");
        assert!(cut.unwrap().by_bytes);
    }

    #[test]
    fn render_surfaced_example() {
        let text = render_surfaced(
            "/m/a.md",
            "key: ghp_abcdefghijklmnopqrstuvwxyz0123456789\n",
            0,
            200,
            4096,
        );
        assert!(text.contains("[redacted: ") && !text.contains("ghp_abc"));
    }

    #[test]
    fn surfaced_in_example() {
        let a = render_surfaced("/m/a.md", "alpha", 0, 200, 4096);
        let b = render_surfaced("/m/b.md", "beta", 9, 200, 4096);
        let block = format!("<system-reminder>\n{a}\n\n{b}\n</system-reminder>");
        let (paths, bytes) = surfaced_in(&block).unwrap();
        assert_eq!(paths, ["/m/a.md", "/m/b.md"]);
        assert_eq!(bytes, a.len() + b.len());
        assert!(surfaced_in("Memory: not an attachment:").is_none());
        // An attachment from before the header named the age still counts.
        let old = "<system-reminder>\nnote\n\nMemory: /m/c.md:\ngamma\n</system-reminder>";
        assert_eq!(surfaced_in(old).unwrap().0, ["/m/c.md"]);
    }
}
