//! Row readers shared by the format modules: one place that turns cells into
//! typed values or `file:line:field` errors, so every format checks alike.

use gpuplan_core::{CoreError, ParseError};

use super::{Rows, TraceJob};

/// Upper bound on GPUs per job: no public trace asks for more.
pub const MAX_GPUS: u32 = 4096;

/// One row being validated: cells by field name, errors collected.
pub struct Row<'a> {
    pub source: &'a str,
    pub line: u64,
    cells: Vec<(&'a str, &'a str)>,
    pub errors: Vec<ParseError>,
}

impl<'a> Row<'a> {
    pub fn new(source: &'a str, line: u64, cells: Vec<(&'a str, &'a str)>) -> Self {
        Row {
            source,
            line,
            cells,
            errors: Vec::new(),
        }
    }

    pub fn get(&self, field: &str) -> &'a str {
        self.cells
            .iter()
            .find(|(f, _)| *f == field)
            .map_or("", |(_, v)| v.trim())
    }

    pub fn has(&self, field: &str) -> bool {
        self.cells.iter().any(|(f, _)| *f == field)
    }

    pub fn err(&mut self, field: &str, reason: impl Into<String>) {
        self.errors
            .push(ParseError::new(self.source, self.line, field, reason));
    }

    /// A non-empty string.
    pub fn text(&mut self, field: &str) -> Option<String> {
        let v = self.get(field);
        if v.is_empty() {
            self.err(field, "empty");
            None
        } else {
            Some(v.to_string())
        }
    }

    /// An optional string: empty means absent.
    pub fn opt_text(&self, field: &str) -> Option<String> {
        let v = self.get(field);
        (!v.is_empty()).then(|| v.to_string())
    }

    /// A finite number that is >= 0 (or > 0 when `positive`).
    pub fn number(&mut self, field: &str, positive: bool) -> Option<f64> {
        let raw = self.get(field);
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() && (v > 0.0 || (!positive && v == 0.0)) => Some(v),
            Ok(v) => {
                let want = if positive { "> 0" } else { ">= 0" };
                self.err(field, format!("must be a finite number {want}, got {v}"));
                None
            }
            Err(_) => {
                self.err(field, format!("not a number: '{raw}'"));
                None
            }
        }
    }

    /// Optional number: empty means absent.
    pub fn opt_number(&mut self, field: &str, positive: bool) -> Option<Option<f64>> {
        if self.get(field).is_empty() {
            Some(None)
        } else {
            self.number(field, positive).map(Some)
        }
    }

    /// An integer in 0..=max (or 1..=max when `positive`).
    pub fn int(&mut self, field: &str, positive: bool, max: u64) -> Option<u64> {
        let raw = self.get(field);
        match raw.parse::<u64>() {
            Ok(v) if v <= max && (v > 0 || !positive) => Some(v),
            _ => {
                let lo = if positive { 1 } else { 0 };
                self.err(field, format!("must be an integer in {lo}..={max}, got '{raw}'"));
                None
            }
        }
    }

    /// A GPU count: integer in 1..=MAX_GPUS.
    pub fn gpus(&mut self, field: &str) -> Option<u32> {
        self.int(field, true, MAX_GPUS as u64).map(|v| v as u32)
    }
}

/// Keep a row's job, or count the row as bad.
pub fn push(rows: &mut Rows, mut row: Row, job: Option<TraceJob>) {
    if let Some(j) = &job {
        if let Some(first) = rows.names.get(&j.name) {
            row.err(
                "name",
                format!("duplicate job name '{}', first on line {first}", j.name),
            );
        } else if row.errors.is_empty() {
            rows.names.insert(j.name.clone(), row.line);
        }
    }
    if row.errors.is_empty() {
        if let Some(j) = job {
            rows.jobs.push(j);
            return;
        }
    }
    rows.bad_rows += 1;
    rows.errors.append(&mut row.errors);
}

/// A headed CSV: column names and the records with their line numbers.
pub struct Csv {
    pub headers: Vec<String>,
    pub records: Vec<(u64, Vec<String>)>,
}

