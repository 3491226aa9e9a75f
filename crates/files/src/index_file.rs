//! `MEMORY.md` on disk for the file store's writes: which memories its entry lines link to,
//! remembered by the file's stamp with the file's text, so a write whose line is new *appends*
//! one line (fsync'd with `Durability::Power`) instead of reading and rewriting the whole index,
//! a write whose line is unchanged touches nothing, and a write that changes its line splices
//! the one line into the text it holds and renames the result into place (no re-read, no
//! re-parse). Only a memory with several lines goes back to the caller's full rewrite.
//!
//! A writer killed mid-append can leave a torn last line. Readers skip lines that are not
//! entries, and the next append starts on a fresh line, so a torn line never swallows the next
//! entry; the next rewrite keeps it as the text it is (it names no memory).

use crate::safety::Durability;
use crate::stamp::{Stamp, stamp_of};
use memloop_store::MemoryError;
use memloop_store::parse_entry_line;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The entry lines of one version of `MEMORY.md`.
#[derive(Debug, Default)]
pub(crate) struct IndexLines {
    /// `None` until read, and whenever the file may have changed behind our back.
    stamp: Option<Stamp>,
    /// For each linked memory: how many entry lines link to it, and the first one's text
    /// (without its line ending or a byte-order mark).
    links: HashMap<String, (usize, String)>,
    /// The file's line ending (`\r\n` when it uses CRLF).
    eol: &'static str,
    /// The file's text as last read or written (invalid UTF-8 replaced, as every index reader
    /// does), where a changed line is spliced.
    text: String,
}

/// What [`IndexLines::upsert`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Upsert {
    /// The line is already there, alone: nothing written.
    Unchanged,
    /// The line was new: appended.
    Appended,
    /// The one line linking to the memory differed: replaced in place, the file renamed over.
    Replaced,
    /// Several lines link to the memory: the caller rewrites the file.
    Rewrite,
}

impl IndexLines {
    /// Forget what was read (after a rewrite by the caller, the next call re-reads).
    pub(crate) fn invalidate(&mut self) {
        self.stamp = None;
    }

