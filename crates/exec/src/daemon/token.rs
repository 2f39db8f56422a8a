//! Tokens: the admin's and each job's, from the kernel's generator.

use crate::ExecError;

/// A random hex token from the kernel's generator.
pub fn random_token() -> Result<String, ExecError> {
    use std::io::Read;
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|source| ExecError::Io {
            context: "read /dev/urandom".into(),
            source,
        })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
