//! Output bound for a terminal: control characters made visible, so that text read from a
//! memory, a transcript or a file name cannot drive the terminal.
//!
//! A memory's text is written by a model from whatever the session saw: a web page, a
//! command's output, a file. Printed raw, an escape sequence in it could clear the screen,
//! retitle the window, hide lines or rewrite what was printed before it. [`Visible`] shows every
//! C0 control except line feed and tab as its Unicode control picture (ESC as `␛`, BEL as `␇`),
//! DEL as `␡`, and every C1 control (U+0080 to U+009F) as `\u{9b}`-style text; a carriage return
//! right before a line feed is kept (CRLF files print as they look elsewhere). The bidirectional
//! embedding, override and isolate controls (U+202A to U+202E, U+2066 to U+2069), which make a
//! terminal that applies the bidi algorithm show text in another order than it is stored, are
//! shown as `\u{202e}`-style text too; the marks real right-to-left text uses (U+200E, U+200F,
//! U+061C) and the joiners pass. Every other character passes through unchanged, in any
//! script, and so do bytes that are not UTF-8.
//!
//! The binary wraps stdout and stderr in it only when they are terminals and the output is not
//! `--json` (JSON escapes control characters itself): piped output stays byte for byte.

use std::io::{self, Write};

/// A writer that makes control characters visible before passing text on (see the module
/// docs). Bytes are held back only while they may be the start of a character split across two
/// writes, or a carriage return whose next byte decides how it shows; [`flush`](Write::flush)
/// and dropping the writer write them out.
pub struct Visible<W: Write> {
    inner: W,
    /// The unfinished tail of the last write: part of a UTF-8 sequence, or a lone `\r`.
    pending: Vec<u8>,
}

impl<W: Write> Visible<W> {
    /// Wrap `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }

    /// Render `bytes` (the pending tail first) to `inner`; `done` says no more bytes follow
    /// for now, so nothing may be held back.
    fn render(&mut self, bytes: &[u8], done: bool) -> io::Result<()> {
        let mut data = std::mem::take(&mut self.pending);
        data.extend_from_slice(bytes);
        let mut out = Vec::with_capacity(data.len() + 8);
        let mut rest = &data[..];
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    if let Some(tail) = show(text, done, &mut out) {
                        self.pending.extend_from_slice(tail.as_bytes());
                    }
                    rest = &[];
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // The prefix is valid UTF-8 by construction.
                    let text = std::str::from_utf8(valid).unwrap_or_default();
                    match e.error_len() {
                        // Not UTF-8: those bytes pass through as they are.
                        Some(n) => {
                            show(text, true, &mut out);
                            out.extend_from_slice(&after[..n]);
                            rest = &after[n..];
                        }
                        // A character cut by the end of the input: kept for the next write,
                        // or passed through as it is when none follows.
                        None => {
                            if let Some(tail) = show(text, done, &mut out) {
                                self.pending.extend_from_slice(tail.as_bytes());
                            }
                            let held = if done { &mut out } else { &mut self.pending };
                            held.extend_from_slice(after);
                            rest = &[];
                        }
                    }
                }
            }
        }
        self.inner.write_all(&out)
    }
}

/// Append `text` to `out` with its control characters made visible. A `\r` at the very end is
/// returned instead of shown when `done` is false (whether a `\n` follows is not known yet).
fn show<'a>(text: &'a str, done: bool, out: &mut Vec<u8>) -> Option<&'a str> {
    let (body, tail) = match text.strip_suffix('\r') {
        Some(body) if !done => (body, Some(&text[body.len()..])),
        _ => (text, None),
    };
    let mut chars = body.chars().peekable();
    let mut buf = [0u8; 4];
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c as u8),
            '\r' if chars.peek() == Some(&'\n') => out.push(b'\r'),
            '\u{0}'..='\u{1f}' => {
                let picture = char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}');
                out.extend_from_slice(picture.encode_utf8(&mut buf).as_bytes());
            }
            '\u{7f}' => out.extend_from_slice("\u{2421}".as_bytes()),
            '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.extend_from_slice(format!("\\u{{{:x}}}", c as u32).as_bytes())
            }
            _ => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    tail
}

