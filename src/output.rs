//! The views' output files: written under a temporary name in the same
//! directory and renamed to theirs only when complete, so that an error
//! (or a refusal) never leaves a truncated file behind, nor replaces a
//! good one.

use anyhow::Context;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A file being written: see the module documentation.
pub(crate) struct OutputFile {
    path: PathBuf,
    temp: PathBuf,
    out: Option<BufWriter<File>>,
}

impl OutputFile {
    /// Starts writing `path` (under a temporary name next to it).
    pub(crate) fn create(path: &Path) -> anyhow::Result<OutputFile> {
        let name = path
            .file_name()
            .with_context(|| format!("{} is not a file name", path.display()))?;
        let temp = path.with_file_name(format!(".{}.jtrace-{}.tmp", name.to_string_lossy(), std::process::id()));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            temp,
            out: Some(BufWriter::with_capacity(1 << 20, f)),
        })
    }

    /// Flushes the file and gives it its name.
    pub(crate) fn commit(mut self) -> anyhow::Result<()> {
        let out = self.out.take().expect("present until commit");
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        std::fs::rename(&self.temp, &self.path).with_context(|| format!("cannot write {}", self.path.display()))
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.as_mut().expect("present until commit").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.as_mut().expect("present until commit").flush()
    }
}

impl Drop for OutputFile {
    /// Not committed: the partial file goes.
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
