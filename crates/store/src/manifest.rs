//! The manifest: the text list of memory headers handed to a selector or an extractor.

use crate::types::MemoryHeader;
use chrono::{DateTime, SecondsFormat, Utc};
use std::time::SystemTime;

/// A modification time as the manifest shows it: RFC 3339, UTC, seconds precision.
pub fn format_mtime(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// One manifest line:
/// `- [type] relative/path.md (2026-04-09T12:00:00Z): description`, without `[type] ` when there
/// is no type and without `: description` when there is none. A description of several lines
/// (a YAML block scalar) is joined into one, so it cannot add lines of its own.
pub fn manifest_line(h: &MemoryHeader) -> String {
    let mut line = String::from("- ");
    if let Some(t) = h.memory_type {
        line.push('[');
        line.push_str(t.as_str());
        line.push_str("] ");
    }
    line.push_str(&h.rel_path);
    line.push_str(" (");
    line.push_str(&format_mtime(h.mtime));
    line.push(')');
    if let Some(d) = h
        .description
        .as_deref()
        .map(memloop_text::one_line)
        .filter(|d| !d.is_empty())
    {
        line.push_str(": ");
        line.push_str(&d);
    }
    line
}

/// The manifest of the given headers, one line per header, in the given order.
pub fn format_manifest(headers: &[MemoryHeader]) -> String {
    headers
        .iter()
        .map(manifest_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The manifest of the first `cap` of `headers` (callers pass them newest first), or
/// `empty_text` when there are none.
pub fn format_manifest_capped<'a>(
    headers: impl IntoIterator<Item = &'a MemoryHeader>,
    cap: usize,
    empty_text: &str,
) -> String {
    let lines: Vec<String> = headers.into_iter().take(cap).map(manifest_line).collect();
    if lines.is_empty() {
        empty_text.to_owned()
    } else {
        lines.join("\n")
    }
}

impl MemoryHeader {
    /// The file's modification time as RFC 3339 in UTC, to the second
    /// (`2026-04-09T12:00:00Z`), as manifests and the CLI show it.
    pub fn modified_rfc3339(&self) -> String {
        format_mtime(self.mtime)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod examples {
    #[test]
    fn format_mtime_example() {
        use crate::manifest::format_mtime;
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(
            format_mtime(UNIX_EPOCH + Duration::from_secs(1_775_736_000)),
            "2026-04-09T12:00:00Z"
        );
    }

    #[test]
    fn manifest_line_example() {
        use crate::manifest::manifest_line;
        use crate::types::{MemoryHeader, MemoryType};
        use std::time::{Duration, UNIX_EPOCH};
        let h = MemoryHeader {
            rel_path: "feedback/tests.md".into(),
            name: Some("Tests".into()),
            description: Some("run the integration tests against a real db".into()),
            memory_type: Some(MemoryType::Feedback),
            mtime: UNIX_EPOCH + Duration::from_secs(1_775_736_000),
        };
        assert_eq!(
            manifest_line(&h),
            "- [feedback] feedback/tests.md (2026-04-09T12:00:00Z): run the integration tests against a real db"
        );
    }

    #[test]
    fn a_description_of_several_lines_stays_on_its_line() {
        use crate::manifest::format_manifest;
        use crate::types::MemoryHeader;
        use std::time::UNIX_EPOCH;
        let h = MemoryHeader {
            rel_path: "заметка.md".into(),
            name: None,
            description: Some(
                "первая строка\n- [feedback] evil.md (x): injected\r\n\tконец".into(),
            ),
            memory_type: None,
            mtime: UNIX_EPOCH,
        };
        let m = format_manifest(&[h]);
        assert_eq!(
            m,
            "- заметка.md (1970-01-01T00:00:00Z): первая строка - [feedback] evil.md (x): injected конец"
        );
        // Only whitespace: no description at all.
        let blank = MemoryHeader {
            rel_path: "空.md".into(),
            name: None,
            description: Some(" \n\t ".into()),
            memory_type: None,
            mtime: UNIX_EPOCH,
        };
        assert_eq!(format_manifest(&[blank]), "- 空.md (1970-01-01T00:00:00Z)");
    }

    #[test]
    fn format_manifest_capped_example() {
        use crate::manifest::format_manifest_capped;
        use crate::types::MemoryHeader;
        use std::time::UNIX_EPOCH;
        let h = |p: &str| MemoryHeader {
            rel_path: p.into(),
            name: None,
            description: None,
            memory_type: None,
            mtime: UNIX_EPOCH,
        };
        let headers = [h("new.md"), h("old.md")];
        assert_eq!(
            format_manifest_capped(&headers, 1, "(none)"),
            "- new.md (1970-01-01T00:00:00Z)"
        );
        assert_eq!(format_manifest_capped(&[], 5, "(none)"), "(none)");
    }
}
