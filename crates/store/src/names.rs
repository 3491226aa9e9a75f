//! Validation of memory names: topic names typed by a model and relative paths given to stores.

use crate::types::MemoryError;

fn invalid(name: &str, reason: &str) -> MemoryError {
    MemoryError::InvalidName {
        name: shown_name(name),
        reason: reason.to_owned(),
    }
}

/// `name` as an error message shows it: every control character escaped (`\n`, `\0`,
/// `\u{1b}`), so the message stays one line in a log and cannot drive a terminal; every other
/// character, in any script, as it was given.
pub fn shown_name(name: &str) -> String {
    escape_controls(name, |_| false)
}

/// `text` as served to a client (every tool answer, every line of every memory): each control
/// character other than line feed and tab (ESC of a terminal escape sequence, BEL, carriage
/// return, DEL, the C1 controls) escaped as [`char::escape_default`] writes it (`\u{1b}`), so
/// served text cannot drive the terminal that shows it; a carriage return ending a line (CRLF)
/// is dropped. Text without such a character is returned as it is, unallocated. The same
/// characters the write rule refuses in a title or description.
///
/// ```
/// let served = memloop_store::printable("one\ntwo\tthree\n\x1b]0;pwned\x07\x1b[2J\r\n");
/// assert_eq!(served, "one\ntwo\tthree\n\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\n");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(escape_controls(&text.replace("\r\n", "\n"), |c| {
        c == '\n' || c == '\t'
    }))
}

