//! A pause point for tests (features `store` and `embed`): code under test stops at it until
//! the test lets it through, and the test can wait until a number of callers have arrived.

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Notify, Semaphore};

/// A pause point: every caller of [`pass`](Gate::pass) is counted on arrival and then held
/// until the test [`release`](Gate::release)s it (one permit per caller) or
/// [`open`](Gate::open)s the gate for good. The test waits for arrivals with
/// [`wait_entered`](Gate::wait_entered): no sleeps, no timing.
///
/// The store wrapper (`Forwarding::hold`, feature `store`) and the fake embedder
/// (`FakeEmbedder::hold_queries`, feature `embed`) hold their calls at one.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_testkit::Gate;
/// use std::sync::Arc;
///
/// let gate = Arc::new(Gate::new());
/// let held = tokio::spawn({
///     let gate = gate.clone();
///     async move { gate.pass().await; "through" }
/// });
/// gate.wait_entered(1).await; // the task has arrived and is held
/// assert!(!held.is_finished());
/// gate.release(1);
/// assert_eq!(held.await.unwrap(), "through");
/// # }
/// ```
#[derive(Debug)]
pub struct Gate {
    /// Callers that have arrived, ever.
    entered: AtomicUsize,
    /// Woken on every arrival.
    arrivals: Notify,
    /// One permit lets one caller through; closed, it lets everyone through.
    permits: Semaphore,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate: every caller waits for a permit.
    pub fn new() -> Self {
        Self {
            entered: AtomicUsize::new(0),
            arrivals: Notify::new(),
            permits: Semaphore::new(0),
        }
    }

    /// Arrive (counted at once) and wait until a permit or the open gate lets this caller
    /// through. The code under test calls it at its pause point.
    pub async fn pass(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        self.arrivals.notify_waiters();
        // A closed semaphore is an open gate: every caller goes through.
        if let Ok(permit) = self.permits.acquire().await {
            permit.forget();
        }
    }

    /// How many callers have arrived so far (held or let through).
    pub fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }

    /// Wait until at least `n` callers have arrived since the gate was made (the count is
    /// cumulative: the second round of a test waits for `2`).
    pub async fn wait_entered(&self, n: usize) {
        loop {
            let mut arrival = std::pin::pin!(self.arrivals.notified());
            // Registered before the count is read, so an arrival in between is not missed.
            arrival.as_mut().enable();
            if self.entered() >= n {
                return;
            }
            arrival.await;
        }
    }

    /// Let `n` more callers through (those held now first, then those arriving later).
    pub fn release(&self, n: usize) {
        self.permits.add_permits(n);
    }

    /// Let every caller through, now and from now on.
    pub fn open(&self) {
        self.permits.close();
    }
}
