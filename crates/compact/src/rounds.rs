//! API rounds: one model response (all records sharing its response id) plus the user messages
//! that follow it. Dropping whole rounds from the front keeps tool pairs intact.

use crate::keep::same_response;
use memloop_core::{
    message::{Message, Role},
    tokens::{TokenCounter, estimate_message},
};
use std::ops::Range;

/// The rounds of `messages`, in order. Leading user messages form the first round.
pub fn api_rounds(messages: &[Message]) -> Vec<Range<usize>> {
    let mut starts = vec![0];
    for i in 1..messages.len() {
        if messages[i].role == Role::Assistant && !same_response(&messages[i - 1], &messages[i]) {
            starts.push(i);
        }
    }
    starts.dedup();
    let mut out: Vec<Range<usize>> = starts
        .windows(2)
        .map(|w| w[0]..w[1])
        .filter(|r| !r.is_empty())
        .collect();
    if let Some(&last) = starts.last() {
        if last < messages.len() {
            out.push(last..messages.len());
        }
    }
    out
}

/// Text of the placeholder that opens a conversation whose oldest rounds were dropped.
pub const DROPPED_PLACEHOLDER: &str =
    "[Earlier messages of this conversation were left out here to fit the context window.]";

/// Drop the oldest rounds: enough to save `excess` tokens when known, else `fraction` of them
/// (at least one); always keep at least one round. `None` when only one round is left.
pub fn drop_oldest_rounds(
    messages: &[Message],
    excess: Option<u64>,
    fraction: f64,
    counter: &dyn TokenCounter,
) -> Option<Vec<Message>> {
    let rounds = api_rounds(messages);
    if rounds.len() <= 1 {
        return None;
    }
    let mut n = match excess {
        Some(excess) => {
            let mut saved = 0;
            let mut n = 0;
            for r in &rounds {
                if saved >= excess {
                    break;
                }
                saved += messages[r.clone()]
                    .iter()
                    .map(|m| estimate_message(counter, m))
                    .sum::<u64>();
                n += 1;
            }
            n
        }
        None => (rounds.len() as f64 * fraction).ceil() as usize,
    };
    n = n.clamp(1, rounds.len() - 1);
    let mut out = Vec::with_capacity(messages.len() - rounds[n].start + 1);
    if messages[rounds[n].start].role == Role::Assistant {
        out.push(Message::user(DROPPED_PLACEHOLDER));
    }
    out.extend_from_slice(&messages[rounds[n].start..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memloop_core::{
        invariants::check_invariants, message::ContentBlock, tokens::CharEstimator,
    };
    use serde_json::json;

    fn conv(rounds: usize) -> Vec<Message> {
        let mut v = vec![Message::user("start")];
        for i in 0..rounds {
            let id = format!("t{i}");
            v.push(
                Message::new(Role::Assistant, vec![ContentBlock::text("thinking")])
                    .with_response_id(format!("r{i}")),
            );
            v.push(
                Message::new(
                    Role::Assistant,
                    vec![ContentBlock::tool_use(&id, "read", json!({"i": i}))],
                )
                .with_response_id(format!("r{i}")),
            );
            v.push(Message::new(
                Role::User,
                vec![ContentBlock::tool_result(&id, "x".repeat(400), false)],
            ));
        }
        v.push(Message::assistant("done").with_response_id("last"));
        v
    }

    #[test]
    fn rounds_keep_split_records_together() {
        let c = conv(3);
        let r = api_rounds(&c);
        assert_eq!(r, vec![0..1, 1..4, 4..7, 7..10, 10..11]);
    }

    #[test]
    fn dropping_keeps_pairs_and_at_least_one_round() {
        let c = conv(10);
        let by_fraction = drop_oldest_rounds(&c, None, 0.2, &CharEstimator).unwrap();
        assert!(check_invariants(&by_fraction).is_ok());
        assert_eq!(by_fraction.len(), c.len() - 1 - 6 + 1);
        let by_excess = drop_oldest_rounds(&c, Some(100), 0.2, &CharEstimator).unwrap();
        assert!(check_invariants(&by_excess).is_ok());
        assert_eq!(by_excess.len(), c.len() - 4 + 1);
        let all = drop_oldest_rounds(&c, Some(u64::MAX), 0.2, &CharEstimator).unwrap();
        assert_eq!(all.len(), 2);
        assert!(drop_oldest_rounds(&all[1..], None, 0.5, &CharEstimator).is_none());
    }
}
