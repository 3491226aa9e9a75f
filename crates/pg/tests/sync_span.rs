//! The `team_sync` span, in a test binary of its own: a `tracing` subscriber set for one test
//! while other tests of the same binary run on other threads can miss callsites those tests
//! registered first, so this test has its process to itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::SyncOptions;
use memloop_store::WriteMode;
use support::{TestSchema, sync_doc as doc, sync_machine as machine};

const PULL: SyncOptions = SyncOptions { prune: false };

/// The spans a `tracing` layer saw: name and fields, as recorded so far.
#[derive(Clone, Default)]
struct Spans(std::sync::Arc<std::sync::Mutex<Vec<SeenSpan>>>);

/// A span's name and its fields (`id` first), in the order they were recorded.
type SeenSpan = (String, Vec<(String, String)>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>>
    tracing_subscriber::Layer<S> for Spans
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = vec![("id".to_owned(), id.into_u64().to_string())];
        attrs.record(&mut Fields(&mut fields));
        let mut spans = self.0.lock().unwrap();
        spans.push((attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let key = id.into_u64().to_string();
        let mut spans = self.0.lock().unwrap();
        if let Some((_, fields)) = spans
            .iter_mut()
            .rev()
            .find(|(_, f)| f.iter().any(|(k, v)| k == "id" && *v == key))
        {
            values.record(&mut Fields(fields));
        }
    }
}

impl Spans {
    /// The `team_sync` spans' fields, as maps, in order.
    fn syncs(&self) -> Vec<std::collections::BTreeMap<String, String>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(name, _)| name == "team_sync")
            .map(|(_, f)| f.iter().cloned().collect())
            .collect()
    }
}

/// Every sync is one `team_sync` span: which way, how many entries it reported (moved, or out of
/// step for a status), and the error's type when it failed; never a memory's text.
#[tokio::test]
async fn each_sync_is_a_span_with_its_direction_and_entries() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));

    let schema = TestSchema::new();
    let alice = machine(&schema, "team").await;
    let bob = machine(&schema, "memory").await;
    for (rel, name) in [("deploy.md", "Deploys"), ("ci.md", "CI")] {
        alice
            .local
            .write(
                rel,
                &doc(name, "Shipped on Tuesdays."),
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
    alice.sync.push(PULL).await.unwrap();
    bob.sync.pull(PULL).await.unwrap();
    bob.sync.status().await.unwrap();

    let seen = spans.syncs();
    let summary: Vec<(&str, &str)> = seen
        .iter()
        .map(|f| {
            (
                f["memloop.sync.direction"].as_str(),
                f.get("memloop.sync.entries").map_or("-", String::as_str),
            )
        })
        .collect();
    assert_eq!(summary, [("push", "2"), ("pull", "2"), ("status", "0")]);
    assert!(seen.iter().all(|f| !f.contains_key("error.type")));
    for f in &seen {
        assert!(f.values().all(|v| !v.contains("Tuesdays")), "{f:?}");
    }

    // The team table gone (a dropped schema, a wrong database): the pull fails, and says so.
    support::admin()
        .await
        .batch_execute(&format!(
            "DROP TABLE {}.memloop_memories CASCADE",
            schema.name
        ))
        .await
        .unwrap();
    assert!(bob.sync.pull(PULL).await.is_err());
    let failed = spans.syncs().pop().unwrap();
    assert_eq!(failed["memloop.sync.direction"], "pull");
    assert_eq!(failed["error.type"], "team_sync_failed");
    assert!(!failed.contains_key("memloop.sync.entries"));
}
