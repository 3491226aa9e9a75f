//! The compaction threshold arithmetic (effective window, auto-compact, warning and blocking
//! levels, percentage override) and the compaction env switches.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop_compact::{CompactConfig, ContextLevel, Thresholds};
use memloop_host::env::EnvVars;

#[test]
fn threshold_table() {
    // (window, max output, pct) -> (effective, auto, warning, blocking)
    type Row = (u64, u64, Option<f64>, (u64, u64, u64, u64));
    let table: &[Row] = &[
        (200_000, 32_000, None, (180_000, 167_000, 147_000, 177_000)),
        (200_000, 20_000, None, (180_000, 167_000, 147_000, 177_000)),
        (200_000, 8_192, None, (191_808, 178_808, 158_808, 188_808)),
        (
            1_000_000,
            64_000,
            None,
            (980_000, 967_000, 947_000, 977_000),
        ),
        (
            200_000,
            32_000,
            Some(50.0),
            (180_000, 90_000, 70_000, 177_000),
        ),
        // A percentage above the default only lowers: 99% of 180K = 178,200 > 167,000.
        (
            200_000,
            32_000,
            Some(99.0),
            (180_000, 167_000, 147_000, 177_000),
        ),
        // Small windows keep usable floors: the output reserve is at most a quarter of the
        // window, auto-compact at least half and blocking at least three quarters of the
        // effective window; warning at least three quarters of auto-compact.
        (10_000, 32_000, None, (7_500, 3_750, 2_811, 5_625)),
        (8_192, 8_192, None, (6_144, 3_072, 2_304, 4_608)),
        (20_000, 2_000, None, (18_000, 9_000, 6_750, 15_000)),
        (30_000, 4_000, None, (26_000, 13_000, 9_750, 23_000)),
    ];
    for &(window, out, pct, (effective, auto, warning, blocking)) in table {
        let mut c = CompactConfig::for_model(window, out);
        c.autocompact_pct = pct;
        assert_eq!(
            c.thresholds(),
            Thresholds {
                effective_window: effective,
                auto_compact: auto,
                warning,
                blocking
            },
            "window {window}, output {out}, pct {pct:?}"
        );
    }
}

#[test]
fn levels() {
    let t = CompactConfig::default().thresholds();
    assert_eq!(t.auto_compact, 167_000);
    assert_eq!(t.level(146_999), ContextLevel::Ok);
    assert_eq!(t.level(147_000), ContextLevel::Warning);
    assert_eq!(t.level(167_000), ContextLevel::Compact);
    assert_eq!(t.level(177_000), ContextLevel::Blocking);
}

#[test]
fn env_switches_come_from_an_injected_source() {
    let env = |pairs: &[(&str, &str)]| EnvVars::from_pairs(pairs.iter().copied());
    let c = CompactConfig::default().with_env(&env(&[]));
    assert!(!c.disabled && !c.auto_disabled && c.autocompact_pct.is_none());
    let c = CompactConfig::default().with_env(&env(&[("MEMLOOP_DISABLE_COMPACT", "TRUE")]));
    assert!(c.disabled);
    let c = CompactConfig::default().with_env(&env(&[("MEMLOOP_DISABLE_AUTO_COMPACT", "on")]));
    assert!(c.auto_disabled && !c.disabled);
    let c = CompactConfig::default().with_env(&env(&[("MEMLOOP_DISABLE_COMPACT", "0")]));
    assert!(!c.disabled);
    let c = CompactConfig::default().with_env(&env(&[("MEMLOOP_AUTOCOMPACT_PCT", "60")]));
    assert_eq!(c.thresholds().auto_compact, 108_000);
    for bad in ["abc", "0", "-5", "150", ""] {
        let c = CompactConfig::default().with_env(&env(&[("MEMLOOP_AUTOCOMPACT_PCT", bad)]));
        assert_eq!(c.autocompact_pct, None, "{bad}");
    }
}
