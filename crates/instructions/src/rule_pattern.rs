//! [`RulePattern`]: a compiled `paths:` pattern for conditional rules, a thin wrapper over
//! [`memloop_text::glob_to_regex`] (see there for the syntax). Matching is against
//! `/`-separated relative paths, whole-string.

use regex::Regex;

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub struct RulePattern {
    pattern: String,
    regex: Regex,
}

impl RulePattern {
    /// Compile `pattern` (surrounding whitespace and a leading `./` are ignored); `None` if it
    /// cannot be compiled (e.g. an unclosed `[`).
    pub fn new(pattern: &str) -> Option<Self> {
        let trimmed = pattern.trim().trim_start_matches("./");
        let regex = memloop_text::glob_to_regex(trimmed).ok()?;
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

#[cfg(test)]
mod tests {
    use super::RulePattern;

    #[test]
    fn wrapper_trims_and_keeps_the_pattern_as_written() {
        let g = RulePattern::new(" ./tests/*_test.py ").unwrap();
        assert!(g.is_match("tests/a_test.py"));
        assert!(!g.is_match("tests/x/a_test.py"));
        assert_eq!(g.pattern(), " ./tests/*_test.py ");
        assert!(RulePattern::new("[abc").is_none());
        assert!(RulePattern::new("{a,b").is_none());
    }
}
