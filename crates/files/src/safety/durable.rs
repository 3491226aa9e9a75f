//! One flush for many writes: the files a batch wrote without fsync made durable together, by
//! one `syncfs(2)` per filesystem on Linux, else an fsync of each file and of each directory
//! holding one.

use memloop_store::MemoryError;
use std::path::{Path, PathBuf};

/// Make every file of `paths` (written and renamed into place, not fsync'd) and its directory
/// entry durable through a power cut, before this returns Ok. On Linux one `syncfs(2)` on each
/// filesystem holding one of them (a batch of 20 files costs one flush of the filesystem's
/// journal instead of 40 fsyncs; it also flushes whatever else is dirty on that filesystem);
/// elsewhere, or where `syncfs` is refused, each file and each of their directories is
/// fsync'd in turn. A path that is gone (removed since by another writer) is skipped.
pub(crate) fn make_durable(paths: &[PathBuf]) -> Result<(), MemoryError> {
    let mut dirs: Vec<&Path> = paths.iter().filter_map(|p| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    #[cfg(target_os = "linux")]
    if sync_filesystems(&dirs).is_ok() {
        return Ok(());
    }
    for path in paths {
        // Windows flushes only a handle opened for writing (nothing is written through it).
        let open = std::fs::OpenOptions::new()
            .read(true)
            .write(cfg!(windows))
            .open(path);
        match open.and_then(|f| f.sync_all()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MemoryError::io(format!("syncing {}", path.display()), e)),
        }
    }
    for dir in dirs {
        super::atomic::sync_dir(dir);
    }
    Ok(())
}

/// One `syncfs(2)` for each filesystem (device) holding one of `dirs`.
#[cfg(target_os = "linux")]
fn sync_filesystems(dirs: &[&Path]) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut synced: Vec<u64> = Vec::new();
    for dir in dirs {
        let d = match std::fs::File::open(dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let dev = d.metadata()?.dev();
        if synced.contains(&dev) {
            continue;
        }
        rustix::fs::syncfs(&d).map_err(std::io::Error::from)?;
        synced.push(dev);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn files_in_several_dirs_and_a_gone_one_are_made_durable() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.md"), d.path().join("sub/b.md"));
        std::fs::create_dir_all(d.path().join("sub")).unwrap();
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        make_durable(&[a, b, d.path().join("gone/c.md")]).unwrap();
    }
}
