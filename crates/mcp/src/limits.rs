//! Per-token limits of the HTTP server ([`TokenLimits`]): how many requests one token may have
//! in flight at once, and how fast it may send them (a token bucket: `rate` per second, up to
//! `burst` at once). Each server counts alone: nothing is shared between replicas, so `N`
//! replicas behind a round-robin balancer admit about `N` times the rate of one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// Most requests one token may have in flight at once (the default of
/// [`TokenLimits::concurrent`]).
pub const TOKEN_CONCURRENT: usize = 32;

/// Requests per second one token may send on average (the default of [`TokenLimits::rate`]).
pub const TOKEN_RATE: f64 = 100.0;

/// Requests one token may send at once after a quiet spell (the default of
/// [`TokenLimits::burst`]).
pub const TOKEN_BURST: u32 = 200;

/// How many requests each token (each client, without tokens) may make: at most
/// `concurrent` in flight, and requests admitted by a token bucket that holds `burst` and
/// refills at `rate` per second. A request past either limit is answered HTTP 429 with a
/// `Retry-After` (seconds until the bucket holds a request again, at least 1) and a JSON-RPC
/// error. `/health` is never counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLimits {
    /// Most requests of one token in flight at once (an answer streamed as SSE counts until
    /// its stream ends); 0 turns this limit off.
    pub concurrent: usize,
    /// Requests per second the bucket refills; 0 (or less, or not a number) turns the rate
    /// limit off.
    pub rate: f64,
    /// Requests the bucket holds (what a client may send at once after a quiet spell); at
    /// least 1 is used.
    pub burst: u32,
}

impl Default for TokenLimits {
    fn default() -> Self {
        Self {
            concurrent: TOKEN_CONCURRENT,
            rate: TOKEN_RATE,
            burst: TOKEN_BURST,
        }
    }
}

impl TokenLimits {
    fn rate_limited(&self) -> bool {
        self.rate.is_finite() && self.rate > 0.0
    }
}

/// Why a request was refused: what to tell the client, and when to come back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refused {
    /// Whole seconds for `Retry-After` (at least 1).
    pub(crate) retry_after: u64,
    /// The reason, for the JSON-RPC error.
    pub(crate) reason: String,
}

/// One token's bucket and its requests in flight.
#[derive(Debug)]
struct Slot {
    tokens: f64,
    refilled: Instant,
    in_flight: usize,
}

/// The per-token counters of one server.
#[derive(Clone)]
pub(crate) struct Limiter {
    limits: TokenLimits,
    slots: Arc<Mutex<HashMap<[u8; 32], Slot>>>,
}

/// Most idle token slots kept before the full ones are swept out (a slot is a few dozen bytes;
/// a server sees as many as it has tokens, or clients without tokens).
const MAX_IDLE_SLOTS: usize = 4096;

