//! Tests that need something from outside the repository (a data set, a model, a tool): where it
//! is, and what a test does when it is missing (skip outside CI, fail under CI).

/// Whether the tests run under CI: `CI` set to a non-empty value other than `0` or `false` (any
/// case). `CI=1`, `CI=true` and `CI=yes` mean CI; an unset, empty, `0` or `false` `CI` does not.
///
/// Under CI a test whose external dependency (a data set, a model, a tool) is missing must fail,
/// never skip: see [`skip_unless_ci`].
pub fn under_ci() -> bool {
    ci_value_means_ci(std::env::var("CI").ok().as_deref())
}

/// The rule of [`under_ci`] for one value of `CI` (`None` when unset).
fn ci_value_means_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim();
        !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false")
    })
}

/// What a test does when an external dependency it needs is missing: outside CI it notes
/// `SKIP: {what}` on stderr so the caller can return early; under CI (see [`under_ci`]) it fails
/// the test, since CI must really run it.
///
/// ```no_run
/// # use memloop_testkit::skip_unless_ci;
/// let data = std::path::Path::new("../shared/data/some-set");
/// if !data.is_dir() {
///     skip_unless_ci(format!("{} is absent", data.display()));
///     return;
/// }
/// ```
///
/// # Panics
///
/// Under CI, always, with `what` in the message.
#[track_caller]
#[allow(clippy::print_stderr)]
pub fn skip_unless_ci(what: impl std::fmt::Display) {
    assert!(
        !under_ci(),
        "CI: {what} (under CI a missing dependency fails the test)"
    );
    eprintln!("SKIP: {what}");
}

/// The external data sets the tests and benchmarks read (LoCoMo, CMRC 2018, XQuAD, real memory
/// dirs, CLAUDE.md files): `$MEMLOOP_TEST_DATA` when set (for checkouts that do not sit next to
/// `shared/`, such as git worktrees), else `shared/data` beside the workspace. Canonical when it
/// exists, so paths compare equal to what loaders resolve.
pub fn shared_data() -> std::path::PathBuf {
    let dir = match std::env::var_os("MEMLOOP_TEST_DATA") {
        Some(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    dir.canonicalize().unwrap_or(dir)
}

#[cfg(test)]
mod ci_tests {
    use super::ci_value_means_ci;

    #[test]
    fn ci_is_any_value_but_empty_zero_or_false() {
        for yes in ["1", "true", "TRUE", "yes", "github"] {
            assert!(ci_value_means_ci(Some(yes)), "{yes}");
        }
        for no in [
            None,
            Some(""),
            Some(" "),
            Some("0"),
            Some("false"),
            Some("False"),
        ] {
            assert!(!ci_value_means_ci(no), "{no:?}");
        }
    }
}
