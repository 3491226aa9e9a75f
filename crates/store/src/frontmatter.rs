//! Memory file frontmatter (`name`, `description`, `type`): parse, render and edit in place.
//!
//! Parsing is tolerant: a UTF-8 BOM and CRLF line ends are accepted; YAML a strict parser rejects
//! (an unquoted `: ` or a leading backtick in a description) is retried after quoting the values
//! of simple `key: value` lines; if that fails too the file has no frontmatter and is listed by
//! its filename.
//!
//! **Typing rule.** `type` is an exact lowercase match of `user`, `feedback`, `project` or
//! `reference`; anything else is "no type". Claude Code agent-memory dirs also write the type
//! nested as `metadata:` / `  type: X`: when the top-level `type` key is *absent*, memloop reads
//! `metadata.type` with the same rule. A present but unknown top-level `type` wins (no type), so
//! a file never gets two answers.

use crate::types::{MemoryDoc, MemoryType};
use memloop_text::frontmatter::{
    Closing, Split, double_quoted, parse_mapping, parse_strict_mapping, split,
};
use serde_norway::{Mapping, Value};

/// The parsed frontmatter fields memloop uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frontmatter {
    /// `name`.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `type` (or `metadata.type` when `type` is absent), if it is one of the four.
    pub memory_type: Option<MemoryType>,
    /// Whether the YAML only parsed after the quoting retry.
    pub repaired: bool,
}

/// A memory file split into frontmatter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedMemory<'a> {
    /// The frontmatter, when present and parseable.
    pub frontmatter: Option<Frontmatter>,
    /// The body: the text after the closing `---` line minus one blank separator line; the whole
    /// text (without BOM) when there is no usable frontmatter.
    pub body: &'a str,
}

fn strip_separator(body: &str) -> &str {
    body.strip_prefix("\r\n")
        .or_else(|| body.strip_prefix('\n'))
        .unwrap_or(body)
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn fields(m: &Mapping, repaired: bool) -> Frontmatter {
    let get = |k: &str| m.get(k).and_then(as_text).map(|s| s.trim().to_owned());
    let memory_type = match m.get("type") {
        Some(v) => as_text(v).and_then(|s| MemoryType::parse(s.trim())),
        None => m
            .get("metadata")
            .and_then(|md| md.get("type"))
            .and_then(as_text)
            .and_then(|s| MemoryType::parse(s.trim())),
    };
    Frontmatter {
        name: get("name").filter(|s| !s.is_empty()),
        description: get("description").filter(|s| !s.is_empty()),
        memory_type,
        repaired,
    }
}

/// Parse a memory file (or its first lines, as the scan does).
pub fn parse_memory(text: &str) -> ParsedMemory<'_> {
    let no_bom = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Split {
        frontmatter: Some(yaml),
        body,
    } = split(text, Closing::Dashes)
    else {
        return ParsedMemory {
            frontmatter: None,
            body: no_bom,
        };
    };
    let fm = match parse_strict_mapping(yaml) {
        Some(m) => Some(fields(&m, false)),
        None => parse_mapping(yaml).map(|m| fields(&m, true)),
    };
    match fm {
        Some(f) => ParsedMemory {
            frontmatter: Some(f),
            body: strip_separator(body),
        },
        None => {
            tracing::debug!("frontmatter is not valid YAML even after quoting; ignoring it");
            ParsedMemory {
                frontmatter: None,
                body: no_bom,
            }
        }
    }
}

/// A frontmatter value on one line: plain when YAML reads it back unchanged, else double-quoted.
fn yaml_value(s: &str) -> String {
    let one_line = memloop_text::one_line(s);
    let plain_ok =
        surely_plain(&one_line) || (!surely_not_plain(&one_line) && reads_back_plain(&one_line));
    if plain_ok {
        one_line
    } else {
        double_quoted(&one_line)
    }
}

/// Whether YAML reads `k: {one_line}` back as the string `one_line` itself.
fn reads_back_plain(one_line: &str) -> bool {
    parse_strict_mapping(&format!("k: {one_line}\n"))
        .and_then(|m| m.get("k").cloned())
        .is_some_and(|v| v == Value::String(one_line.to_owned()))
}

