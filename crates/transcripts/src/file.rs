//! The transcript files: `<dir>/<session id>.jsonl`, one [`TranscriptRecord`] per line.

use memloop_core::message::Message;
use memloop_host::env::EnvVars;
use memloop_secrets::{SecretFilter, redact_secrets};
use memloop_store::{LocalDir, LocalPurpose, MemoryError, MemoryStore};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The extension of a transcript file (`<session id>.jsonl`).
pub const TRANSCRIPT_EXT: &str = "jsonl";

/// Whether and how long transcripts are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptConfig {
    /// Write transcripts at all. Default true.
    pub enabled: bool,
    /// Transcripts not modified for this long are deleted when a session starts
    /// ([`TranscriptDir::prune`]). Default 30 days (Claude Code's `cleanupPeriodDays`); `None`
    /// keeps them forever.
    pub retention: Option<Duration>,
    /// Redact credentials ([`redact_secrets`]) in the JSONL on disk too. Default false: the file
    /// stays faithful and only what is read back (search, `memloop sessions`) is redacted.
    /// `MEMLOOP_REDACT_TRANSCRIPTS=1` turns it on ([`TranscriptConfig::from_env`]).
    pub redact_on_disk: bool,
}

impl Default for TranscriptConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retention: Some(Duration::from_secs(30 * 24 * 60 * 60)),
            redact_on_disk: false,
        }
    }
}

impl TranscriptConfig {
    /// The defaults, with [`redact_on_disk`](Self::redact_on_disk) from
    /// `MEMLOOP_REDACT_TRANSCRIPTS`.
    pub fn from_env(env: &EnvVars) -> Self {
        Self {
            redact_on_disk: memloop_paths::env::redact_transcripts(env),
            ..Self::default()
        }
    }
}

/// What a line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// A user-role message (the user's text, tool results, attachments).
    User,
    /// An assistant message.
    Assistant,
    /// The live conversation restarts here (after a compaction or `Agent::clear`): the
    /// conversation to resume is what follows the last reset.
    Reset,
    /// Any other record (Claude Code writes summaries, snapshots, ...): kept out of the way.
    #[serde(other)]
    Other,
}

/// One line of a transcript. `type`, `sessionId`, `uuid`, `timestamp` and `message` are named as
/// in Claude Code's transcripts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptRecord {
    /// What the line records.
    #[serde(rename = "type")]
    pub kind: RecordKind,
    /// The session.
    #[serde(rename = "sessionId", default)]
    pub session_id: String,
    /// When it was written (RFC 3339).
    #[serde(default)]
    pub timestamp: String,
    /// The message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The message (a [`Message`] for memloop's own lines; kept as JSON so other writers' lines
    /// still read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<serde_json::Value>,
    /// Why the conversation restarted (`compaction`, `clear`, `resume`), on reset lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl TranscriptRecord {
    /// A line for `message`.
    pub fn for_message(session_id: &str, message: &Message) -> Result<Self, serde_json::Error> {
        Ok(Self {
            kind: match message.role {
                memloop_core::message::Role::User => RecordKind::User,
                memloop_core::message::Role::Assistant => RecordKind::Assistant,
            },
            session_id: session_id.to_owned(),
            timestamp: chrono::Utc::now().to_rfc3339(),
            uuid: Some(message.id.to_string()),
            message: Some(serde_json::to_value(message)?),
            reason: None,
        })
    }

    /// A reset line.
    pub fn reset(session_id: &str, reason: &str) -> Self {
        Self {
            kind: RecordKind::Reset,
            session_id: session_id.to_owned(),
            timestamp: chrono::Utc::now().to_rfc3339(),
            uuid: None,
            message: None,
            reason: Some(reason.to_owned()),
        }
    }

    /// The message, when the line holds one memloop can read.
    pub fn to_message(&self) -> Option<Message> {
        self.message
            .as_ref()
            .and_then(|m| serde_json::from_value(m.clone()).ok())
    }

    /// The record with every credential in its message replaced by a `[redacted: …]` marker
    /// ([`redact_secrets`] on each string; a string under a credential key, as in a tool input
    /// `{"password": "…"}`, is judged with its key). Ids, signatures and binary data are left as
    /// they are.
    pub fn redacted(&self) -> Self {
        let mut out = self.clone();
        if let Some(m) = out.message.as_mut() {
            redact_json(m);
        }
        out
    }

    /// Every piece of text in the message (text blocks, tool inputs and results), joined by
    /// newlines; works on other writers' message shapes too.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        if let Some(m) = &self.message {
            collect_text(m, &mut out);
        }
        out.join("\n")
    }
}

