//! The canonical text of a memory and its SHA-256: what both stores compare, so an entry that
//! did not change has the same hash on every machine.

use memloop_store::canonical_memory_text;

/// The file stem of a relative path (`team/deploy.md` → `deploy`): the name of a memory that
/// has none.
pub(crate) fn stem(rel: &str) -> &str {
    rel.rsplit('/')
        .next()
        .unwrap_or(rel)
        .trim_end_matches(".md")
}

/// The canonical text of a memory file: parsed and rendered again with its unknown frontmatter
/// keys ([`canonical_memory_text`]), so formatting differences (quoting, key order, line ends,
/// comments) do not count as changes while a changed `tags:` or `metadata:` value does. Text
/// that is not a memory file is kept as is.
pub fn canonical_text(raw: &str, rel_path: &str) -> String {
    canonical_memory_text(raw, stem(rel_path)).unwrap_or_else(|_| raw.to_owned())
}

/// Lowercase hex SHA-256 of `text`.
///
/// ```
/// assert_eq!(
///     memloop_pg::sha256_hex(""),
///     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/// );
/// ```
pub fn sha256_hex(text: &str) -> String {
    memloop_store::content_version(text)
}
