//! memloop's compaction behind rig's `Compactor`: the messages rig evicts from its window (after
//! the previous compaction's summary) go to memloop's compaction, and what it returns comes back
//! as the one message rig puts before the recent history.

use crate::convert;
use memloop::MemorySession;
use memloop::core::message::MessageKind;
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_core::memory::{Compactor, MemoryError};
use rig_core::wasm_compat::WasmBoxedFuture;
use std::sync::Arc;

/// memloop's compaction ([`MemorySession::compact`]: the session notes as the summary, else a
/// summary the session's model writes) as rig's [`Compactor`], for
/// `rig_memory::CompactingMemory::new(memory, window_policy, compactor)`: rig's window policy
/// decides what leaves the window, memloop summarises it.
///
/// rig hands a compactor only what leaves the window, and takes back one message. memloop's
/// compaction keeps the newest part of what it is given verbatim (its `min_tokens` /
/// `min_text_messages`); those messages follow the summary in that one message, as text.
#[derive(Clone)]
pub struct MemoryCompactor {
    session: Arc<MemorySession>,
}

impl MemoryCompactor {
    /// The compactor of `session`.
    pub fn new(session: Arc<MemorySession>) -> Self {
        Self { session }
    }
}

impl Compactor for MemoryCompactor {
    type Artifact = Message;

    fn compact<'a>(
        &'a self,
        _conversation_id: &'a ConversationId,
        evicted: &'a [Message],
        carry_over: Option<&'a Message>,
    ) -> WasmBoxedFuture<'a, Result<Message, MemoryError>> {
        Box::pin(async move {
            let history: Vec<Message> = carry_over.into_iter().chain(evicted).cloned().collect();
            let compacted = self
                .session
                .compact(convert::to_memloop(&history))
                .await
                .map_err(MemoryError::backend)?;
            // The boundary marker is bookkeeping; the summary and what was kept are the text.
            let text = compacted
                .iter()
                .filter(|m| m.meta.kind != MessageKind::CompactBoundary)
                .map(|m| m.text())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("\n\n");
            Ok(Message::user(text))
        })
    }
}