/// Redacts credentials in every string of `v`, in place; returns how many were replaced.
fn redact_json(v: &mut serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            let (out, n) = redact_secrets(s);
            if n > 0 {
                *s = out;
            }
            n
        }
        Value::Object(map) => {
            let mut n = 0;
            for (k, v) in map.iter_mut() {
                if matches!(
                    k.as_str(),
                    "id" | "tool_use_id" | "signature" | "data" | "source" | "type" | "media_type"
                ) {
                    continue;
                }
                // `{"password": "hunter2"}`: the value alone has no label; with its key it does.
                if let Value::String(s) = v
                    && SecretFilter::find(s).is_none()
                    && let Some(name) = SecretFilter::find(&format!("{k}={s}"))
                {
                    *s = format!("{}{name}]", memloop_secrets::REDACTED_PREFIX);
                    n += 1;
                    continue;
                }
                n += redact_json(v);
            }
            n
        }
        Value::Array(items) => items.iter_mut().map(redact_json).sum(),
        _ => 0,
    }
}

fn collect_text(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("text" | "content" | "thinking", serde_json::Value::String(s)) => {
                        out.push(s.clone());
                    }
                    ("input", v) if !v.is_string() => out.push(v.to_string()),
                    ("id" | "meta" | "usage" | "signature" | "source" | "data", _) => {}
                    (_, v) => collect_text(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        _ => {}
    }
}

/// A transcript read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    /// The records, in order (unreadable lines left out).
    pub records: Vec<TranscriptRecord>,
    /// Lines left out because they were not a record (a torn last line, a corrupt line).
    pub skipped_lines: usize,
}

impl Transcript {
    /// Parse JSONL text. A line that is not a record is skipped with a warning: the last line of
    /// a file a crash cut mid-write is the expected case.
    pub fn parse(text: &str, source: &Path) -> Self {
        let mut out = Self::default();
        let torn_tail = !text.is_empty() && !text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<TranscriptRecord>(line) {
                Ok(r) => out.records.push(r),
                Err(e) => {
                    out.skipped_lines += 1;
                    if torn_tail && i + 1 == lines.len() {
                        tracing::warn!(file = %source.display(), "transcript ends with a torn line (a write was cut off); skipped");
                    } else {
                        tracing::warn!(file = %source.display(), line = i + 1, error = %e, "unreadable transcript line skipped");
                    }
                }
            }
        }
        out
    }

    /// The conversation to resume: the messages after the last reset line.
    pub fn conversation(&self) -> Vec<Message> {
        let start = self
            .records
            .iter()
            .rposition(|r| r.kind == RecordKind::Reset)
            .map_or(0, |i| i + 1);
        self.records[start..]
            .iter()
            .filter_map(TranscriptRecord::to_message)
            .collect()
    }

    /// Every message record once (a message written again after a compaction reset is shown
    /// once), in order.
    pub fn message_records(&self) -> Vec<&TranscriptRecord> {
        let mut seen = HashSet::new();
        self.records
            .iter()
            .filter(|r| matches!(r.kind, RecordKind::User | RecordKind::Assistant))
            .filter(|r| r.uuid.as_ref().is_none_or(|u| seen.insert(u.clone())))
            .collect()
    }
}

/// One session in a transcript dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id (the file stem).
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Last modified.
    pub modified: SystemTime,
    /// Size in bytes.
    pub bytes: u64,
}

impl SessionInfo {
    /// The modification time as RFC 3339 (UTC, seconds), as memory listings show times.
    pub fn modified_rfc3339(&self) -> String {
        memloop_store::format_mtime(self.modified)
    }
}

/// A project's transcript dir: `<session id>.jsonl` files (the project dir, in Claude Code's
/// layout; the memory dir beside them is not a transcript).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptDir {
    dir: PathBuf,
    /// Whether [`TranscriptDir::append`] redacts credentials before writing.
    redact_on_disk: bool,
}