/// Whether YAML surely does not read `k: {one_line}` back as `one_line` (the parser is not
/// asked; a description with `: ` in it is common): a `: ` (a mapping inside the value) or ` #`
/// (a comment) anywhere, or a first character that starts a quoted scalar, a flow collection,
/// an anchor, alias, tag or block scalar, a comment, or no token at all. Erring towards `true`
/// costs only quotes: a double-quoted value always reads back.
fn surely_not_plain(one_line: &str) -> bool {
    one_line.contains(": ")
        || one_line.contains(" #")
        || one_line.starts_with([
            '"', '\'', '[', ']', '{', '}', '&', '*', '!', '|', '>', '#', '@', '`',
        ])
}

/// A cheap, conservative answer to [`reads_back_plain`] for the common title or description
/// (words, digits and plain punctuation): `true` only for text YAML surely reads back as the
/// same string; anything else (`false`) is asked of the parser. It starts with a letter (no
/// indicator, no number), holds no `: `, ` #`, quote, bracket, brace, flow or anchor indicator,
/// does not end with `:`, and is no word YAML resolves to something else (`true`, `null`,
/// `nan`, ...). Whitespace was collapsed by `one_line`.
fn surely_plain(one_line: &str) -> bool {
    let Some(first) = one_line.chars().next() else {
        return false;
    };
    if !first.is_alphabetic()
        || one_line.ends_with(':')
        || one_line.contains(": ")
        || one_line.contains(" #")
    {
        return false;
    }
    let safe = |c: char| {
        if c.is_ascii() {
            c.is_ascii_alphanumeric() || " .,;:_-+=/()?$^~<>".contains(c)
        } else {
            c.is_alphanumeric()
        }
    };
    if !one_line.chars().all(safe) {
        return false;
    }
    const RESOLVED: [&str; 14] = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf", "infinity",
        "none", "nil",
    ];
    let lower = one_line.to_lowercase();
    !RESOLVED.contains(&lower.as_str()) && lower.parse::<f64>().is_err()
}

