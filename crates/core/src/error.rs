//! One error type for the crate. Parse errors carry `source:line:field` so a
//! user can find the bad cell without reading code.

use std::fmt;

/// One bad cell in an input file: `workload-6.csv:12:duration: must be > 0, got -3`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// The file (or other input) the cell is in, as named by the caller.
    pub source: String,
    /// 1-based line number in the file (the header is line 1); 0 if not applicable.
    pub line: u64,
    /// Column or key of the bad cell.
    pub field: String,
    /// What is wrong, with the value found.
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.source, self.line, self.field, self.reason)
    }
}

impl ParseError {
    /// An error at `source:line:field`.
    pub fn new(source: &str, line: u64, field: &str, reason: impl Into<String>) -> Self {
        ParseError {
            source: source.to_string(),
            line,
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// Everything core's parsers and checks refuse.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Every bad row found, not just the first.
    #[error("{}", join_errors(.0))]
    Parse(Vec<ParseError>),
    /// A cluster shape that does not parse: the shape and why.
    #[error("invalid cluster '{0}': {1}")]
    Cluster(String, String),
    /// Any other invalid input, already worded for the user.
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
