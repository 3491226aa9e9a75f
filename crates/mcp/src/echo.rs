//! A client's strings as the server repeats them: in an error's message or in a log line, at
//! most [`MAX_ECHO_CHARS`] characters of one, however long it was.

/// Most characters of a client's string (a method, a tool name, a header value...) an error
/// message repeats or a log line holds; a longer one is cut, with a `…` mark.
pub const MAX_ECHO_CHARS: usize = 64;

/// At most [`MAX_ECHO_CHARS`] characters of `text` (cut on a character boundary, with a `…`
/// mark when it was longer), control characters shown escaped.
pub(crate) fn echo(text: &str) -> String {
    echo_marked(text, text.chars().nth(MAX_ECHO_CHARS).is_some())
}

/// [`echo`], marked as cut when `cut` says so (the text was cut before it came here).
pub(crate) fn echo_marked(text: &str, cut: bool) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_ECHO_CHARS)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if cut || text.chars().nth(MAX_ECHO_CHARS).is_some() {
        out.push('…');
    }
    out
}
