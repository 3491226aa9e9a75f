//! Bare mode: `MEMLOOP_SIMPLE` (and, in Claude Code's layout, Claude Code's own
//! `CLAUDE_CODE_SIMPLE` and `CLAUDE_CODE_DISABLE_AUTO_MEMORY`) turns memory off, decided in one
//! place for the setup and every memory hook.
#![allow(clippy::unwrap_used)]

use memloop::MemorySetup;
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;

fn setup(claude: bool, vars: &[(&str, &str)]) -> bool {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut pairs: Vec<(String, String)> =
        vec![("HOME".into(), home.path().to_string_lossy().into_owned())];
    pairs.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let env = EnvVars::from_pairs(pairs);
    let resolver = if claude {
        MemoryDirResolver::claude_code(project.path())
    } else {
        MemoryDirResolver::new(project.path())
    };
    MemorySetup::with_resolver(resolver, env).unwrap().enabled()
}

#[test]
fn bare_mode_turns_memory_off() {
    assert!(setup(false, &[]));
    assert!(setup(true, &[]));
    assert!(!setup(false, &[("MEMLOOP_SIMPLE", "1")]));
    assert!(!setup(true, &[("MEMLOOP_SIMPLE", "true")]));
    assert!(!setup(true, &[("CLAUDE_CODE_SIMPLE", "1")]));
    assert!(!setup(true, &[("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")]));
    // Claude Code's variables belong to Claude Code's layout only.
    assert!(setup(false, &[("CLAUDE_CODE_SIMPLE", "1")]));
    assert!(setup(false, &[("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")]));
    assert!(setup(true, &[("CLAUDE_CODE_SIMPLE", "0")]));
}

#[test]
fn every_memory_hook_honours_bare_mode() {
    let bare = EnvVars::from_pairs([("MEMLOOP_SIMPLE", "1")]);
    assert!(!memloop::memory::recall::RecallConfig::from_env(&bare).enabled);
    assert!(!memloop::memory::env::memory_enabled(&bare));
}
