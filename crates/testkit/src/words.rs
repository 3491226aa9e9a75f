//! Generated memory text for benchmarks and tests: a fixed word list of an ops team's vocabulary
//! and a small deterministic generator over it, so runs and machines see the same text.

/// The words generated text is made of.
pub const WORDS: &[&str] = &[
    "billing",
    "postgres",
    "queue",
    "deploy",
    "grafana",
    "latency",
    "invoice",
    "schema",
    "retry",
    "timeout",
    "cache",
    "index",
    "migration",
    "runbook",
    "oncall",
    "rollback",
    "kafka",
    "redis",
    "auth",
    "token",
    "tenant",
    "backup",
    "replica",
    "shard",
    "metrics",
    "alert",
    "budget",
    "sla",
    "release",
    "feature",
    "flag",
    "canary",
    "payment",
    "refund",
    "ledger",
    "export",
    "import",
];

/// A deterministic generator (a 64-bit linear congruential generator) of numbers and
/// [`WORDS`]: the same seed gives the same sequence everywhere.
///
/// ```
/// use memloop_testkit::Lcg;
/// let (mut a, mut b) = (Lcg(7), Lcg(7));
/// assert_eq!(a.words(5), b.words(5));
/// assert_eq!(a.words(3).split(' ').count(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number (31 bits).
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }

    /// The next word of [`WORDS`].
    pub fn word(&mut self) -> &'static str {
        WORDS[self.next() % WORDS.len()]
    }

    /// The next `n` words, separated by spaces.
    pub fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}
