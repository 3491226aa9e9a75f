//! Progress bars for work that can take more than a moment (embedding a cold semantic index):
//! drawn on stderr only when stderr is a terminal, and only once the work has run for two seconds
//! (`MEMLOOP_PROGRESS_DELAY_MS` changes that), so quick commands, pipes, scripts and `--json`
//! consumers never see one. `MEMLOOP_NO_PROGRESS=1` turns them off.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use memloop_host::env::EnvVars;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Turns progress bars off when truthy.
pub const NO_PROGRESS: &str = "MEMLOOP_NO_PROGRESS";
/// How long work runs before its bar is drawn, in milliseconds (default 2,000).
pub const PROGRESS_DELAY_MS: &str = "MEMLOOP_PROGRESS_DELAY_MS";

const DEFAULT_DELAY: Duration = Duration::from_secs(2);

/// One bar: `label [#####-----] done/total (eta)`, hidden until the delay has passed.
pub struct Progress {
    bar: ProgressBar,
    enabled: bool,
    shown: AtomicBool,
    started: Instant,
    delay: Duration,
}

impl Progress {
    /// A bar for `label`, drawn on stderr if it is a terminal and `env` does not turn bars off.
    pub fn new(label: &str, env: &EnvVars) -> Self {
        let enabled = std::io::stderr().is_terminal() && !env.switch(NO_PROGRESS);
        let delay = env
            .get(PROGRESS_DELAY_MS)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_DELAY, Duration::from_millis);
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})")
            .map(|s| s.progress_chars("#>-"))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(label.to_owned());
        Self {
            bar,
            enabled,
            shown: AtomicBool::new(false),
            started: Instant::now(),
            delay,
        }
    }

    /// `done` of `total` items are finished.
    pub fn set(&self, done: usize, total: usize) {
        if self.enabled
            && total > done
            && self.started.elapsed() >= self.delay
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
    }

    /// Remove the bar from the terminal (nothing is left behind).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
