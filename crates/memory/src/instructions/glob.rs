//! A small glob matcher for conditional rules (`paths:` frontmatter), compiled to a regex.
//!
//! Syntax: `*` (any run of characters except `/`), `**` (any number of whole directories,
//! including none, when it forms a whole path component; otherwise like `*`), `?` (one character
//! except `/`), `[abc]`/`[a-z]`/`[!abc]` (character classes), `{a,b}` (alternatives, may nest).
//! Everything else is literal. Matching is against `/`-separated relative paths, whole-string.

use regex::Regex;

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub struct Glob {
    pattern: String,
    regex: Regex,
}

impl Glob {
    /// Compile `pattern`; `None` if it cannot be compiled (e.g. an unclosed `[`).
    pub fn new(pattern: &str) -> Option<Self> {
        let trimmed = pattern.trim().trim_start_matches("./");
        let mut out = String::from("^");
        translate(trimmed, &mut out)?;
        out.push('$');
        let regex = Regex::new(&out).ok()?;
        Some(Self {
            pattern: pattern.to_owned(),
            regex,
        })
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether the `/`-separated relative `path` matches the whole pattern.
    pub fn is_match(&self, path: &str) -> bool {
        self.regex.is_match(path)
    }
}

fn translate(glob: &str, out: &mut String) -> Option<()> {
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    let mut brace_depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let at_start = i == 0 || chars[i - 1] == '/';
                let next = chars.get(i + 2);
                if at_start && next == Some(&'/') {
                    // `**/` : zero or more whole directories.
                    out.push_str("(?:[^/]*/)*");
                    i += 3;
                    continue;
                }
                if at_start && next.is_none() {
                    out.push_str(".*");
                } else {
                    out.push_str("[^/]*");
                }
                i += 2;
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => {
                let close = chars[i + 1..].iter().position(|&c| c == ']')? + i + 1;
                let body: String = chars[i + 1..close].iter().collect();
                out.push('[');
                let body = match body.strip_prefix('!') {
                    Some(rest) => {
                        out.push('^');
                        rest.to_owned()
                    }
                    None => body,
                };
                for ch in body.chars() {
                    if ch == '\\' || ch == '[' || ch == ']' || ch == '^' {
                        out.push('\\');
                    }
                    out.push(ch);
                }
                out.push(']');
                i = close + 1;
                continue;
            }
            '{' => {
                brace_depth += 1;
                out.push_str("(?:");
            }
            '}' if brace_depth > 0 => {
                brace_depth -= 1;
                out.push(')');
            }
            ',' if brace_depth > 0 => out.push('|'),
            other => out.push_str(&regex::escape(&other.to_string())),
        }
        i += 1;
    }
    if brace_depth > 0 {
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::Glob;

    fn m(p: &str, s: &str) -> bool {
        Glob::new(p).unwrap().is_match(s)
    }

    #[test]
    fn stars_and_double_stars() {
        assert!(m("src/**/*.rs", "src/a.rs"));
        assert!(m("src/**/*.rs", "src/x/y/a.rs"));
        assert!(!m("src/**/*.rs", "lib/a.rs"));
        assert!(!m("src/*.rs", "src/x/a.rs"));
        assert!(m("**/*.py", "a/b/c.py"));
        assert!(m("**/*.py", "c.py"));
        assert!(m("docs/**", "docs/a/b.md"));
        assert!(m("./tests/*_test.py", "tests/a_test.py"));
    }

    #[test]
    fn classes_braces_and_literals() {
        assert!(m("*.{ts,tsx}", "a.tsx"));
        assert!(m("*.{ts,tsx}", "a.ts"));
        assert!(!m("*.{ts,tsx}", "a.js"));
        assert!(m("file[0-9].txt", "file7.txt"));
        assert!(!m("file[!0-9].txt", "file7.txt"));
        assert!(m("a+b(1).md", "a+b(1).md"));
        assert!(m("?.md", "x.md"));
        assert!(Glob::new("[abc").is_none());
        assert!(Glob::new("{a,b").is_none());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_patterns_never_panic(pattern in "[*?\\[\\]{},!a-c/.é-]{0,24}", path in "[a-c/.é]{0,16}") {
            if let Some(glob) = Glob::new(&pattern) {
                let _ = glob.is_match(&path);
            }
        }
    }
}
