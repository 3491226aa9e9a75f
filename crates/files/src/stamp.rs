//! What identifies one version of a file without reading it: its size, modification and change
//! times and inode. Two reads with equal stamps saw the same bytes unless a writer kept all four
//! (a rewrite in place within the clock's resolution, which callers guard against where it
//! matters: the file feed re-hashes files whose stamp is that young).

use std::time::SystemTime;

/// One version of a file: size, mtime, ctime and inode (ctime and inode are 0 off Unix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) len: u64,
    pub(crate) mtime: Option<SystemTime>,
    pub(crate) ctime: (i64, i64),
    pub(crate) ino: u64,
}

/// The stamp of the file `meta` describes.
pub(crate) fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let (ctime, ino) = {
        use std::os::unix::fs::MetadataExt;
        ((meta.ctime(), meta.ctime_nsec()), meta.ino())
    };
    #[cfg(not(unix))]
    let (ctime, ino) = ((0, 0), 0);
    Stamp {
        len: meta.len(),
        mtime: meta.modified().ok(),
        ctime,
        ino,
    }
}
