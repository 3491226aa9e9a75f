//! Private file helpers for the notes: 0700 dirs, 0600 files, atomic writes.

use std::io;
use std::path::{Path, PathBuf};

/// Create `dir` (and parents) with mode 0700 on unix.
pub(crate) async fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = tokio::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir).await?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).await?;
    }
    Ok(())
}

/// Write `content` to a fresh 0600 temp file next to `path`.
async fn write_temp(path: &Path, content: &str) -> io::Result<PathBuf> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "notes path has no parent"))?;
    let tmp = dir.join(format!(".summary.{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut opts = tokio::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let written = async {
        use tokio::io::AsyncWriteExt;
        let mut f = opts.open(&tmp).await?;
        f.write_all(content.as_bytes()).await?;
        f.sync_all().await
    }
    .await;
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = tokio::fs::remove_file(&tmp).await;
            Err(e)
        }
    }
}

/// Replace `path` with `content` atomically (temp file + rename), mode 0600 on unix.
pub(crate) async fn write_private(path: &Path, content: &str) -> io::Result<()> {
    let tmp = write_temp(path, content).await?;
    let renamed = tokio::fs::rename(&tmp, path).await;
    if renamed.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    renamed
}

/// Create `path` with `content` (mode 0600) only if it does not exist, never overwriting and
/// never leaving a torn file. Returns whether it was created.
pub(crate) async fn create_if_absent(path: &Path, content: &str) -> io::Result<bool> {
    if tokio::fs::try_exists(path).await? {
        return Ok(false);
    }
    let tmp = write_temp(path, content).await?;
    let linked = tokio::fs::hard_link(&tmp, path).await;
    let _ = tokio::fs::remove_file(&tmp).await;
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}
