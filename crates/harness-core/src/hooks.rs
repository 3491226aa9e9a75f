//! What a turn-start [`Hook`](crate::Hook) can inject next to the user's message: an
//! [`Attachment`], or a [`PendingAttachment`] for work that settles in the background.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Text injected next to the user's message as a `<system-reminder>` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Kind, e.g. `relevant_memories`.
    pub kind: String,
    /// The text (without the reminder tags).
    pub text: String,
}

impl Attachment {
    /// The text wrapped as a system reminder.
    pub fn render(&self) -> String {
        format!("<system-reminder>\n{}\n</system-reminder>", self.text)
    }
}

/// Background work started at turn start whose result is attached when it settles.
///
/// The loop consumes it at the first check after it finished; if the turn ends first it is
/// dropped, which cancels and aborts the work.
#[derive(Debug)]
pub struct PendingAttachment {
    state: Pending,
}

#[derive(Debug)]
enum Pending {
    /// Known at turn start: attached at the first check.
    Ready(Option<Attachment>),
    /// Work on the runtime.
    Spawned {
        handle: JoinHandle<Option<Attachment>>,
        cancel: CancellationToken,
    },
}

impl PendingAttachment {
    /// Spawn `fut` on the runtime; `cancel` is fired when the attachment is dropped unconsumed.
    pub fn spawn<F>(cancel: CancellationToken, fut: F) -> Self
    where
        F: std::future::Future<Output = Option<Attachment>> + Send + 'static,
    {
        Self {
            state: Pending::Spawned {
                handle: tokio::spawn(fut),
                cancel,
            },
        }
    }

    /// An attachment that is already known: the loop attaches it at its first check, before
    /// the first model call (nothing runs in the background).
    pub fn ready(attachment: Attachment) -> Self {
        Self {
            state: Pending::Ready(Some(attachment)),
        }
    }

    /// Whether the work has settled.
    pub fn is_ready(&self) -> bool {
        match &self.state {
            Pending::Ready(_) => true,
            Pending::Spawned { handle, .. } => handle.is_finished(),
        }
    }

    /// Wait for the result (a panicked or aborted task yields `None`).
    pub async fn wait(mut self) -> Option<Attachment> {
        match &mut self.state {
            Pending::Ready(attachment) => attachment.take(),
            Pending::Spawned { handle, .. } => handle.await.ok().flatten(),
        }
    }
}

impl Drop for PendingAttachment {
    fn drop(&mut self) {
        if let Pending::Spawned { handle, cancel } = &self.state {
            if !handle.is_finished() {
                cancel.cancel();
                handle.abort();
            }
        }
    }
}
