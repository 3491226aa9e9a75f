//! Daily-log mode: `memory_log_append` appends a line to `logs/YYYY/MM/YYYY-MM-DD.md` through the
//! store (atomic, locked, secret-checked, contained). Logs stay out of the index and out of
//! recall; the dream distils them into topic files.

use async_trait::async_trait;
use chrono::{Datelike, Local, NaiveDate};
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_store::MemoryStore;
use memloop_store::{MemoryDoc, MemoryType, WriteMode};
use std::path::PathBuf;
use std::sync::Arc;

/// The daily-log guidance, shared by the extractor's prompt and the main agent's memory section:
/// no topic files, one line per fact with `memory_log_append`.
pub(crate) const DAILY_LOG_GUIDANCE: &str = include_str!("../templates/daily_log.md");

/// Name of the daily-log tool.
pub const MEMORY_LOG_APPEND: &str = "memory_log_append";

/// The log file of `date`, relative to the memory dir.
///
/// ```
/// use memloop_memory::dream::daily_log_path;
/// let d = chrono::NaiveDate::from_ymd_opt(2026, 4, 9).unwrap();
/// assert_eq!(daily_log_path(d), "logs/2026/04/2026-04-09.md");
/// ```
pub fn daily_log_path(date: NaiveDate) -> String {
    format!(
        "logs/{:04}/{:02}/{}.md",
        date.year(),
        date.month(),
        date.format("%Y-%m-%d")
    )
}

/// `memory_log_append {text}`: append a timestamped line to today's log (local date).
#[derive(Clone)]
pub struct DailyLogTool {
    store: Arc<dyn MemoryStore>,
}

impl DailyLogTool {
    /// A log tool writing through `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store }
    }

    /// Append `text` to the log of `date` (what the tool does, with an explicit date).
    pub async fn append(
        &self,
        date: NaiveDate,
        time: &str,
        text: &str,
    ) -> Result<PathBuf, memloop_store::MemoryError> {
        let doc = MemoryDoc {
            name: format!("Daily log {date}"),
            description: format!("raw notes of {date}, to be distilled into topic files"),
            memory_type: Some(MemoryType::Project),
            body: format!("- {time} {}", text.trim()),
        };
        let report = self
            .store
            .write(&daily_log_path(date), &doc, WriteMode::Append)
            .await?;
        Ok(report.path)
    }
}

#[async_trait]
impl Tool for DailyLogTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: MEMORY_LOG_APPEND.into(),
            description: "Append one line to today's memory log (logs/YYYY/MM/YYYY-MM-DD.md)."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "one fact, one line"}},
                "required": ["text"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(
        &self,
        _input: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        let rel = daily_log_path(Local::now().date_naive());
        self.store
            .write_target(&rel)
            .map(|p| vec![p])
            .map_err(|e| e.to_string())
    }

    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        let Some(text) = input.get("text").and_then(serde_json::Value::as_str) else {
            return ToolOutput::error("missing required string field `text`");
        };
        if text.trim().is_empty() {
            return ToolOutput::error("`text` is empty");
        }
        let now = Local::now();
        let time = now.format("%H:%M").to_string();
        match self.append(now.date_naive(), &time, text).await {
            Ok(path) => {
                ToolOutput::ok(format!("Logged to {}", path.display())).with_file_written(path)
            }
            Err(e) => ToolOutput::error(format!("{MEMORY_LOG_APPEND} failed: {e}")),
        }
    }
}