impl Limiter {
    pub(crate) fn new(limits: TokenLimits) -> Self {
        Self {
            limits,
            slots: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn burst(&self) -> f64 {
        f64::from(self.limits.burst.max(1))
    }

    /// Admit one request of `owner` at `now`, or say why not. An admitted request counts as in
    /// flight until the returned [`Admitted`] is dropped.
    pub(crate) fn admit(&self, owner: &[u8; 32], now: Instant) -> Result<Admitted, Refused> {
        let burst = self.burst();
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.len() >= MAX_IDLE_SLOTS {
            let rate = self.limits.rate;
            let rate_limited = self.limits.rate_limited();
            slots.retain(|_, s| {
                let full = !rate_limited
                    || s.tokens + now.duration_since(s.refilled).as_secs_f64() * rate >= burst;
                s.in_flight > 0 || !full
            });
        }
        let slot = slots.entry(*owner).or_insert(Slot {
            tokens: burst,
            refilled: now,
            in_flight: 0,
        });
        if self.limits.concurrent > 0 && slot.in_flight >= self.limits.concurrent {
            return Err(Refused {
                retry_after: 1,
                reason: format!(
                    "too many requests in flight for this token (at most {}): wait for an answer \
                     before sending more",
                    self.limits.concurrent
                ),
            });
        }
        if self.limits.rate_limited() {
            let rate = self.limits.rate;
            let elapsed = now.saturating_duration_since(slot.refilled).as_secs_f64();
            slot.tokens = (slot.tokens + elapsed * rate).min(burst);
            slot.refilled = now;
            if slot.tokens < 1.0 {
                let wait = (1.0 - slot.tokens) / rate;
                return Err(Refused {
                    retry_after: (wait.ceil() as u64).max(1),
                    reason: format!(
                        "request rate over this token's limit ({rate} per second, bursts of \
                         {burst}): retry after the time in Retry-After"
                    ),
                });
            }
            slot.tokens -= 1.0;
        }
        slot.in_flight += 1;
        Ok(Admitted {
            limiter: self.clone(),
            owner: *owner,
        })
    }
}

/// A request admitted under the limits: in flight until dropped.
pub(crate) struct Admitted {
    limiter: Limiter,
    owner: [u8; 32],
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut slots = self
            .limiter
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get_mut(&self.owner) {
            slot.in_flight = slot.in_flight.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    const A: [u8; 32] = [1; 32];
    const B: [u8; 32] = [2; 32];

    fn limiter(concurrent: usize, rate: f64, burst: u32) -> Limiter {
        Limiter::new(TokenLimits {
            concurrent,
            rate,
            burst,
        })
    }

    #[test]
    fn the_bucket_admits_a_burst_then_refills_at_the_rate() {
        let l = limiter(0, 2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            drop(l.admit(&A, t0).unwrap());
        }
        let refused = l.admit(&A, t0).err().unwrap();
        // One request comes back in half a second: Retry-After rounds up to 1.
        assert_eq!(refused.retry_after, 1, "{refused:?}");
        assert!(refused.reason.contains("2 per second"), "{refused:?}");
        // Another token has its own bucket.
        drop(l.admit(&B, t0).unwrap());
        // After 0.4 s: 0.8 of a request, still refused; after 0.5 s: one.
        assert!(l.admit(&A, t0 + Duration::from_millis(400)).is_err());
        drop(l.admit(&A, t0 + Duration::from_millis(500)).unwrap());
        assert!(l.admit(&A, t0 + Duration::from_millis(500)).is_err());
        // A long quiet spell refills to the burst, not past it.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            drop(l.admit(&A, later).unwrap());
        }
        assert!(l.admit(&A, later).is_err());
    }

    #[test]
    fn retry_after_is_the_time_to_the_next_request_rounded_up() {
        let l = limiter(0, 0.1, 1);
        let t0 = Instant::now();
        drop(l.admit(&A, t0).unwrap());
        assert_eq!(l.admit(&A, t0).err().unwrap().retry_after, 10);
        let r = l.admit(&A, t0 + Duration::from_millis(2500)).err().unwrap();
        assert_eq!(r.retry_after, 8);
        // A rate of 0 is no rate limit.
        let free = limiter(0, 0.0, 1);
        for _ in 0..1000 {
            drop(free.admit(&A, t0).unwrap());
        }
    }

    #[test]
    fn requests_in_flight_are_capped_per_token_and_released_when_done() {
        let l = limiter(2, 0.0, 1);
        let t0 = Instant::now();
        let first = l.admit(&A, t0).unwrap();
        let second = l.admit(&A, t0).unwrap();
        let refused = l.admit(&A, t0).err().unwrap();
        assert_eq!(refused.retry_after, 1);
        assert!(refused.reason.contains("at most 2"), "{refused:?}");
        let other = l.admit(&B, t0).unwrap();
        drop(first);
        let third = l.admit(&A, t0).unwrap();
        assert!(l.admit(&A, t0).is_err());
        drop((second, third, other));
        drop(l.admit(&A, t0).unwrap());
    }

    #[test]
    fn idle_slots_are_swept_but_not_ones_in_flight_or_draining() {
        let l = limiter(1, 1.0, 1);
        let t0 = Instant::now();
        let held = l.admit(&A, t0).unwrap();
        for i in 0..MAX_IDLE_SLOTS + 10 {
            let mut owner = [0u8; 32];
            owner[..8].copy_from_slice(&(i as u64 + 1000).to_le_bytes());
            drop(l.admit(&owner, t0).unwrap());
        }
        // A's request is still in flight: its slot survived the sweep.
        assert!(l.admit(&A, t0 + Duration::from_secs(10)).is_err());
        drop(held);
        assert!(l.slots.lock().unwrap().len() <= MAX_IDLE_SLOTS + 1);
    }
}