/// `text` with every control character but those `keep` accepts escaped (NUL as `\0`).
fn escape_controls(text: &str, keep: fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            c if keep(c) => out.push(c),
            '\0' => out.push_str("\\0"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// Longest topic name accepted.
const MAX_TOPIC_CHARS: usize = 200;

/// Validate a topic name from a tool: non-empty, at most 200 characters, no
/// `..`, `/`, `\`, NUL or other control characters, no leading `.`.
pub fn validate_topic(topic: &str) -> Result<&str, MemoryError> {
    let t = topic;
    if t.trim().is_empty() {
        return Err(invalid(t, "it is empty"));
    }
    if t.chars().count() > MAX_TOPIC_CHARS {
        return Err(invalid(t, "it is longer than 200 characters"));
    }
    if t.contains('\0') {
        return Err(invalid(t, "it contains a NUL character"));
    }
    if t.contains("..") {
        return Err(invalid(t, "it contains `..`"));
    }
    if t.contains('/') || t.contains('\\') {
        return Err(invalid(
            t,
            "it contains a path separator; use a plain name like `testing_prefs`",
        ));
    }
    if t.starts_with('.') {
        return Err(invalid(t, "it starts with `.`"));
    }
    if t.chars().any(char::is_control) {
        return Err(invalid(t, "it contains a control character"));
    }
    Ok(t)
}

/// The relative path of a topic: `<topic>.md` (a trailing `.md` is not doubled), and
/// `team/<topic>.md` for a team memory's `team/<topic>` (see
/// [`MemoryScope`](crate::MemoryScope)); no other `/` is allowed. `MEMORY` names the
/// index and is not a topic.
///
/// ```
/// use memloop_store::topic_to_rel_path;
/// assert_eq!(topic_to_rel_path("feedback_testing")?, "feedback_testing.md");
/// assert_eq!(topic_to_rel_path("team/发布流程")?, "team/发布流程.md");
/// assert!(topic_to_rel_path("team/../x").is_err());
/// assert!(topic_to_rel_path("team/team/x").is_err());
/// # Ok::<(), memloop_store::MemoryError>(())
/// ```
pub fn topic_to_rel_path(topic: &str) -> Result<String, MemoryError> {
    match crate::team::team_relative(topic) {
        Some(rest) => Ok(format!(
            "{}/{}",
            crate::team::TEAM_DIR,
            plain_topic_path(rest)?
        )),
        None => plain_topic_path(topic),
    }
}

fn plain_topic_path(topic: &str) -> Result<String, MemoryError> {
    let t = validate_topic(topic)?;
    let stem = t.strip_suffix(".md").unwrap_or(t);
    if stem.is_empty() {
        return Err(invalid(t, "it is empty"));
    }
    if stem.eq_ignore_ascii_case("MEMORY") {
        return Err(invalid(t, "MEMORY is the index, not a topic"));
    }
    Ok(format!("{stem}.md"))
}

/// Validate a store-relative path (the `MemoryStore` contract): `/`-separated segments that
/// each pass the topic rules (so no `..`, `\`, NUL, leading `.` or empty segment), no leading
/// `/`, ending in `.md`, and not `MEMORY.md`.
pub fn validate_rel_path(rel: &str) -> Result<&str, MemoryError> {
    if rel.starts_with('/') {
        return Err(invalid(rel, "absolute paths are not allowed"));
    }
    for seg in rel.split('/') {
        validate_topic(seg).map_err(|e| match e {
            MemoryError::InvalidName { reason, .. } => {
                invalid(rel, &format!("segment `{seg}` is not allowed: {reason}"))
            }
            other => other,
        })?;
    }
    if !rel.ends_with(".md") {
        return Err(invalid(rel, "memory files must end in `.md`"));
    }
    if rel.rsplit('/').next() == Some("MEMORY.md") {
        return Err(invalid(rel, "MEMORY.md is the index, not a memory"));
    }
    Ok(rel)
}

/// What a memory read names: a topic (`feedback_testing`) or a store-relative path as the
/// memory list, the index and the daily logs show it (`team/grafana.md`,
/// `logs/2026/04/2026-04-09`); `.md` is added when missing.
pub fn read_target_to_rel_path(target: &str) -> Result<String, MemoryError> {
    if !target.contains('/') {
        return topic_to_rel_path(target);
    }
    let rel = if target.ends_with(".md") {
        target.to_owned()
    } else {
        format!("{target}.md")
    };
    validate_rel_path(&rel)?;
    Ok(rel)
}

/// Longest readable part of a file name made from a title.
const MAX_STEM_CHARS: usize = 60;

/// What makes two titles the same title: the title in Unicode compatibility form (NFKC, so
/// fullwidth `ＤＢ` is `DB`), lowercased, with every run of whitespace or control characters
/// turned into one space and trimmed. Everything else, punctuation included, is kept: `C++` and
/// `C#` are different titles.
///
/// ```
/// use memloop_store::title_key;
/// assert_eq!(title_key("  Use   Postgres 16! "), "use postgres 16!");
/// assert_eq!(title_key("Не использовать Postgres"), "не использовать postgres");
/// assert_eq!(title_key("ＤＢ  choice"), title_key("db choice"));
/// assert_ne!(title_key("C++"), title_key("C#"));
/// ```
pub fn title_key(title: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let mut key = String::new();
    for c in title.nfkc().flat_map(char::to_lowercase) {
        if c.is_whitespace() || c.is_control() {
            if !key.is_empty() && !key.ends_with(' ') {
                key.push(' ');
            }
        } else {
            key.push(c);
        }
    }
    key.trim_end().to_owned()
}

/// `text` in lowercase ASCII letters and digits, each other run turned into one `-`, at most
/// `max` characters.
fn ascii_slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if out.len() >= max {
                break;
            }
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// Whether `stem` (lowercase) is a device name Windows reserves whatever the extension.
fn windows_device(stem: &str) -> bool {
    matches!(stem, "con" | "prn" | "aux" | "nul")
        || matches!(
            stem.as_bytes(),
            [b'c', b'o', b'm', b'1'..=b'9'] | [b'l', b'p', b't', b'1'..=b'9']
        )
}

/// The file stem (name without `.md`) for an entry keyed by a free-form title, in any script.
/// Readable, stable (the same title gives the same stem on every run and machine) and
/// one-to-one: two titles with different [`title_key`]s never share a stem.
///
/// - A title made only of ASCII letters, digits and spaces, at most 60 characters: its key with
///   spaces as `-` (`Deploy days` → `deploy-days`), unless that is a name Windows reserves for
///   a device (`con`, `prn`, `aux`, `nul`, `com1`–`com9`, `lpt1`–`lpt9`: such a file cannot be
///   created or checked out there), which takes the form below.
/// - Any other title (punctuation, letters outside ASCII, emoji, no letter or digit at all, or
///   longer than 60 characters): the title transliterated to ASCII (at most 60 characters,
///   `fallback` when nothing is left), `_`, and 8 hex digits of the SHA-256 of its key
///   (`Не использовать Postgres` → `ne-ispolzovat-postgres_…`, `C++` → `c_…`). A plain stem
///   never contains `_`, so the two forms never meet.
///
/// ```
/// use memloop_store::title_file_stem;
/// assert_eq!(title_file_stem("Deploy days", "decision"), "deploy-days");
/// let a = title_file_stem("Использовать Postgres", "decision");
/// let b = title_file_stem("Не использовать Postgres", "decision");
/// assert!(a.starts_with("ispolzovat-postgres_") && b.starts_with("ne-ispolzovat-postgres_"));
/// assert_ne!(title_file_stem("🎉", "knowledge"), title_file_stem("🚀", "knowledge"));
/// assert_ne!(title_file_stem("C++", "knowledge"), title_file_stem("C#", "knowledge"));
/// ```
pub fn title_file_stem(title: &str, fallback: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut key = title_key(title);
    let plain = key
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b' ');
    if plain && !key.is_empty() && key.len() <= MAX_STEM_CHARS && !windows_device(&key) {
        return key.replace(' ', "-");
    }
    if key.is_empty() {
        // Only whitespace: the title itself tells titles apart.
        key = title.trim().to_owned();
    }
    let mut readable = ascii_slug(
        &deunicode::deunicode(&key).replace('\'', ""),
        MAX_STEM_CHARS,
    );
    if readable.is_empty() {
        readable = ascii_slug(fallback, MAX_STEM_CHARS);
    }
    let hash: String = Sha256::digest(key.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    if readable.is_empty() {
        hash
    } else {
        format!("{readable}_{hash}")
    }
}

#[cfg(test)]
mod examples {
    use super::*;

    #[test]
    fn windows_device_names_never_become_file_stems() {
        for title in ["CON", "aux", "Nul", "COM1", "lpt9"] {
            let stem = title_file_stem(title, "knowledge");
            assert!(
                stem.starts_with(&format!("{}_", title.to_ascii_lowercase())),
                "{title}: {stem}"
            );
        }
        for title in ["console", "com10", "aux port", "lpt", "com0"] {
            assert!(
                !title_file_stem(title, "knowledge").contains('_'),
                "{title}"
            );
        }
    }

    #[test]
    fn validate_topic_example() {
        assert!(validate_topic("testing_prefs").is_ok());
        assert!(validate_topic("../etc/passwd").is_err());
        assert!(validate_topic(".hidden").is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_names_are_shown_on_one_line_without_control_characters() {
        for (name, shown_as) in [
            ("new\nline", "new\\nline"),
            ("отчёт\u{1b}[2J", "отчёт\\u{1b}[2J"),
            ("報告\r\u{7}", "報告\\r\\u{7}"),
            ("nul\0x", "nul\\0x"),
            ("c1\u{9b}31m", "c1\\u{9b}31m"),
        ] {
            let message = validate_topic(name).unwrap_err().to_string();
            assert!(message.contains(&format!("`{shown_as}`")), "{message}");
            assert!(!message.chars().any(char::is_control), "{message:?}");
        }
        assert_eq!(shown_name("데이터베이스 백업"), "데이터베이스 백업");
    }
}