impl<W: Write> Write for Visible<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.render(buf, false)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.render(&[], true)?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for Visible<W> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.render(&[], true);
            let _ = self.inner.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `input` written through [`Visible`] in one write, and split at every byte.
    fn rendered(input: &[u8]) -> Vec<u8> {
        let mut whole = Vec::new();
        {
            let mut v = Visible::new(&mut whole);
            v.write_all(input).unwrap();
            v.flush().unwrap();
        }
        for cut in 0..=input.len() {
            let mut split = Vec::new();
            {
                let mut v = Visible::new(&mut split);
                v.write_all(&input[..cut]).unwrap();
                v.write_all(&input[cut..]).unwrap();
            } // dropped without a flush: the held-back tail is still written
            assert_eq!(split, whole, "split at byte {cut} of {input:?}");
        }
        whole
    }

    fn text(input: &str) -> String {
        String::from_utf8(rendered(input.as_bytes())).unwrap()
    }

    #[test]
    fn escape_sequences_and_bells_are_shown_not_obeyed() {
        assert_eq!(
            text("evil \u{1b}[2J\u{1b}]0;pwned\u{7} desc"),
            "evil ␛[2J␛]0;pwned␇ desc"
        );
        assert_eq!(text("a\u{0}b\u{8}c\u{7f}d"), "a␀b␈c␡d");
        // C1 controls: U+009B is a one-character CSI on some terminals.
        assert_eq!(text("x\u{9b}31my\u{85}"), "x\\u{9b}31my\\u{85}");
    }

    #[test]
    fn line_breaks_tabs_and_crlf_stay_a_lone_carriage_return_does_not() {
        assert_eq!(text("a\tb\nc\r\nd"), "a\tb\nc\r\nd");
        assert_eq!(
            text("progress 10%\rprogress 99%"),
            "progress 10%␍progress 99%"
        );
        assert_eq!(text("ends with\r"), "ends with␍");
        assert_eq!(text("\r\r\n"), "␍\r\n");
    }

    #[test]
    fn every_script_passes_through_unchanged() {
        for s in [
            "部署流程：先在预发环境验证，再发布到生产。",
            "デプロイは金曜日に行わない。",
            "배포는 금요일에 하지 않는다.",
            "Сервер БД слушает порт 5433. Ёлка.",
            "قاعدة البيانات على المنفذ 5433",
            "👨‍👩‍👧‍👦 🦀 café résumé",
        ] {
            assert_eq!(text(s), s);
        }
    }

    #[test]
    fn bidi_overrides_are_shown_right_to_left_text_is_not_touched() {
        // An override makes `txt.exe` read as `exe.txt` on a terminal that applies bidi.
        assert_eq!(
            text("report\u{202e}txt.exe and \u{2066}x\u{2069}"),
            "report\\u{202e}txt.exe and \\u{2066}x\\u{2069}"
        );
        // Hebrew and Arabic with the marks and joiners real text uses pass unchanged.
        for s in [
            "הסיסמה נשמרת בכספת\u{200f} (v2)",
            "قاعدة البيانات\u{061c} 5433",
            "می\u{200c}خواهم",
        ] {
            assert_eq!(text(s), s);
        }
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert_eq!(rendered(b""), b"");
        let mut out = Vec::new();
        {
            let mut v = Visible::new(&mut out);
            assert_eq!(v.write(b"").unwrap(), 0);
            v.flush().unwrap();
            v.write_all("日本語".as_bytes()).unwrap();
            v.write_all(b"").unwrap();
            v.flush().unwrap();
        }
        assert_eq!(out, "日本語".as_bytes());
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        let input = b"ok \xff\xfe then \xe6\x95 \x1b end \xe6";
        let out = rendered(input);
        assert_eq!(
            out,
            b"ok \xff\xfe then \xe6\x95 \xe2\x90\x9b end \xe6".to_vec()
        );
    }
}
