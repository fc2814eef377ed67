//! Stage timing: a command made of several steps says at the end how long each took, so that a
//! slow CI run shows where its minutes went.

use std::time::{Duration, Instant};

use crate::Result;

/// The stages of one command, each with its wall time, in the order they ran.
pub(crate) struct Stages {
    title: &'static str,
    done: Vec<(String, Duration, bool)>,
}

impl Stages {
    /// An empty record for the command named `title`.
    pub(crate) fn new(title: &'static str) -> Stages {
        Stages {
            title,
            done: Vec::new(),
        }
    }

    /// Runs `step` as the stage `name` and records its wall time, whether it passed or failed.
    pub(crate) fn run<T>(&mut self, name: &str, step: impl FnOnce() -> Result<T>) -> Result<T> {
        println!("==> stage: {name}");
        let start = Instant::now();
        let result = step();
        self.done
            .push((name.to_string(), start.elapsed(), result.is_ok()));
        result
    }

    /// The table of stages: one line each, the total last.
    pub(crate) fn report(&self) -> String {
        let width = self
            .done
            .iter()
            .map(|(name, _, _)| name.len())
            .max()
            .unwrap_or(0)
            .max("total".len());
        let mut out = format!("==> {}: time per stage\n", self.title);
        let mut total = Duration::ZERO;
        for (name, time, passed) in &self.done {
            total += *time;
            let mark = if *passed { "" } else { "  (failed)" };
            out.push_str(&format!("    {name:<width$}  {}{mark}\n", clock(*time)));
        }
        out.push_str(&format!("    {:<width$}  {}\n", "total", clock(total)));
        out
    }
}

impl Drop for Stages {
    /// The table is printed however the command ends, so that a failed run also shows it.
    fn drop(&mut self) {
        if !self.done.is_empty() {
            print!("{}", self.report());
        }
    }
}

/// A duration as minutes and seconds with one decimal, `2m 05.3s` or `41.0s`.
fn clock(time: Duration) -> String {
    let seconds = time.as_secs_f64();
    let minutes = (seconds / 60.0).floor();
    if minutes >= 1.0 {
        format!("{minutes:.0}m {:04.1}s", seconds - minutes * 60.0)
    } else {
        format!("{seconds:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_prints_minutes_only_past_one() {
        assert_eq!(clock(Duration::from_millis(41_040)), "41.0s");
        assert_eq!(clock(Duration::from_millis(125_300)), "2m 05.3s");
    }

    #[test]
    fn report_lists_every_stage_with_failures_marked_and_a_total() {
        let mut stages = Stages::new("test");
        stages.run("one", || Ok(())).unwrap();
        let failed: Result<()> = stages.run("two", || Err("broken".to_string()));
        assert_eq!(failed.unwrap_err(), "broken");
        let report = stages.report();
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines[0], "==> test: time per stage");
        assert!(lines[1].trim_start().starts_with("one"), "{report}");
        assert!(!lines[1].contains("failed"), "{report}");
        assert!(lines[2].trim_start().starts_with("two") && lines[2].ends_with("(failed)"));
        assert!(lines[3].trim_start().starts_with("total"), "{report}");
        // Nothing is printed twice: the record is emptied before the drop would print it.
        stages.done.clear();
    }
}
