//! A FIFO ticket queue: background updates run one at a time, in the order they were requested,
//! whatever order the runtime polls their tasks in.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Default)]
struct State {
    next: u64,
    abandoned: BTreeSet<u64>,
    /// ticket → since when it waits (enqueue time) or runs (start time).
    in_flight: BTreeMap<u64, Instant>,
}

/// The queue. Cloning shares it.
#[derive(Clone)]
pub(crate) struct FifoQueue {
    state: Arc<Mutex<State>>,
    serving: Arc<watch::Sender<u64>>,
}

impl Default for FifoQueue {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            serving: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// A place in the queue. Dropping it unused gives the place up.
pub(crate) struct Ticket {
    n: u64,
    queue: FifoQueue,
    used: bool,
}

impl FifoQueue {
    /// Take the next place (synchronously, so the order is the call order).
    pub fn enqueue(&self) -> Ticket {
        let n = match self.state.lock() {
            Ok(mut s) => {
                let n = s.next;
                s.next += 1;
                s.in_flight.insert(n, Instant::now());
                n
            }
            Err(_) => u64::MAX,
        };
        Ticket {
            n,
            queue: self.clone(),
            used: false,
        }
    }

    /// Since when the oldest queued or running job is in flight.
    pub fn in_flight_since(&self) -> Option<Instant> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.in_flight.values().min().copied())
    }

    /// Run `fut` when it is this ticket's turn.
    pub async fn run<F: Future>(&self, mut ticket: Ticket, fut: F) -> F::Output {
        ticket.used = true;
        let n = ticket.n;
        let mut rx = self.serving.subscribe();
        // The sender lives as long as `self`, so this only returns once it is our turn.
        let _ = rx.wait_for(|s| *s >= n).await;
        if let Ok(mut s) = self.state.lock() {
            s.in_flight.insert(n, Instant::now());
        }
        let _done = Finish {
            queue: self.clone(),
            n,
        };
        fut.await
    }

    fn finish(&self, n: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.in_flight.remove(&n);
            let mut next = n + 1;
            while s.abandoned.remove(&next) {
                s.in_flight.remove(&next);
                next += 1;
            }
            self.serving.send_replace(next);
        }
    }
}

struct Finish {
    queue: FifoQueue,
    n: u64,
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.queue.finish(self.n);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.used {
            return;
        }
        let serving_now = match self.queue.state.lock() {
            // Checked under the lock: `serving` only moves while it is held.
            Ok(mut s) => {
                let now = *self.queue.serving.borrow() == self.n;
                if !now {
                    s.abandoned.insert(self.n);
                    s.in_flight.remove(&self.n);
                }
                now
            }
            Err(_) => false,
        };
        if serving_now {
            self.queue.finish(self.n);
        }
    }
}
