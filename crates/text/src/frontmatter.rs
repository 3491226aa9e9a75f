//! The leading frontmatter block of a Markdown file (memory files, instruction files, sub-agent
//! definitions): where it starts and ends, and its YAML mapping, parsed with one repair for the
//! most common hand-written mistake (an unquoted `: ` inside a value).
//!
//! ```
//! use memloop_text::frontmatter::{Closing, parse_mapping, split};
//! let text = "---\nname: Deploy: Tuesdays\n---\nBody.\n";
//! let parts = split(text, Closing::Dashes);
//! assert_eq!(parts.body, "Body.\n");
//! let map = parse_mapping(parts.frontmatter.unwrap_or_default()).expect("repaired");
//! assert_eq!(map.get("name").and_then(|v| v.as_str()), Some("Deploy: Tuesdays"));
//! ```

use regex::Regex;
use serde_norway::{Mapping, Value};
use std::sync::OnceLock;

/// Which lines close a leading frontmatter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// Only a `---` line (memory files).
    Dashes,
    /// A `---` or a YAML document-end `...` line (instruction files).
    DashesOrDots,
}

/// A text split into its frontmatter (without the fences) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The frontmatter text, when the text starts with a closed `---` block.
    pub frontmatter: Option<&'a str>,
    /// Everything after the closing fence line; the whole text (without BOM) when there is no
    /// frontmatter.
    pub body: &'a str,
}

/// Split off a leading `---` frontmatter block closed by a later fence line (see [`Closing`]).
/// A UTF-8 BOM is skipped and fence lines may end in `\r\n`; a block whose opening fence is
/// never closed is no frontmatter.
pub fn split(text: &str, closing: Closing) -> Split<'_> {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let no_fm = Split {
        frontmatter: None,
        body: t,
    };
    let Some(first_end) = t.find('\n') else {
        return no_fm;
    };
    if t[..first_end].trim_end() != "---" {
        return no_fm;
    }
    let yaml_start = first_end + 1;
    let mut pos = yaml_start;
    while pos <= t.len() {
        let end = t[pos..].find('\n').map_or(t.len(), |i| pos + i);
        let line = t[pos..end].trim_end();
        if line == "---" || (closing == Closing::DashesOrDots && line == "...") {
            let body_start = (end + 1).min(t.len());
            return Split {
                frontmatter: Some(&t[yaml_start..pos]),
                body: &t[body_start..],
            };
        }
        if end == t.len() {
            break;
        }
        pos = end + 1;
    }
    no_fm
}

/// A frontmatter block as a YAML mapping, exactly as YAML reads it (an empty block is an empty
/// mapping); `None` when it is not valid YAML or not a mapping.
pub fn parse_strict_mapping(yaml: &str) -> Option<Mapping> {
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Mapping(m)) => Some(m),
        Ok(Value::Null) => Some(Mapping::new()),
        _ => None,
    }
}

/// A frontmatter block as a YAML mapping, retried once with every simple value quoted when it
/// does not parse (an unquoted `: ` in a value); `None` when not even that parses.
pub fn parse_mapping(yaml: &str) -> Option<Mapping> {
    parse_strict_mapping(yaml).or_else(|| parse_strict_mapping(&quote_values(yaml)))
}

fn simple_line() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^([ \t]*)([A-Za-z_][\w-]*):[ \t]+(.*?)[ \t]*$").ok())
        .as_ref()
}

/// The quoting retry: every simple `key: value` line whose value is not already quoted or a
/// block-scalar indicator gets its value double-quoted.
fn quote_values(yaml: &str) -> String {
    let Some(re) = simple_line() else {
        return yaml.to_owned();
    };
    yaml.lines()
        .map(|raw| {
            let line = raw.trim_end_matches('\r');
            let Some(c) = re.captures(line) else {
                return line.to_owned();
            };
            let (indent, key, value) = (&c[1], &c[2], &c[3]);
            let quoted = |q: char| value.len() >= 2 && value.starts_with(q) && value.ends_with(q);
            if value.is_empty()
                || quoted('"')
                || quoted('\'')
                || matches!(value, "|" | ">" | "|-" | ">-")
            {
                return line.to_owned();
            }
            format!("{indent}{key}: {}", double_quoted(value))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `s` as a YAML double-quoted scalar (JSON's string syntax, which YAML reads the same way).
pub fn double_quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.replace(['"', '\\'], "")))
}

#[cfg(test)]
mod tests {
    use super::{Closing, split};

    #[test]
    fn frontmatter_is_split_only_when_closed() {
        let s = split("---\npaths: a\n---\nbody\n", Closing::DashesOrDots);
        assert_eq!(s.frontmatter, Some("paths: a\n"));
        assert_eq!(s.body, "body\n");
        let s = split("---\nnever closed\n", Closing::DashesOrDots);
        assert_eq!(s.frontmatter, None);
        assert_eq!(s.body, "---\nnever closed\n");
        let s = split("# title\n---\n", Closing::Dashes);
        assert_eq!(s.frontmatter, None);
    }

    #[test]
    fn bom_crlf_and_closing_lines() {
        let s = split("\u{feff}---\r\na: 1\r\n---\r\nbody", Closing::Dashes);
        assert_eq!(s.frontmatter, Some("a: 1\r\n"));
        assert_eq!(s.body, "body");
        let s = split("\u{feff}plain", Closing::Dashes);
        assert_eq!((s.frontmatter, s.body), (None, "plain"));
        let dots = "---\na: 1\n...\nbody\n";
        assert_eq!(split(dots, Closing::Dashes).frontmatter, None);
        assert_eq!(
            split(dots, Closing::DashesOrDots).frontmatter,
            Some("a: 1\n")
        );
        let s = split("---\na: 1\n---", Closing::Dashes);
        assert_eq!((s.frontmatter, s.body), (Some("a: 1\n"), ""));
    }
}
