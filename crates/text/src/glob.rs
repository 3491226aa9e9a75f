//! Glob patterns compiled to anchored regexes over `/`-separated relative paths: the one
//! translator used by the `glob`/`grep` tools (crate `memloop-tools`) and by conditional
//! instruction rules.
//!
//! Syntax: `*` (any run of characters except `/`), `**` (any number of whole directories,
//! including none, when it forms a whole path component; otherwise like `*`), `?` (one character
//! except `/`), `[abc]`/`[a-z]`/`[!abc]` (character classes), `{a,b}` (alternatives, may nest).
//! Everything else is literal. Matching is whole-string.

use regex::Regex;

/// Why a glob could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    /// A `[` without its closing `]`.
    #[error("unclosed `[` in glob")]
    UnclosedClass,
    /// A `{` without its closing `}`.
    #[error("unclosed `{{` in glob")]
    UnclosedBrace,
    /// The translated pattern was rejected by the regex engine (e.g. an empty class `[]`).
    #[error(transparent)]
    Regex(#[from] regex::Error),
}

/// Translate a glob into an anchored regex over `/`-separated relative paths. `*` and `?` never
/// cross `/`; `**/` matches zero or more whole directories.
///
/// ```
/// use memloop_text::glob_to_regex;
/// let re = glob_to_regex("**/*.{md,txt}").unwrap();
/// assert!(re.is_match("a.md") && re.is_match("x/y/b.txt") && !re.is_match("c.rs"));
/// assert!(glob_to_regex("[abc").is_err());
/// ```
pub fn glob_to_regex(glob: &str) -> Result<Regex, GlobError> {
    let mut out = String::from("^");
    translate(glob, &mut out)?;
    out.push('$');
    Ok(Regex::new(&out)?)
}

fn translate(glob: &str, out: &mut String) -> Result<(), GlobError> {
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
                let close = chars[i + 1..]
                    .iter()
                    .position(|&c| c == ']')
                    .ok_or(GlobError::UnclosedClass)?
                    + i
                    + 1;
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
                    if matches!(ch, '\\' | '[' | ']' | '^') {
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
            other => out.push_str(&regex::escape(other.encode_utf8(&mut [0; 4]))),
        }
        i += 1;
    }
    if brace_depth > 0 {
        return Err(GlobError::UnclosedBrace);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::glob_to_regex;

    fn m(p: &str, s: &str) -> bool {
        glob_to_regex(p).unwrap().is_match(s)
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
        assert!(m("**", "a/b/c"));
        // `**` inside a component is a plain `*`.
        assert!(m("a**.md", "abc.md"));
        assert!(!m("a**.md", "a/b.md"));
    }

    #[test]
    fn classes_braces_and_literals() {
        assert!(m("*.{ts,tsx}", "a.tsx"));
        assert!(m("*.{ts,tsx}", "a.ts"));
        assert!(!m("*.{ts,tsx}", "a.js"));
        assert!(m("{a,{b,c}}.md", "c.md"));
        assert!(!m("{a,{b,c}}.md", "d.md"));
        assert!(m("file[0-9].txt", "file7.txt"));
        assert!(!m("file[!0-9].txt", "file7.txt"));
        assert!(m("x[[]y", "x[y"));
        assert!(m("a+b(1).md", "a+b(1).md"));
        assert!(m("?.md", "x.md"));
        assert!(!m("?.md", "/.md"));
        assert!(glob_to_regex("[abc").is_err());
        assert!(glob_to_regex("{a,b").is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_patterns_never_panic(pattern in "[*?\\[\\]{},!a-c/.é-]{0,24}", path in "[a-c/.é]{0,16}") {
            if let Ok(re) = glob_to_regex(&pattern) {
                let _ = re.is_match(&path);
            }
        }
    }
}
