//! What the server's log may hold: never a credential, never a memory's text.
//!
//! memloop's own events name paths, counts, codes and peers; two libraries under the server log
//! whole payloads below `INFO`: rmcp logs every JSON-RPC request and response it handles
//! (`received request`, `response message`: tool arguments and answers, so memory text), and
//! tokio-postgres logs every statement's parameters (memory text, through the `log` bridge).
//! [`loggable`] is the filter a host puts on its subscriber, whatever level the operator asked
//! for (`MEMLOOP_LOG=trace` included): those events are dropped, everything else passes.
//! Bearer tokens never reach an event: the transport logs only the peer of a refused request.
//! rmcp also logs every notification it receives whole at `INFO` (`received notification`): that
//! event is dropped too. A client's string this crate logs goes through [`client_text`].

use crate::echo::MAX_ECHO_CHARS;

/// A log line as it may be written: credentials redacted (a library under the server logs
/// client text verbatim at `WARN`, such as an unknown method name or a resource URI), and
/// control characters other than newlines and tabs shown escaped, so no client text reaches a
/// log unfiltered at any level. A host puts it on its log writer (the CLI does, for every line
/// it logs).
///
/// ```
/// let line = memloop_mcp::loggable_text("WARN unknown method tools/AKIAQ3EGV5XK7TZ2WPLM \u{1b}]0;x\u{7}\n");
/// assert!(!line.contains("AKIAQ3EGV5XK7TZ2WPLM") && !line.contains('\u{1b}'));
/// assert!(line.ends_with('\n'));
/// ```
pub fn loggable_text(line: &str) -> String {
    let (redacted, _) = memloop_secrets::redact_secrets(line);
    memloop_store::printable(&redacted).into_owned()
}

/// How many characters of a client's string are redacted before it is cut for a log line: a
/// credential that begins within the first [`MAX_ECHO_CHARS`] characters is whole in this window,
/// so the cut never keeps a piece of one the filter could not recognise.
const REDACTION_WINDOW_CHARS: usize = 4 * MAX_ECHO_CHARS;

/// A client's string (a method, a tool name, a header value...) as this crate logs it:
/// credentials redacted (`memloop_secrets::redact_secrets`), then cut to at most
/// [`MAX_ECHO_CHARS`] characters with a `…` mark and every control character escaped (a newline
/// too: one client string never starts a log line of its own), however long it was. Every
/// client string an event of this crate carries goes through it.
pub(crate) fn client_text(text: &str) -> String {
    let window = match text.char_indices().nth(REDACTION_WINDOW_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    };
    let (redacted, _) = memloop_secrets::redact_secrets(window);
    crate::echo::echo_marked(&redacted, text.chars().nth(MAX_ECHO_CHARS).is_some())
}

/// The targets whose events below `INFO` carry payloads, as prefixes: rmcp's service and
/// transports (JSON-RPC messages), tokio-postgres' statement execution (parameters).
pub const PAYLOAD_TARGETS: &[&str] = &["rmcp", "tokio_postgres::query"];

/// Whether an event or span with `metadata` may be logged: `false` for the debug and trace
/// events of rmcp's transports (whole JSON-RPC messages) and tokio-postgres' statement execution
/// (parameters). Use it as a filter beside the level filter, e.g.
/// `tracing_subscriber::filter::filter_fn(memloop_mcp::loggable)`.
pub fn loggable(metadata: &tracing::Metadata<'_>) -> bool {
    let notification = metadata.fields().field(PAYLOAD_FIELD).is_some();
    loggable_target(metadata.target(), metadata.level(), notification)
}

/// The field of rmcp's `INFO` event that carries a whole received notification (its params
/// included: client text of any length).
const PAYLOAD_FIELD: &str = "notification";

/// [`loggable`] for a target, a level, and whether the event has a [`PAYLOAD_FIELD`].
pub(crate) fn loggable_target(target: &str, level: &tracing::Level, notification: bool) -> bool {
    let payload_target = PAYLOAD_TARGETS.iter().any(|p| {
        target
            .strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    });
    if !payload_target {
        return true;
    }
    // ERROR, WARN, INFO carry no payload, but for rmcp's whole received notification.
    *level < tracing::Level::DEBUG && !notification
}

#[cfg(test)]
mod tests {
    use super::{client_text, loggable_target};
    use crate::echo::MAX_ECHO_CHARS;
    use tracing::Level;

    #[test]
    fn payload_targets_lose_their_debug_and_trace_events_and_notifications_only() {
        assert!(!loggable_target("rmcp::service", &Level::DEBUG, false));
        assert!(loggable_target("rmcp::service", &Level::INFO, false));
        assert!(!loggable_target("rmcp::service", &Level::INFO, true));
        assert!(!loggable_target(
            "tokio_postgres::query",
            &Level::DEBUG,
            false
        ));
        assert!(loggable_target(
            "tokio_postgres::queryx",
            &Level::DEBUG,
            false
        ));
        assert!(loggable_target("memloop_mcp::http", &Level::TRACE, false));
        assert!(loggable_target("memloop_mcp::http", &Level::INFO, true));
    }

    #[test]
    fn a_client_string_is_redacted_then_cut_on_a_character_boundary() {
        for (text, secret) in [
            ("tools/ AKIAQ3EGV5XK7TZ2WPLM", "AKIAQ3EGV5XK7TZ2WPLM"),
            // A credential that crosses the cut is redacted whole, not cut into a piece.
            (
                &format!("{} AKIAQ3EGV5XK7TZ2WPLM", "x".repeat(MAX_ECHO_CHARS - 8)),
                "AKIAQ3EGV",
            ),
        ] {
            let logged = client_text(text);
            assert!(!logged.contains(secret), "{logged}");
            assert!(logged.chars().count() <= MAX_ECHO_CHARS + 1, "{logged}");
        }
        for text in [
            "方法".repeat(1_000_000),
            "метод".repeat(200_000),
            "é".repeat(100),
        ] {
            let logged = client_text(&text);
            assert_eq!(logged.chars().count(), MAX_ECHO_CHARS + 1, "{logged}");
            assert!(logged.ends_with('…'));
        }
        assert_eq!(client_text("tools/list"), "tools/list");
        assert_eq!(client_text("Ünïcødé \u{1b}]0;x"), "Ünïcødé \\u{1b}]0;x");
        assert!(!client_text("a\u{1b}]0;x\u{7}\nINFO forged").contains(['\u{1b}', '\n']));
    }
}
