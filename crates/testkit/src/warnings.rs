//! A minimal `tracing` subscriber that records the messages of WARN-or-worse events, for tests
//! that check what a call logs (feature `warnings`; `tracing` only).

use std::sync::{Arc, Mutex, Once, PoisonError};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

/// Records WARN and ERROR event messages.
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// The recorded messages.
    pub fn messages(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Run `f` with this recorder as the thread's default subscriber.
    ///
    /// A callsite's interest is cached process-wide: a callsite first reached on another
    /// thread while this recorder was being installed could be cached as "never" and its
    /// events skipped here. So the first capture installs a global default that is interested
    /// in every callsite "sometimes" (and records nothing): no callsite is ever cached as
    /// "never", and each event asks the current thread's subscriber. A process that already
    /// has a global default keeps it.
    pub fn capture<T>(&self, f: impl FnOnce() -> T) -> T {
        static SOMETIMES: Once = Once::new();
        SOMETIMES.call_once(|| {
            let _ = tracing::subscriber::set_global_default(AskEachTime);
        });
        tracing::subscriber::with_default(self.clone(), f)
    }
}

/// The global default [`Warnings::capture`] installs: enabled for nothing, but never lets a
/// callsite's interest be cached as "never".
struct AskEachTime;

impl Subscriber for AskEachTime {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(m.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