impl TranscriptDir {
    /// Transcripts in `dir`, written faithfully.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            redact_on_disk: false,
        }
    }

    /// Whether [`TranscriptDir::append`] replaces credentials with `[redacted: …]` markers
    /// before writing (builder style; [`TranscriptConfig::redact_on_disk`]).
    pub fn with_redaction_on_disk(mut self, on: bool) -> Self {
        self.redact_on_disk = on;
        self
    }

    /// Whether appends are redacted on disk.
    pub fn redacts_on_disk(&self) -> bool {
        self.redact_on_disk
    }

    /// Where `store` keeps transcripts ([`LocalPurpose::Transcripts`]; the file store answers
    /// with the project dir holding the memory dir), or why it keeps none.
    pub fn for_store(store: &dyn MemoryStore) -> Result<Self, String> {
        match store.local_dir(LocalPurpose::Transcripts) {
            LocalDir::Dir(d) => Ok(Self::new(d)),
            LocalDir::Elsewhere(why) => Err(why),
        }
    }

    /// The dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`. Refused when the id could name another file (empty, a path
    /// separator, a leading `.`).
    pub fn path_of(&self, id: &str) -> Result<PathBuf, MemoryError> {
        let bad = id.is_empty()
            || id.starts_with('.')
            || id.contains(['/', '\\', '\0'])
            || id.len() > 200;
        if bad {
            return Err(MemoryError::InvalidName {
                name: id.to_owned(),
                reason: "not a session id".into(),
            });
        }
        Ok(self.dir.join(format!("{id}.{TRANSCRIPT_EXT}")))
    }

    /// The sessions, newest first. A missing dir has none.
    pub fn list(&self) -> Result<Vec<SessionInfo>, MemoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(MemoryError::io(
                    format!("listing transcripts in {}", self.dir.display()),
                    e,
                ));
            }
        };
        let mut out = Vec::new();
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some(TRANSCRIPT_EXT) {
                continue;
            }
            let Some(id) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if id.starts_with('.') {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            out.push(SessionInfo {
                id: id.to_owned(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                bytes: meta.len(),
                path,
            });
        }
        out.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Read session `id`'s transcript.
    pub fn load(&self, id: &str) -> Result<Transcript, MemoryError> {
        let path = self.path_of(id)?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(MemoryError::NotFound(format!("session {id}")));
            }
            Err(e) => return Err(MemoryError::io(format!("reading {}", path.display()), e)),
        };
        Ok(Transcript::parse(&String::from_utf8_lossy(&bytes), &path))
    }

    /// Append records to session `id`'s transcript: each one line, the batch in one write, the
    /// file created (and its dir) when missing. With [`TranscriptDir::with_redaction_on_disk`]
    /// each record is written [`redacted`](TranscriptRecord::redacted).
    pub fn append(&self, id: &str, records: &[TranscriptRecord]) -> Result<(), MemoryError> {
        if records.is_empty() {
            return Ok(());
        }
        let path = self.path_of(id)?;
        let mut buf = Vec::new();
        for r in records {
            let redacted;
            let r = if self.redact_on_disk {
                redacted = r.redacted();
                &redacted
            } else {
                r
            };
            serde_json::to_writer(&mut buf, r).map_err(|e| {
                MemoryError::io("encoding a transcript record", std::io::Error::other(e))
            })?;
            buf.push(b'\n');
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| MemoryError::io(format!("creating {}", self.dir.display()), e))?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| MemoryError::io(format!("opening {}", path.display()), e))?;
        file.write_all(&buf)
            .and_then(|()| file.flush())
            .map_err(|e| MemoryError::io(format!("appending to {}", path.display()), e))
    }

    /// Delete transcripts last modified more than `retention` before `now`, except session
    /// `keep`. Returns the ids deleted.
    pub fn prune(
        &self,
        retention: Duration,
        now: SystemTime,
        keep: &str,
    ) -> Result<Vec<String>, MemoryError> {
        let mut deleted = Vec::new();
        for s in self.list()? {
            let old = now
                .duration_since(s.modified)
                .is_ok_and(|age| age > retention);
            if !old || s.id == keep {
                continue;
            }
            match std::fs::remove_file(&s.path) {
                Ok(()) => deleted.push(s.id),
                Err(e) => {
                    tracing::warn!(file = %s.path.display(), error = %e, "could not delete an expired transcript");
                }
            }
        }
        if !deleted.is_empty() {
            tracing::info!(count = deleted.len(), "expired transcripts deleted");
        }
        Ok(deleted)
    }
}