    /// Make sure `links` describes the file at `path` now (re-read when its stamp moved).
    fn load(&mut self, path: &Path) -> Result<(), MemoryError> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(MemoryError::io("reading MEMORY.md", e)),
        };
        let now = meta.as_ref().map(stamp_of);
        if now.is_some() && now == self.stamp {
            return Ok(());
        }
        let text = match memloop_host::files::read_regular(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(MemoryError::io("reading MEMORY.md", e)),
        };
        self.links.clear();
        for raw in text.lines() {
            if let Some(e) = parse_entry_line(raw) {
                let line = raw.strip_prefix('\u{feff}').unwrap_or(raw).to_owned();
                self.links
                    .entry(e.file)
                    .and_modify(|(n, _)| *n += 1)
                    .or_insert((1, line));
            }
        }
        self.eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
        self.text = text;
        // A missing file has no stamp to trust: stay unloaded so the append path re-checks.
        self.stamp = now;
        Ok(())
    }

    /// Whether an entry line links to `file` (after bringing the picture up to date).
    pub(crate) fn links_to(&mut self, path: &Path, file: &str) -> Result<bool, MemoryError> {
        self.load(path)?;
        Ok(self.links.contains_key(file))
    }

    /// Add the entry `line` for `file`: nothing when it is there already, an append (fsync'd
    /// with [`Durability::Power`]) when no line links to `file`, the one line replaced when it
    /// differs, else (several lines) [`Upsert::Rewrite`] for the caller. The caller holds the
    /// dir lock.
    pub(crate) fn upsert(
        &mut self,
        path: &Path,
        file: &str,
        line: &str,
        durability: Durability,
    ) -> Result<Upsert, MemoryError> {
        self.load(path)?;
        match self.links.get(file) {
            Some((1, existing)) if existing == line => return Ok(Upsert::Unchanged),
            Some((1, existing)) => {
                let Some(at) = find_line(&self.text, existing) else {
                    return Ok(Upsert::Rewrite);
                };
                let end = at + existing.len();
                let mut text = String::with_capacity(self.text.len() + line.len());
                text.push_str(&self.text[..at]);
                text.push_str(line);
                text.push_str(&self.text[end..]);
                crate::safety::atomic_write_with(path, text.as_bytes(), durability)?;
                let meta = std::fs::metadata(path).map_err(|e| MemoryError::io("MEMORY.md", e))?;
                self.text = text;
                self.links.insert(file.to_owned(), (1, line.to_owned()));
                self.stamp = Some(stamp_of(&meta));
                return Ok(Upsert::Replaced);
            }
            Some(_) => return Ok(Upsert::Rewrite),
            None => {}
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| MemoryError::io("opening MEMORY.md", e))?;
        // Check the last byte on disk rather than trusting the picture: a torn append or a
        // hand edit without a final newline must not glue this entry onto its line.
        let len = f
            .metadata()
            .map_err(|e| MemoryError::io("MEMORY.md", e))?
            .len();
        let mut last = [b'\n'];
        if len > 0 {
            f.seek(SeekFrom::Start(len - 1))
                .and_then(|_| f.read_exact(&mut last))
                .map_err(|e| MemoryError::io("reading MEMORY.md", e))?;
        }
        let mut bytes = String::with_capacity(line.len() + 4);
        if last[0] != b'\n' {
            bytes.push_str(self.eol);
        }
        bytes.push_str(line);
        bytes.push_str(self.eol);
        // The text on disk is the text held (the stamp said so) and these bytes.
        self.text.push_str(&bytes);
        f.write_all(bytes.as_bytes())
            .and_then(|()| match durability {
                Durability::Power => f.sync_data(),
                _ => Ok(()),
            })
            .map_err(|e| MemoryError::io("appending to MEMORY.md", e))?;
        if len == 0 && durability == Durability::Power {
            // A new file: make its directory entry durable too.
            crate::safety::sync_parent_dir(path);
        }
        let meta = f.metadata().map_err(|e| MemoryError::io("MEMORY.md", e))?;
        self.links.insert(file.to_owned(), (1, line.to_owned()));
        self.stamp = Some(stamp_of(&meta));
        Ok(Upsert::Appended)
    }
}