/// Render a memory file in Claude Code's layout: `---`, `name`, `description`, `type` (when
/// set), `---`, a blank line, the body (newline-terminated).
pub fn render_memory(doc: &MemoryDoc) -> String {
    let mut out = format!(
        "---\nname: {}\ndescription: {}\n",
        yaml_value(&doc.name),
        yaml_value(&doc.description)
    );
    if let Some(t) = doc.memory_type {
        out.push_str(&format!("type: {t}\n"));
    }
    out.push_str("---\n\n");
    out.push_str(&doc.body);
    if !doc.body.is_empty() && !doc.body.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// `existing` (a memory file) with `doc.body` as its body and `doc`'s fields (non-empty
/// `name`/`description`, `Some` type) set in its frontmatter in place: every other frontmatter
/// line (unknown keys, comments, list formatting, key order) stays as written. Text without a
/// frontmatter block is rendered from `doc` alone. What [`WriteMode::ReplaceBody`] writes on
/// every store.
///
/// [`WriteMode::ReplaceBody`]: crate::WriteMode::ReplaceBody
///
/// ```
/// use memloop_store::{MemoryDoc, replace_body};
/// let old = "---\nname: Train\n# kept\ntags: [a, b]\n---\n\nTuesdays.\n";
/// let doc = MemoryDoc { name: "Train".into(), body: "Thursdays.".into(), ..MemoryDoc::default() };
/// assert_eq!(replace_body(old, &doc), "---\nname: Train\n# kept\ntags: [a, b]\n---\n\nThursdays.\n");
/// ```
pub fn replace_body(existing: &str, doc: &MemoryDoc) -> String {
    let body = parse_memory(existing).body;
    let head = if body.is_empty() {
        Some(existing)
    } else {
        existing.strip_suffix(body)
    };
    match head {
        Some(head) if head.trim_start_matches('\u{feff}').starts_with("---") => {
            append_to_existing(head, doc)
        }
        _ => render_memory(doc),
    }
}

/// Append `doc.body` to an existing file, keeping its frontmatter bytes except for the fields
/// `doc` changes (non-empty `name`/`description`, `Some` type), which are edited in place
/// (`metadata:`-nested `type` lines included). Line ends follow the existing file.
pub fn append_to_existing(existing: &str, doc: &MemoryDoc) -> String {
    let eol = if existing.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let new_body = doc.body.replace("\r\n", "\n").replace('\n', eol);
    let join = |old: &str| {
        let mut s = old.to_owned();
        if !s.is_empty() {
            if !s.ends_with('\n') {
                s.push_str(eol);
            }
            s.push_str(eol);
        }
        s.push_str(&new_body);
        if !s.ends_with('\n') {
            s.push_str(eol);
        }
        s
    };
    let parsed = parse_memory(existing);
    let (Some(fm), Some(yaml)) = (
        parsed.frontmatter.as_ref(),
        split(existing, Closing::Dashes).frontmatter,
    ) else {
        let merged = MemoryDoc {
            body: join(parsed.body),
            ..doc.clone()
        };
        return render_memory(&merged);
    };
    let mut lines: Vec<String> = yaml
        .lines()
        .map(|l| l.trim_end_matches('\r').to_owned())
        .collect();
    let mut changed = false;
    if !doc.name.trim().is_empty() && fm.name.as_deref() != Some(doc.name.trim()) {
        set_field(&mut lines, "name", &yaml_value(&doc.name));
        changed = true;
    }
    if !doc.description.trim().is_empty()
        && fm.description.as_deref() != Some(doc.description.trim())
    {
        set_field(&mut lines, "description", &yaml_value(&doc.description));
        changed = true;
    }
    if let Some(t) = doc.memory_type.filter(|t| fm.memory_type != Some(*t)) {
        set_field(&mut lines, "type", t.as_str());
        changed = true;
    }
    let bom = if existing.starts_with('\u{feff}') {
        "\u{feff}"
    } else {
        ""
    };
    let head = if !changed {
        // Keep the original bytes (BOM, fences, separator) up to the body.
        let body_at = existing.len() - parsed.body.len();
        existing[..body_at].to_owned()
    } else {
        format!("{bom}---{eol}{}{eol}---{eol}{eol}", lines.join(eol))
    };
    head + &join(parsed.body)
}

/// Replace a top-level `key:` line (or, for `type`, an indented `type:` line under `metadata:`),
/// or add the key before the closing fence.
fn set_field(lines: &mut Vec<String>, key: &str, value: &str) {
    let prefix = format!("{key}:");
    if let Some(l) = lines.iter_mut().find(|l| l.starts_with(&prefix)) {
        *l = format!("{key}: {value}");
        return;
    }
    if key == "type" {
        let meta = lines.iter().position(|l| l.trim_end() == "metadata:");
        if let Some(start) = meta {
            let nested = lines[start + 1..]
                .iter_mut()
                .take_while(|l| l.starts_with([' ', '\t']))
                .find(|l| l.trim_start().starts_with("type:"));
            if let Some(l) = nested {
                let indent = &l[..l.len() - l.trim_start().len()];
                *l = format!("{indent}type: {value}");
                return;
            }
        }
    }
    lines.push(format!("{key}: {value}"));
}

/// The canonical text of a memory file, unknown frontmatter keys included: the file parsed and
/// rendered again (as memloop writes a memory), then every frontmatter key memloop does not render
/// (`tags`, a `metadata:` block, a `type` that is none of the four, ...) appended in key order in
/// one YAML form. Two files that differ only in formatting (quoting, key order, line ends, a BOM,
/// comments) have the same canonical text; a changed value of any key changes it. `Err` as
/// [`MemoryDoc::parse`] when the text is not a memory file.
///
/// ```
/// use memloop_store::canonical_memory_text;
/// let a = canonical_memory_text("---\r\ntags: [部署]\r\nname: \"Deploys\"\r\ndescription: when\r\n---\r\n\r\nBody\n", "x").unwrap();
/// let b = canonical_memory_text("---\nname: Deploys\ndescription: when\n# note\ntags:\n  - 部署\n---\n\nBody\n", "x").unwrap();
/// assert_eq!(a, b);
/// assert!(a.contains("部署"));
/// ```
pub fn canonical_memory_text(text: &str, fallback_name: &str) -> Result<String, String> {
    let doc = MemoryDoc::parse(text, fallback_name)?;
    let rendered = render_memory(&doc);
    let extras = split(text, Closing::Dashes)
        .frontmatter
        .and_then(parse_mapping)
        .map(|m| unknown_keys(&m, &doc))
        .unwrap_or_default();
    if extras.is_empty() {
        return Ok(rendered);
    }
    let yaml = serde_norway::to_string(&Value::Mapping(extras))
        .map_err(|e| format!("the frontmatter cannot be written back as YAML: {e}"))?;
    // `rendered` starts with `---\n` and the known fields; insert the extra keys before the
    // closing fence.
    let Some(close) = rendered.find("\n---\n") else {
        return Ok(rendered);
    };
    let mut out = rendered[..close + 1].to_owned();
    out.push_str(&yaml);
    if !yaml.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&rendered[close + 1..]);
    Ok(out)
}

