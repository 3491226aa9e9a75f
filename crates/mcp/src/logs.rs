//! What the server's log may hold: never a credential, never a memory's text.
//!
//! memloop's own events name paths, counts, codes and peers; two libraries under the server log
//! whole payloads below `INFO`: rmcp logs every JSON-RPC request and response it handles
//! (`received request`, `response message`: tool arguments and answers, so memory text), and
//! tokio-postgres logs every statement's parameters (memory text, through the `log` bridge).
//! [`loggable`] is the filter a host puts on its subscriber, whatever level the operator asked
//! for (`MEMLOOP_LOG=trace` included): those events are dropped, everything else passes.
//! Bearer tokens never reach an event: the transport logs only the peer of a refused request.

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

/// The targets whose events below `INFO` carry payloads, as prefixes: rmcp's service and
/// transports (JSON-RPC messages), tokio-postgres' statement execution (parameters).
pub const PAYLOAD_TARGETS: &[&str] = &["rmcp", "tokio_postgres::query"];

/// Whether an event or span with `metadata` may be logged: `false` for the debug and trace
/// events of rmcp's transports (whole JSON-RPC messages) and tokio-postgres' statement execution
/// (parameters). Use it as a filter beside the level filter, e.g.
/// `tracing_subscriber::filter::filter_fn(memloop_mcp::loggable)`.
pub fn loggable(metadata: &tracing::Metadata<'_>) -> bool {
    loggable_target(metadata.target(), metadata.level())
}

/// [`loggable`] for a target and a level.
pub(crate) fn loggable_target(target: &str, level: &tracing::Level) -> bool {
    if *level < tracing::Level::DEBUG {
        // ERROR, WARN, INFO: never a payload.
        return true;
    }
    !PAYLOAD_TARGETS.iter().any(|p| {
        target
            .strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

#[cfg(test)]
mod tests {
    use super::loggable_target;
    use tracing::Level;

    #[test]
    fn payload_targets_lose_their_debug_and_trace_events_only() {
        assert!(!loggable_target("rmcp::service", &Level::DEBUG));
        assert!(loggable_target("rmcp::service", &Level::INFO));
        assert!(!loggable_target("tokio_postgres::query", &Level::DEBUG));
        assert!(loggable_target("tokio_postgres::queryx", &Level::DEBUG));
        assert!(loggable_target("memloop_mcp::http", &Level::TRACE));
    }
}
