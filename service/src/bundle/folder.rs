//! Reading files from a folder someone handed over (a bundle, a Langfuse export):
//! only regular files, only inside the folder (a symbolic link may point within it,
//! never out of it), each size checked on the open file and again while it is read,
//! and opened so that a named pipe or a device never blocks or feeds the read.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

/// One folder and the largest file read from it.
pub struct Folder {
    root: PathBuf,
    max_bytes: u64,
}

impl Folder {
    /// The folder `dir`, whose files are read up to `max_bytes` each.
    pub fn new(dir: &Path, max_bytes: u64) -> anyhow::Result<Self> {
        let root = dir
            .canonicalize()
            .with_context(|| format!("cannot read {}", dir.display()))?;
        Ok(Folder { root, max_bytes })
    }

    /// Where `path` really is, when that is inside the folder.
    pub fn inside(&self, path: &Path) -> anyhow::Result<PathBuf> {
        let real = path
            .canonicalize()
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !real.starts_with(&self.root) {
            bail!(
                "{} leads out of the folder (to {}): only the folder's own files are read",
                path.display(),
                real.display()
            );
        }
        Ok(real)
    }

    /// The text of the regular file at `path`.
    pub fn get(&self, path: &Path) -> anyhow::Result<String> {
        let real = self.inside(path)?;
        let max = self.max_bytes;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        let file = options
            .open(&real)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !meta.is_file() {
            bail!(
                "{} is not a regular file (a pipe, a device or a socket is never read)",
                path.display()
            );
        }
        if meta.len() > max {
            bail!(
                "{} is {} bytes; the largest file read is {max}",
                path.display(),
                meta.len()
            );
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, max + 1), &mut text)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if text.len() as u64 > max {
            bail!("{} grew past {max} bytes while it was read", path.display());
        }
        Ok(text)
    }

    /// The text of the file at `path`, `None` when there is none.
    pub fn get_optional(&self, path: &Path) -> anyhow::Result<Option<String>> {
        match path.symlink_metadata() {
            Ok(_) => self.get(path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// The TOML file at `path`, parsed.
    pub fn toml_file<T: for<'de> Deserialize<'de>>(&self, path: &Path) -> anyhow::Result<T> {
        toml::from_str(&self.get(path)?).with_context(|| format!("{} is not valid", path.display()))
    }
}

/// The visible entries of a folder (absent: none), sorted; hidden ones (`.gitkeep`)
/// are left out.
pub fn entries(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            out.push((name, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}
