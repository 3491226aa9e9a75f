//! Server-sent events: one incremental parser shared by every provider, and the
//! [`SseDecoder`] trait a provider implements to turn its events into [`StreamEvent`]s (driven by
//! [`HttpTransport::stream`](super::http::HttpTransport::stream)).
//!
//! Bytes go in as the socket delivers them ([`SseParser::push`]); complete events come out.
//! Lines are split on `\n`, `\r\n` or `\r`, and only complete lines are decoded, so a multi-byte
//! UTF-8 character split across two chunks is reassembled before decoding. A blank line ends an
//! event; `data:` lines of one event are joined with `\n`; `event:` names it; comment lines
//! (`:` first) and other fields (`id:`, `retry:`) are ignored.

use memloop_core::model::{ModelError, ModelResponse, StreamEvent};

/// Turns one provider's stream of SSE events into [`StreamEvent`]s and the final response.
pub trait SseDecoder: Send + 'static {
    /// Handle one event, pushing the deltas it carries onto `out`. `Ok(true)` means the stream is
    /// complete (later bytes are ignored).
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, ModelError>;

    /// Whether what arrived so far is a whole response even without the end marker (the server
    /// closed the connection right after the stop reason).
    fn is_complete(&self) -> bool;

    /// The whole response, from everything received.
    fn finish(&mut self) -> Result<ModelResponse, ModelError>;

    /// Parse a plain JSON body: the answer of a server that ignored `"stream": true`.
    fn whole(&mut self, body: &[u8]) -> Result<ModelResponse, ModelError>;
}

/// A stream failure (see [`ModelError::Stream`]); the transport fills in `emitted`.
pub fn stream_error(message: impl Into<String>, retryable: bool) -> ModelError {
    ModelError::Stream {
        message: message.into(),
        emitted: 0,
        retryable,
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field (empty when absent, which means `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, incomplete line.
    line: Vec<u8>,
    /// The previous byte was a `\r` (a following `\n` belongs to the same line end).
    after_cr: bool,
    event: String,
    data: Option<String>,
}

impl SseParser {
    /// Feed bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    let line = String::from_utf8(line)
                        .map_err(|e| format!("an event line is not UTF-8: {e}"))?;
                    if let Some(event) = self.line_done(&line) {
                        out.push(event);
                    }
                }
                _ => self.line.push(b),
            }
        }
        Ok(out)
    }

    /// The event still buffered when the stream ended without its blank line, if any.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            if let Some(e) = self.line_done(&line) {
                return Some(e);
            }
        }
        self.line_done("")
    }

    fn line_done(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let data = self.data.take();
            let event = std::mem::take(&mut self.event);
            return data.map(|data| SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.push(c).unwrap());
        }
        out
    }

    #[test]
    fn events_with_names_multiline_data_comments_and_crlf() {
        let got = all(&[
            b": ping\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\n",
            b"data: line1\ndata: line2\n\nid: 3\rdata: x\r\r",
        ]);
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: "message_start".into(),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "line1\nline2".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "x".into()
                },
            ]
        );
    }

    #[test]
    fn split_utf8_and_split_crlf_across_chunks() {
        let text = "data: h\u{e9}llo \u{1F600}\r\n\r\n".as_bytes();
        // Split inside the emoji and between \r and \n.
        let emoji_at = text.len() - 6;
        let got = all(&[
            &text[..emoji_at],
            &text[emoji_at..text.len() - 3],
            &text[text.len() - 3..],
        ]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, "h\u{e9}llo \u{1F600}");
    }

    #[test]
    fn unfinished_event_is_partial_and_finish_flushes_it() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"x\"").unwrap().is_empty());
        assert_eq!(p.finish().unwrap().data, "{\"x\"");
        assert_eq!(p.finish(), None);
        assert!(p.push(&[b'd', b'a', 0xff, b'\n']).is_err());
    }
}
