//! The rig conversation kept as a memloop session transcript: rig's `ConversationMemory` over
//! memloop's [`TranscriptDir`], so `memloop sessions` lists, shows and searches a rig agent's
//! sessions as it does memloop's own.

use crate::convert;
use memloop::memory::store::MemoryError as StoreError;
use memloop::memory::transcripts::{TranscriptDir, TranscriptRecord};
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_core::memory::{ConversationMemory, MemoryError};
use rig_core::wasm_compat::WasmBoxedFuture;

/// rig's [`ConversationMemory`] kept in memloop's transcript format: the conversation id is the
/// session id (one `<id>.jsonl` file in the dir), each appended rig message one record, a
/// `clear` a reset record. `load` returns the messages after the last reset, as memloop resumes
/// a session.
///
/// Wrap it in `rig_memory::CompactingMemory` with a [`MemoryCompactor`](crate::MemoryCompactor)
/// for memloop's compaction.
#[derive(Debug, Clone)]
pub struct TranscriptMemory {
    dir: TranscriptDir,
}

impl TranscriptMemory {
    /// Transcripts in `dir` (for the project's own: `MemorySetup::transcript_dir`).
    pub fn new(dir: TranscriptDir) -> Self {
        Self { dir }
    }
}

impl ConversationMemory for TranscriptMemory {
    fn load<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
    ) -> WasmBoxedFuture<'a, Result<Vec<Message>, MemoryError>> {
        Box::pin(async move {
            match self.dir.load(conversation_id.as_str()) {
                Ok(transcript) => Ok(convert::to_rig(&transcript.conversation())),
                Err(StoreError::NotFound(_)) => Ok(Vec::new()),
                Err(e) => Err(MemoryError::backend(e)),
            }
        })
    }

    fn append<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
        messages: Vec<Message>,
    ) -> WasmBoxedFuture<'a, Result<(), MemoryError>> {
        Box::pin(async move {
            let id = conversation_id.as_str();
            let records = convert::to_memloop(&messages)
                .iter()
                .map(|m| TranscriptRecord::for_message(id, m))
                .collect::<Result<Vec<_>, _>>()
                .map_err(MemoryError::backend)?;
            self.dir.append(id, &records).map_err(MemoryError::backend)
        })
    }

    fn clear<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
    ) -> WasmBoxedFuture<'a, Result<(), MemoryError>> {
        Box::pin(async move {
            let id = conversation_id.as_str();
            self.dir
                .append(id, &[TranscriptRecord::reset(id, "clear")])
                .map_err(MemoryError::backend)
        })
    }
}