/// The frontmatter keys [`render_memory`] does not write, sorted by key: all but `name`,
/// `description`, and a `type` that is one of the four (rendered as `type:`).
fn unknown_keys(m: &Mapping, doc: &MemoryDoc) -> Mapping {
    let mut keys: Vec<(String, Value)> = m
        .iter()
        .filter_map(|(k, v)| {
            let key = as_text(k)?;
            let known = match key.as_str() {
                "name" | "description" => true,
                "type" => as_text(v)
                    .and_then(|s| MemoryType::parse(s.trim()))
                    .is_some_and(|t| doc.memory_type == Some(t)),
                _ => false,
            };
            (!known).then_some((key, v.clone()))
        })
        .collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys.into_iter()
        .map(|(k, v)| (Value::String(k), v))
        .collect()
}

/// Memory files as text: the format the memory dir (`memloop-files`) writes.
impl MemoryDoc {
    /// Parse a memory file's text (a `---` frontmatter with `name`, `description`, `type`, then
    /// the body). A missing `name` falls back to `fallback_name` (e.g. the file stem). `Err` says,
    /// in words a user can act on, why the text is not a memory file.
    ///
    /// ```
    /// use memloop_store::{MemoryDoc, MemoryType};
    /// let doc = MemoryDoc::parse("---\nname: Deploys\ndescription: when\ntype: project\n---\n\nTuesdays.\n", "x").unwrap();
    /// assert_eq!(doc.memory_type, Some(MemoryType::Project));
    /// assert_eq!(doc.body, "Tuesdays.\n");
    /// assert!(MemoryDoc::parse("no frontmatter", "x").is_err());
    /// ```
    pub fn parse(text: &str, fallback_name: &str) -> Result<MemoryDoc, String> {
        let parsed = parse_memory(text);
        let Some(fm) = parsed.frontmatter else {
            return Err(if text.trim_start_matches('\u{feff}').starts_with("---") {
                "the frontmatter is not valid YAML (or its closing `---` is missing)".into()
            } else {
                "the file has no frontmatter (`---`, name, description, type, `---`)".into()
            });
        };
        Ok(MemoryDoc {
            name: fm
                .name
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| fallback_name.to_owned()),
            description: fm.description.unwrap_or_default(),
            memory_type: fm.memory_type,
            body: parsed.body.to_owned(),
        })
    }

    /// The file text the memory dir (`memloop-files`) writes for this memory.
    pub fn render(&self) -> String {
        render_memory(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod cases;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod examples {
    #[test]
    fn parse_memory_example() {
        use crate::frontmatter::parse_memory;
        use crate::types::MemoryType;
        let p = parse_memory(
            "---\r\nname: Tests\r\ndescription: use: real db\r\ntype: feedback\r\n---\r\n\r\nBody\r\n",
        );
        let fm = p.frontmatter.unwrap();
        assert_eq!(fm.description.as_deref(), Some("use: real db"));
        assert_eq!(fm.memory_type, Some(MemoryType::Feedback));
        assert_eq!(p.body, "Body\r\n");
    }

    #[test]
    fn render_memory_example() {
        use crate::frontmatter::{parse_memory, render_memory};
        use crate::types::{MemoryDoc, MemoryType};
        let doc = MemoryDoc {
            name: "Tests".into(),
            description: "real db only".into(),
            memory_type: Some(MemoryType::Feedback),
            body: "Use the real db.\n".into(),
        };
        let text = render_memory(&doc);
        assert_eq!(
            text,
            "---\nname: Tests\ndescription: real db only\ntype: feedback\n---\n\nUse the real db.\n"
        );
        assert_eq!(parse_memory(&text).body, doc.body);
    }
}
