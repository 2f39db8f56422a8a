//! Engines' own flags. Each engine declares its flags in its module, one
//! [`Flag`] per flag carrying its name, help, default and parsing (with its
//! test beside it, as ripgrep defines its flags), and lists them in its
//! [`super::EngineEntry`]. The CLI builds `--NAME` from the registry, the
//! registry refuses a flag given with an engine it does not belong to, and
//! the engine reads its values typed ([`Flag::get`]): adding an engine adds
//! its flags without touching another engine or the CLI.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::ExecError;

/// One flag of one engine, taking a value: everything about it in one place.
pub struct Flag<T> {
    /// The long name, without `--`; unique across engines (the registry
    /// refuses a flag by naming the one engine it belongs to).
    pub name: &'static str,
    /// The value's placeholder in `--help` and messages (`NAME`).
    pub value_name: &'static str,
    /// One line for `--help`; the CLI adds which engine takes it.
    pub help: &'static str,
    /// The value when the flag is not given, shown in `--help`.
    pub default: Option<&'static str>,
    /// The value from its text, or what is wrong with it (the caller names
    /// the flag).
    pub parse: fn(&str) -> Result<T, String>,
}

impl<T> Flag<T> {
    /// The value given in `options`, else the default; `None` when there
    /// is neither. A value that does not parse is refused naming the flag.
    pub fn get(&self, options: &EngineOptions) -> Result<Option<T>, ExecError> {
        let Some(text) = options.get(self.name).or(self.default) else {
            return Ok(None);
        };
        (self.parse)(text)
            .map(Some)
            .map_err(|e| ExecError::Config(format!("--{} {text}: {e}", self.name)))
    }

    /// As [`Flag::get`], and a missing value is refused as `engine`
    /// needing the flag (`--engine E needs --NAME VALUE`).
    pub fn require(&self, engine: &str, options: &EngineOptions) -> Result<T, ExecError> {
        self.get(options)?.ok_or_else(|| {
            ExecError::Config(format!(
                "--engine {engine} needs --{} {}",
                self.name, self.value_name
            ))
        })
    }
}

/// A [`Flag`] whatever its value's type: what the registry lists and the
/// CLI reads.
pub trait AnyFlag: Sync {
    /// [`Flag::name`].
    fn name(&self) -> &'static str;
    /// [`Flag::value_name`].
    fn value_name(&self) -> &'static str;
    /// [`Flag::help`].
    fn help(&self) -> &'static str;
    /// [`Flag::default`].
    fn default(&self) -> Option<&'static str>;
    /// Whether `text` parses, or what is wrong with it: the CLI refuses a
    /// bad value while it reads the command line, as it does its own flags.
    fn check(&self, text: &str) -> Result<(), String>;
}

impl<T> AnyFlag for Flag<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn value_name(&self) -> &'static str {
        self.value_name
    }
    fn help(&self) -> &'static str {
        self.help
    }
    fn default(&self) -> Option<&'static str> {
        self.default
    }
    fn check(&self, text: &str) -> Result<(), String> {
        (self.parse)(text).map(drop)
    }
}

/// The engine flags given, by name without `--`, as text: what the command
/// line said, or what a caller sets. Flags not given are absent (their
/// defaults are the engine's, [`Flag::get`]), so the registry can tell a
/// flag given to the wrong engine from one left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineOptions(BTreeMap<String, String>);

impl EngineOptions {
    /// No flags given.
    pub fn new() -> Self {
        Self::default()
    }

    /// These options with `--name value` given.
    pub fn with(mut self, name: &str, value: &str) -> Self {
        self.set(name, value);
        self
    }

    /// Give `--name value` (replacing an earlier value).
    pub fn set(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_string(), value.to_string());
    }

    /// The text given for `--name`, if it was.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Every flag given, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Text as it is: for flags whose value any text is (a name).
pub fn text(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(s.to_string())
}

/// `60s`, `200ms`, `5m`, `1h`, or plain seconds: the grammar of every
/// duration flag of `gpuplan` (the CLI's own parse this way too).
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (e.g. 60s, 200ms, 5m)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}' must be a duration >= 0"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Flag<Duration> = Flag {
        name: "t-wait",
        value_name: "DURATION",
        help: "h",
        default: Some("2s"),
        parse: duration,
    };
    const N: Flag<String> = Flag {
        name: "t-name",
        value_name: "NAME",
        help: "h",
        default: None,
        parse: text,
    };

    #[test]
    fn a_flag_reads_its_value_or_default_and_names_itself_when_refused() {
        let none = EngineOptions::new();
        assert_eq!(T.get(&none).unwrap(), Some(Duration::from_secs(2)));
        let o = EngineOptions::new().with("t-wait", "200ms").with("t-name", "a");
        assert_eq!(T.get(&o).unwrap(), Some(Duration::from_millis(200)));
        assert_eq!(N.require("e", &o).unwrap(), "a");
        assert_eq!(N.get(&none).unwrap(), None);
        let e = N.require("e", &none).unwrap_err().to_string();
        assert_eq!(e, "--engine e needs --t-name NAME");
        let e = T
            .get(&EngineOptions::new().with("t-wait", "soon"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--t-wait soon: 'soon' is not a duration (e.g. 60s, 200ms, 5m)");
        assert!(T.check("-1s").is_err() && T.check("1h").is_ok() && N.check("").is_err());
    }

    #[test]
    fn durations_read_as_the_cli_reads_them() {
        assert_eq!(duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(duration("inf").is_err() && duration("").is_err());
    }
}
