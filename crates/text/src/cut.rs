//! Cutting and shaping text: byte-bounded truncation on a char boundary, one-line flattening, and
//! the single-pass `{{name}}` substitution of prompt templates.

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` on one line: every run of whitespace (line breaks and tabs included) becomes one space,
/// and leading and trailing whitespace goes, so text from a file cannot add lines to a listing.
///
/// ```
/// use memloop_text::one_line;
/// assert_eq!(one_line("  первая строка\n\t- вторая \r\n"), "первая строка - вторая");
/// assert_eq!(one_line(" \n\t"), "");
/// ```
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Replace every `{{name}}` whose name is in `vars`, in ONE pass: values are inserted literally
/// and never scanned again, unknown names (and an unclosed `{{`) are left as they are. Names match
/// exactly (no trimming).
///
/// ```
/// use memloop_text::render_template;
/// let out = render_template("{{a}} and {{b}} and {{zzz}}", &[("a", "{{b}}"), ("b", "B")]);
/// assert_eq!(out, "{{b}} and B and {{zzz}}");
/// ```
pub fn render_template(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let name = &after[..close];
        match vars.iter().find(|(k, _)| *k == name) {
            Some((_, value)) => {
                out.push_str(value);
                rest = &after[close + 2..];
            }
            None => {
                // Leave `{{` as is and rescan from the next character, so `{{{{a}}` still finds
                // `{{a}}`.
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::render_template;

    #[test]
    fn substitution_is_single_pass_and_literal() {
        let vars = [
            ("currentNotes", "has {{notesPath}} and $1 \\n"),
            ("notesPath", "/x"),
        ];
        assert_eq!(
            render_template("{{notesPath}}|{{currentNotes}}|{{other}}|{{", &vars),
            "/x|has {{notesPath}} and $1 \\n|{{other}}|{{"
        );
        assert_eq!(render_template("no vars", &vars), "no vars");
        assert_eq!(render_template("{{notesPath", &vars), "{{notesPath");
    }

    #[test]
    fn rescans_after_an_unknown_open_brace_pair() {
        let vars = [("a", "A"), ("notesPath", "/x")];
        assert_eq!(render_template("{{{{a}}", &vars), "{{A");
        assert_eq!(render_template("{{{{notesPath}}}}", &vars), "{{/x}}");
    }

    #[test]
    fn unknown_keys_and_values_with_placeholders_stay_as_is() {
        let out = render_template("dir={{a}} idx={{b}} {{c}}", &[("a", "{{b}}"), ("b", "x")]);
        assert_eq!(out, "dir={{b}} idx=x {{c}}");
        assert_eq!(render_template("{{}}", &[]), "{{}}");
        assert_eq!(render_template("é{{a}}ü", &[("a", "ß")]), "éßü");
    }

    #[test]
    fn names_match_exactly() {
        assert_eq!(render_template("{{ a }}", &[("a", "A")]), "{{ a }}");
    }
}
