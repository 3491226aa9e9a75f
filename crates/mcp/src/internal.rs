//! Reading the server's own small files inside a memory dir without following links: whatever
//! is found there is input (someone with write access to the dir may have planted a link, a
//! pipe or a huge file), never a pointer to follow.

use std::io::Read;
use std::path::Path;

/// The whole of `path` (at most `max` bytes) when it is a regular file, read without following
/// a link: a link, a directory, a pipe or a file over `max` fails with
/// [`std::io::ErrorKind::InvalidData`], a missing one with [`std::io::ErrorKind::NotFound`]. The
/// file opened must be the one checked (same device and inode), so a link swapped in between
/// the check and the open is refused too.
pub(crate) fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let refuse = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned());
    let checked = std::fs::symlink_metadata(path)?;
    if !checked.file_type().is_file() {
        return Err(refuse(
            "not a regular file (memloop follows no link for its own files)",
        ));
    }
    if checked.len() > max {
        return Err(refuse("larger than any record memloop writes"));
    }
    let mut file = std::fs::File::open(path)?;
    if !same_file(&checked, &file.metadata()?) {
        return Err(refuse("replaced while it was opened"));
    }
    let mut bytes = Vec::new();
    file.by_ref().take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(refuse("larger than any record memloop writes"));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino() && b.file_type().is_file()
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    b.file_type().is_file()
}
