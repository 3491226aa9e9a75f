//! Text helpers shared by the tools, the providers and the memory crates.

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
