//! [`FallbackSelector`]: a primary selector with a secondary one behind it.

use super::selector::{SelectionContext, Selector, SelectorError};
use async_trait::async_trait;
use memloop_store::MemoryHeader;
use memloop_store::ScanCache;
use std::sync::Arc;
use std::time::Duration;

/// Tries `primary` (bounded by `timeout`, tokio time); on an error or a timeout asks `secondary`.
/// A cancelled turn is not retried. An empty but successful primary answer is kept (the primary
/// decided that nothing fits).
///
/// ```
/// use memloop_recall::{FallbackSelector, KeywordSelector, Selector};
/// use std::sync::Arc;
/// use std::time::Duration;
/// let keyword: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
/// let both = FallbackSelector::new(keyword.clone(), keyword, Duration::from_secs(2));
/// # let _ = both;
/// ```
pub struct FallbackSelector {
    primary: Arc<dyn Selector>,
    secondary: Arc<dyn Selector>,
    timeout: Duration,
}

impl std::fmt::Debug for FallbackSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackSelector")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl FallbackSelector {
    /// `primary` first, `secondary` when it fails or takes longer than `timeout`.
    pub fn new(
        primary: Arc<dyn Selector>,
        secondary: Arc<dyn Selector>,
        timeout: Duration,
    ) -> Self {
        Self {
            primary,
            secondary,
            timeout,
        }
    }
}

#[async_trait]
impl Selector for FallbackSelector {
    fn name(&self) -> &'static str {
        "fallback"
    }

    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let first = tokio::time::timeout(
            self.timeout,
            self.primary.select_checked(query, headers, ctx),
        )
        .await
        .unwrap_or(Err(SelectorError::Timeout(self.timeout)));
        match first {
            Ok(paths) => Ok(paths),
            Err(SelectorError::Cancelled) => Err(SelectorError::Cancelled),
            Err(e) => {
                crate::RecallEvent::degraded(
                    ctx,
                    self.name(),
                    format!(
                        "{} failed, {} chose: {e}",
                        self.primary.name(),
                        self.secondary.name()
                    ),
                );
                self.secondary.select_checked(query, headers, ctx).await
            }
        }
    }

    fn header_cache(&self) -> Option<Arc<ScanCache>> {
        self.primary
            .header_cache()
            .or_else(|| self.secondary.header_cache())
    }
}
