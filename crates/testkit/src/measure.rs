//! What a benchmark reports: percentiles of latencies, and the CPU time of processes from
//! Linux's `/proc` (a server, PostgreSQL) in another process (`None` where `/proc` does not say:
//! another OS, a process gone).

use std::time::Duration;

/// The `p` quantile (0..=1) of sorted durations, by the nearest-rank rule; zero when empty.
///
/// ```
/// use std::time::Duration;
/// let ms = |n| Duration::from_millis(n);
/// let sorted = [ms(1), ms(2), ms(3), ms(4)];
/// assert_eq!(memloop_testkit::percentile(&sorted, 0.5), ms(2));
/// assert_eq!(memloop_testkit::percentile(&sorted, 0.99), ms(4));
/// ```
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The user + system CPU time process `pid` has used so far.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces and parentheses) start after
    // the last `)`: state is field 3, utime 14 and stime 15.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux architecture memloop builds for.
    Some(Duration::from_millis(ticks * 10))
}

/// The CPU time used so far by every process named `name` (e.g. `postgres`: its backends, WAL
/// writer and checkpointer together), summed.
pub fn processes_cpu(name: &str) -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .filter_map(process_cpu)
        .sum()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_used_cpu_and_a_busy_loop_adds_to_it() {
        let before = process_cpu(std::process::id()).unwrap();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = process_cpu(std::process::id()).unwrap();
        assert!(after > before, "{before:?} -> {after:?}");
        assert!(process_cpu(u32::MAX).is_none());
    }
}