/// Read a headed CSV, checking that `required` columns exist. Records that
/// the CSV reader rejects (wrong field count, bad UTF-8) become row errors.
pub fn read_csv(source: &str, bytes: &[u8], required: &[&str], rows: &mut Rows) -> Result<Csv, CoreError> {
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(bytes);
    let headers: Vec<String> = rdr
        .headers()
        .map_err(|e| ParseError::new(source, 1, "header", e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let missing: Vec<ParseError> = required
        .iter()
        .filter(|c| !headers.iter().any(|h| h == *c))
        .map(|c| ParseError::new(source, 1, c, "missing column"))
        .collect();
    if !missing.is_empty() {
        return Err(CoreError::Parse(missing));
    }
    let mut records = Vec::new();
    let mut rec = csv::StringRecord::new();
    loop {
        let line = rdr.position().line();
        match rdr.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {
                let line = rec.position().map_or(line, |p| p.line());
                records.push((line, rec.iter().map(str::to_string).collect()));
            }
            Err(e) => {
                let line = e.position().map_or(line, |p| p.line());
                rows.bad_rows += 1;
                rows.errors
                    .push(ParseError::new(source, line, "row", e.to_string()));
                if !matches!(
                    e.kind(),
                    csv::ErrorKind::UnequalLengths { .. } | csv::ErrorKind::Utf8 { .. }
                ) {
                    // An I/O-level error: the reader cannot go on.
                    break;
                }
            }
        }
    }
    Ok(Csv { headers, records })
}

impl Csv {
    /// The row at `i` as named cells.
    pub fn row<'a>(&'a self, source: &'a str, i: usize) -> Row<'a> {
        let (line, cells) = &self.records[i];
        Row::new(
            source,
            *line,
            self.headers
                .iter()
                .map(String::as_str)
                .zip(cells.iter().map(String::as_str))
                .collect(),
        )
    }
}

/// TAB-separated lines with a fixed field list (Gavel, Shockwave). Empty
/// lines are not rows; a line with another field count is a row error.
pub fn read_tsv<'a>(
    source: &'a str,
    text: &'a str,
    layouts: &[&'a [&'a str]],
    rows: &mut Rows,
) -> Vec<Row<'a>> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line_no = i as u64 + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split('\t').collect();
        match layouts.iter().find(|l| l.len() == cells.len()) {
            Some(layout) => out.push(Row::new(
                source,
                line_no,
                layout.iter().copied().zip(cells).collect(),
            )),
            None => {
                rows.bad_rows += 1;
                let counts: Vec<String> = layouts.iter().map(|l| l.len().to_string()).collect();
                rows.errors.push(ParseError::new(
                    source,
                    line_no,
                    "row",
                    format!(
                        "expected {} TAB-separated fields, got {}",
                        counts.join(" or "),
                        cells.len()
                    ),
                ));
            }
        }
    }
    out
}

/// Text of a whole file; invalid UTF-8 is an error naming the line.
pub fn utf8<'a>(source: &str, bytes: &'a [u8]) -> Result<&'a str, CoreError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        CoreError::Parse(vec![ParseError::new(source, line, "row", "not valid UTF-8")])
    })
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) to seconds since 1970; `None` if malformed.
pub fn parse_datetime_s(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once(' ')?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let mut t = time.split(':');
    let hh: i64 = t.next()?.parse().ok()?;
    let mm: i64 = t.next()?.parse().ok()?;
    let ss: i64 = t.next()?.parse().ok()?;
    if d.next().is_some() || t.next().is_some() {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || day < 1
        || day > days_in[(m - 1) as usize]
        || !(0..24).contains(&hh)
        || !(0..60).contains(&mm)
        || !(0..=60).contains(&ss)
    {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86400 + hh * 3600 + mm * 60 + ss) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes() {
        assert_eq!(parse_datetime_s("1970-01-01 00:00:00"), Some(0.0));
        assert_eq!(parse_datetime_s("2017-10-09 07:01:55"), Some(1_507_532_515.0));
        assert_eq!(parse_datetime_s("2016-02-29 00:00:00"), Some(1_456_704_000.0));
        assert_eq!(parse_datetime_s("2017-02-29 00:00:00"), None);
        assert_eq!(parse_datetime_s("2017-10-09"), None);
        assert_eq!(parse_datetime_s("2017-13-09 00:00:00"), None);
    }
}
