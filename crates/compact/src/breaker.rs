//! The circuit breaker: after N consecutive failed compactions, stop trying until the next user
//! turn or a success.

/// Breaker state. Not thread-safe by itself; the compactor holds it in a mutex.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CircuitBreaker {
    failures: u32,
    /// The user turn the breaker opened in.
    open_in_turn: Option<u64>,
}

impl CircuitBreaker {
    /// Whether compaction may be tried in `turn` (a new turn closes an open breaker).
    pub fn allows(&mut self, turn: u64) -> bool {
        match self.open_in_turn {
            Some(t) if t == turn => false,
            Some(_) => {
                self.open_in_turn = None;
                self.failures = 0;
                true
            }
            None => true,
        }
    }

    /// Record a failure in `turn`; returns the consecutive count.
    pub fn failure(&mut self, turn: u64, limit: u32) -> u32 {
        self.failures += 1;
        if self.failures >= limit {
            self.open_in_turn = Some(turn);
        }
        self.failures
    }

    /// Record a success.
    pub fn success(&mut self) {
        self.failures = 0;
        self.open_in_turn = None;
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether the breaker is open.
    #[cfg(test)]
    pub fn is_open(&self) -> bool {
        self.open_in_turn.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_three_and_closes_on_next_turn_or_success() {
        let mut b = CircuitBreaker::default();
        assert!(b.allows(1));
        assert_eq!(b.failure(1, 3), 1);
        assert_eq!(b.failure(1, 3), 2);
        assert!(b.allows(1));
        assert_eq!(b.failure(1, 3), 3);
        assert!(!b.allows(1));
        assert!(b.is_open());
        assert!(b.allows(2));
        assert_eq!(b.failures(), 0);
        b.failure(2, 3);
        b.success();
        assert_eq!(b.failures(), 0);
    }
}
