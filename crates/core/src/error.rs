//! One error type for the crate. Parse errors carry `source:line:field` so a
//! user can find the bad cell without reading code.

use std::fmt;

/// One bad cell in an input file: `workload-6.csv:12:duration: must be > 0, got -3`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub source: String,
    /// 1-based line number in the file (the header is line 1); 0 if not applicable.
    pub line: u64,
    pub field: String,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.source, self.line, self.field, self.reason)
    }
}

impl ParseError {
    pub fn new(source: &str, line: u64, field: &str, reason: impl Into<String>) -> Self {
        ParseError {
            source: source.to_string(),
            line,
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Every bad row found, not just the first.
    #[error("{}", join_errors(.0))]
    Parse(Vec<ParseError>),
    #[error("invalid cluster '{0}': {1}")]
    Cluster(String, String),
    #[error("{0}")]
    Invalid(String),
}

fn join_errors(errs: &[ParseError]) -> String {
    let shown: Vec<String> = errs.iter().take(20).map(|e| e.to_string()).collect();
    let mut s = shown.join("\n");
    if errs.len() > 20 {
        s.push_str(&format!("\n... and {} more", errs.len() - 20));
    }
    s
}

impl From<ParseError> for CoreError {
    fn from(e: ParseError) -> Self {
        CoreError::Parse(vec![e])
    }
}