/// Where `line` stands in `text` as a whole line (the text of a line as `str::lines` gives it,
/// after a byte-order mark at the start), if it does.
fn find_line(text: &str, line: &str) -> Option<usize> {
    text.match_indices(line).map(|(at, _)| at).find(|&at| {
        let before = &text[..at];
        let after = &text[at + line.len()..];
        (before.is_empty() || before.ends_with('\n') || before == "\u{feff}")
            && (after.is_empty() || after.starts_with('\n') || after.starts_with("\r\n"))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::FileMemoryStore;
    use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};

    fn doc(name: &str, description: &str) -> MemoryDoc {
        MemoryDoc::new(name, description, MemoryType::Project, "body")
    }

    fn index(dir: &std::path::Path) -> String {
        std::fs::read_to_string(dir.join("MEMORY.md")).unwrap()
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn new_lines_append_changed_lines_rewrite_unchanged_lines_touch_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FileMemoryStore::open(tmp.path()).unwrap();
        store
            .write("a.md", &doc("Альфа", "первая"), WriteMode::Overwrite)
            .await
            .unwrap();
        let ino = |p: &std::path::Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).unwrap().ino()
        };
        let first = ino(&tmp.path().join("MEMORY.md"));
        store
            .write("b.md", &doc("ベータ", "二番目"), WriteMode::Overwrite)
            .await
            .unwrap();
        // Appended in place (same inode), one line each.
        assert_eq!(ino(&tmp.path().join("MEMORY.md")), first);
        assert_eq!(
            index(tmp.path()),
            "- [Альфа](a.md) — первая\n- [ベータ](b.md) — 二番目\n"
        );
        // The same line again: nothing written.
        let before = std::fs::metadata(tmp.path().join("MEMORY.md")).unwrap();
        store
            .write("b.md", &doc("ベータ", "二番目"), WriteMode::Overwrite)
            .await
            .unwrap();
        let after = std::fs::metadata(tmp.path().join("MEMORY.md")).unwrap();
        assert_eq!(before.modified().unwrap(), after.modified().unwrap());
        // A changed line: rewritten where it was.
        store
            .write("a.md", &doc("Альфа", "исправлено"), WriteMode::Overwrite)
            .await
            .unwrap();
        assert_eq!(
            index(tmp.path()),
            "- [Альфа](a.md) — исправлено\n- [ベータ](b.md) — 二番目\n"
        );
    }

    /// A changed line is spliced where it stands: the byte-order mark, CRLF endings, hand-written
    /// lines and a quoted copy of the entry stay as they were, exactly as the index rules
    /// (`upsert_entry` on the text read afresh) would leave them.
    #[tokio::test]
    async fn a_changed_line_is_replaced_where_it_stands_and_nowhere_else() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FileMemoryStore::open(tmp.path()).unwrap();
        for (rel, name) in [("a.md", "A"), ("b.md", "B")] {
            store
                .write(rel, &doc(name, "one"), WriteMode::Overwrite)
                .await
                .unwrap();
        }
        // A hand edit: a BOM, CRLF, a heading, and a quote of a.md's line that is not an entry.
        let hand = "\u{feff}# Notes\r\n> was: - [A](a.md) — one\r\n- [A](a.md) — one\r\n\
                    - [B](b.md) — one\r\ntrailing words\r\n";
        std::fs::write(tmp.path().join("MEMORY.md"), hand).unwrap();
        let mut expected = hand.to_owned();
        for (rel, name, description) in [
            ("a.md", "A", "two"),
            ("b.md", "B", "deux"),
            ("a.md", "A", "drei, längere Beschreibung"),
            ("c.md", "C", "new"),
            ("a.md", "A", "4"),
        ] {
            store
                .write(rel, &doc(name, description), WriteMode::Overwrite)
                .await
                .unwrap();
            let line = format!("- [{name}]({rel}) — {description}");
            expected = memloop_store::upsert_entry(&expected, rel, &line);
            assert_eq!(index(tmp.path()), expected, "after {rel} → {description}");
        }
        assert!(index(tmp.path()).contains("> was: - [A](a.md) — one\r\n"));
        let files: Vec<String> = store
            .index_entries()
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.file)
            .collect();
        assert_eq!(files, ["a.md", "b.md", "c.md"]);
    }

    #[tokio::test]
    async fn a_torn_last_line_never_swallows_the_next_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FileMemoryStore::open(tmp.path()).unwrap();
        store
            .write("a.md", &doc("A", "one"), WriteMode::Overwrite)
            .await
            .unwrap();
        // A writer killed mid-append left half a line (no newline).
        let mut text = index(tmp.path());
        text.push_str("- [Half](ha");
        std::fs::write(tmp.path().join("MEMORY.md"), &text).unwrap();
        store
            .write("c.md", &doc("C", "three"), WriteMode::Overwrite)
            .await
            .unwrap();
        let entries = store.index_entries().await.unwrap();
        let files: Vec<&str> = entries.iter().map(|e| e.file.as_str()).collect();
        assert_eq!(files, ["a.md", "c.md"]);
        assert!(index(tmp.path()).ends_with("- [Half](ha\n- [C](c.md) — three\n"));
    }

    #[tokio::test]
    async fn a_hand_edit_between_writes_is_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FileMemoryStore::open(tmp.path()).unwrap();
        store
            .write("a.md", &doc("A", "one"), WriteMode::Overwrite)
            .await
            .unwrap();
        // Someone adds a line for b.md by hand (CRLF), before memloop writes b.md.
        std::fs::write(
            tmp.path().join("MEMORY.md"),
            "- [A](a.md) — one\r\n- [B by hand](b.md) — typed\r\n",
        )
        .unwrap();
        store
            .write("b.md", &doc("B", "two"), WriteMode::Overwrite)
            .await
            .unwrap();
        assert_eq!(
            index(tmp.path()),
            "- [A](a.md) — one\r\n- [B](b.md) — two\r\n",
            "replaced, not appended twice"
        );
        store
            .write("c.md", &doc("C", "three"), WriteMode::Overwrite)
            .await
            .unwrap();
        assert!(
            index(tmp.path()).ends_with("- [C](c.md) — three\r\n"),
            "CRLF kept"
        );
    }
}
