//! Results of background sub-agents, waiting for the parent's next turn.

use memloop_core::events::SubAgentEnd;
use memloop_core::hooks::Attachment;
use std::sync::{Arc, Mutex};

/// The attachment kind background results arrive as.
pub const BACKGROUND_RESULTS_KIND: &str = "subagent_results";

/// One finished background sub-agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BackgroundResult {
    pub id: String,
    pub name: String,
    pub end: SubAgentEnd,
    pub text: String,
}

/// Finished background runs, in the order they finished. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inbox {
    results: Arc<Mutex<Vec<BackgroundResult>>>,
}

impl Inbox {
    pub fn push(&self, result: BackgroundResult) {
        if let Ok(mut r) = self.results.lock() {
            r.push(result);
        }
    }

    /// Everything finished so far, as one system reminder for the parent (`None` when
    /// nothing finished). Taken: each result is delivered once.
    pub fn take_attachment(&self) -> Option<Attachment> {
        let results = self
            .results
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        if results.is_empty() {
            return None;
        }
        let text = results
            .iter()
            .map(|r| {
                let body = if r.text.trim().is_empty() {
                    "(it wrote no text)"
                } else {
                    r.text.trim()
                };
                match r.end {
                    SubAgentEnd::Completed => format!(
                        "Background agent `{}` ({}) finished. Its result:\n{body}",
                        r.name, r.id
                    ),
                    ref end => format!(
                        "Background agent `{}` ({}) did not finish: {end}. Its last text:\n{body}",
                        r.name, r.id
                    ),
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        Some(Attachment {
            kind: BACKGROUND_RESULTS_KIND.to_owned(),
            text,
        })
    }
}
