//! [`CompactionStrategy`]: which strategy compacted a conversation (its own file so events can
//! name it without depending on the compactor interface).

/// Which compaction strategy produced an outcome. Serialised (and displayed) as its name:
/// `session_memory`, `summary`, `cut`, or a custom strategy's own name.
///
/// ```
/// use memloop_core::compaction::CompactionStrategy;
/// assert_eq!(CompactionStrategy::SessionNotes.as_str(), "session_memory");
/// assert_eq!(serde_json::to_string(&CompactionStrategy::Cut).unwrap(), r#""cut""#);
/// assert_eq!(CompactionStrategy::from_name("summary"), CompactionStrategy::Summary);
/// assert_eq!(CompactionStrategy::custom("drop_all"), "drop_all");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompactionStrategy {
    /// The session notes became the summary; the recent messages are kept verbatim.
    SessionNotes,
    /// A forked LLM call summarised the conversation.
    Summary,
    /// The last resort when not even the summary request fits: the newest messages that fit,
    /// the largest of them cut in the middle; older turns dropped, not summarised.
    Cut,
    /// A host-provided strategy, by its name.
    Custom(String),
}

impl CompactionStrategy {
    /// The serialised name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::SessionNotes => "session_memory",
            Self::Summary => "summary",
            Self::Cut => "cut",
            Self::Custom(name) => name,
        }
    }

    /// The strategy of a serialised name (an unknown name is [`Custom`](Self::Custom)).
    pub fn from_name(name: &str) -> Self {
        match name {
            "session_memory" => Self::SessionNotes,
            "summary" => Self::Summary,
            "cut" => Self::Cut,
            other => Self::Custom(other.to_owned()),
        }
    }

    /// A host strategy's name (a built-in name gives the built-in variant).
    pub fn custom(name: impl Into<String>) -> Self {
        Self::from_name(&name.into())
    }
}

impl std::fmt::Display for CompactionStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for CompactionStrategy {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CompactionStrategy {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for CompactionStrategy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for CompactionStrategy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(Self::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::CompactionStrategy;
    use crate::events::AgentEvent;

    #[test]
    fn events_serialise_the_names_as_before() {
        for (strategy, name) in [
            (CompactionStrategy::SessionNotes, "session_memory"),
            (CompactionStrategy::Summary, "summary"),
            (CompactionStrategy::Cut, "cut"),
            (CompactionStrategy::custom("mine"), "mine"),
        ] {
            let event = AgentEvent::Compacted {
                strategy: strategy.clone(),
                tokens_before: 10,
                tokens_after: 2,
                messages_kept: 1,
            };
            assert_eq!(
                serde_json::to_string(&event).ok(),
                Some(format!(
                    r#"{{"event":"compacted","strategy":"{name}","tokens_before":10,"tokens_after":2,"messages_kept":1}}"#
                ))
            );
            assert_eq!(CompactionStrategy::from_name(name), strategy);
            assert_eq!(strategy.to_string(), name);
        }
    }
}
