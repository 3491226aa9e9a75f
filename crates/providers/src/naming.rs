//! Names the provider APIs accept.

/// A tool name the API accepts (`^[a-zA-Z0-9_-]{1,64}$`).
pub(crate) fn tool_name(raw: &str) -> String {
    let name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "structured_output".to_owned()
    } else {
        name
    }
}
