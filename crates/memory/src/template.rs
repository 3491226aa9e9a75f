//! Single-pass `{{name}}` substitution for the prompt templates in `templates/*.md`.

/// Replace each `{{name}}` by its value in one left-to-right pass: substituted text is never
/// scanned again, and unknown placeholders are kept verbatim.
pub(crate) fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let key = after[..end].trim();
                match vars.iter().find(|(k, _)| *k == key) {
                    Some((_, v)) => out.push_str(v),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn substitutes_once_and_keeps_unknown() {
        let out = render(
            "a {{x}} b {{ y }} c {{z}} {{",
            &[("x", "{{y}}"), ("y", "Y")],
        );
        assert_eq!(out, "a {{y}} b Y c {{z}} {{");
    }
}
