//! Progress on standard error (indicatif): a bar with rate where the
//! total is known (a run, a recovery), a spinner where it is not (a load).
//! All bars hang off one [`MultiProgress`], so that log lines printed
//! through [`suspend`] do not tear them. Hidden when standard error is no
//! terminal, and not made at all with `--quiet`.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::sync::OnceLock;
use std::time::Duration;

fn bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    BARS.get_or_init(MultiProgress::new)
}

/// Runs `f` (which prints to standard error) with the bars cleared, then
/// redraws them.
pub fn suspend<R>(f: impl FnOnce() -> R) -> R {
    bars().suspend(f)
}

fn styled(bar: ProgressBar, template: &str) -> ProgressBar {
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    bars().add(bar.with_style(style))
}

/// A bar over `total` units, `template` naming them (indicatif's
/// template syntax); hidden unless `show`.
pub fn bar(show: bool, total: u64, template: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    styled(ProgressBar::new(total), template)
}

/// A spinner saying `what`, ticking by itself; hidden unless `show`.
pub fn spinner(show: bool, what: String) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let s = styled(ProgressBar::new_spinner(), "{spinner} {msg} [{elapsed}]").with_message(what);
    s.enable_steady_tick(Duration::from_millis(100));
    s
}
