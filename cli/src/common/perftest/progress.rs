//! A progress bar for runs longer than a second, shown only when stdout is
//! a terminal (and never with `--json`). It stays hidden for the first
//! second, so short runs print nothing but the table.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the bar counts towards.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// A number of iterations.
    Iterations(u64),
    /// A duration.
    Duration(Duration),
}

/// Delay before the bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A lazily shown progress bar.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    goal: Goal,
    label: String,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar for one size of a run; `enabled` is false for `--json`.
    pub fn new(goal: Goal, label: String, enabled: bool) -> Progress {
        Progress {
            enabled: enabled && std::io::stdout().is_terminal(),
            goal,
            label,
            started: Instant::now(),
            bar: None,
        }
    }

    /// Updates the bar with `done` iterations; cheap when hidden.
    pub fn update(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        let elapsed = self.started.elapsed();
        if self.bar.is_none() {
            if elapsed < SHOW_AFTER {
                return;
            }
            let (len, template) = match self.goal {
                Goal::Iterations(n) => (
                    n,
                    "{msg} [{bar:40}] {pos}/{len} iterations ({eta} left)".to_string(),
                ),
                Goal::Duration(d) => (
                    d.as_millis() as u64,
                    format!(
                        "{{msg}} [{{bar:40}}] {{elapsed}} of {:.0}s",
                        d.as_secs_f64()
                    ),
                ),
            };
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stdout());
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(self.label.clone());
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            match self.goal {
                Goal::Iterations(_) => bar.set_position(done),
                Goal::Duration(_) => bar.set_position(elapsed.as_millis() as u64),
            }
        }
    }

    /// Removes the bar (before the result line is printed).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
