//! Command-line arguments: `--name value` and `--flag`, with every number
//! checked against its allowed range (a bad one is a usage error that
//! states the range, never a panic), and the two kinds of failure a
//! command can end with.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a command failed: a usage error (exit status 2, with a pointer to
/// `epochdb help`) or a failure while running (exit status 1).
#[derive(Debug)]
pub enum CliError {
    Usage(String),
    Failed(String),
}

pub type CliResult<T> = Result<T, CliError>;

/// Argument errors are usage errors.
impl From<String> for CliError {
    fn from(m: String) -> CliError {
        CliError::Usage(m)
    }
}

impl From<&str> for CliError {
    fn from(m: &str) -> CliError {
        CliError::Usage(m.into())
    }
}

/// A failure while running (an engine error, a failed write).
pub fn failed(e: impl Display) -> CliError {
    CliError::Failed(e.to_string())
}

/// `--name value` and `--flag` arguments.
pub struct Args {
    /// Every value given for each option, in order.
    values: HashMap<String, Vec<String>>,
    flags: Vec<String>,
}

impl Args {
    pub fn parse(args: &[String], flag_names: &[&str]) -> Result<Args, String> {
        let (mut values, mut flags) = (HashMap::new(), Vec::new());
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if !a.starts_with("--") {
                return Err(format!("unexpected argument {a:?}"));
            }
            if flag_names.contains(&a.as_str()) {
                flags.push(a.clone());
            } else {
                let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
                values.entry(a.clone()).or_insert_with(Vec::new).push(v.clone());
            }
        }
        Ok(Args { values, flags })
    }

    /// An integer in `min..=max`, or `default`.
    pub fn take_int<T>(&mut self, name: &str, default: T, min: T, max: T) -> Result<T, String>
    where
        T: std::str::FromStr + PartialOrd + Display + Copy,
    {
        let Some(v) = self.take_str(name) else { return Ok(default) };
        match v.parse::<T>() {
            Ok(n) if n >= min && n <= max => Ok(n),
            _ => Err(format!("{name} must be a whole number between {min} and {max} (got {v:?})")),
        }
    }

    /// A number in `min..=max` (finite), or `default`.
    pub fn take_num(&mut self, name: &str, default: f64, min: f64, max: f64) -> Result<f64, String> {
        let Some(v) = self.take_str(name) else { return Ok(default) };
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= min && n <= max => Ok(n),
            _ => Err(format!("{name} must be a number between {min} and {max} (got {v:?})")),
        }
    }

    /// Seconds in `min..=max`, or `default`, as a duration.
    pub fn take_secs(&mut self, name: &str, default: f64, min: f64, max: f64) -> Result<Duration, String> {
        let s = self.take_num(name, default, min, max)?;
        Ok(Duration::from_secs_f64(s))
    }

    /// The last value given for `name`.
    pub fn take_str(&mut self, name: &str) -> Option<String> {
        self.values.remove(name).and_then(|mut v| v.pop())
    }

    /// Whether `name` was given a value (without taking it).
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Every value given for `name`, as paths.
    pub fn take_paths(&mut self, name: &str) -> Vec<PathBuf> {
        self.values.remove(name).unwrap_or_default().into_iter().map(PathBuf::from).collect()
    }

    /// An output file: its directory must exist now, so that a run does
    /// not end by failing to write its results.
    pub fn take_output(&mut self, name: &str) -> Result<Option<String>, String> {
        let Some(path) = self.take_str(name) else { return Ok(None) };
        let parent = Path::new(&path).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if path.ends_with('/') || !parent.is_dir() {
            return Err(format!("{name} {path}: {} is not a directory", parent.display()));
        }
        Ok(Some(path))
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// Fails on options nobody consumed (typos must not pass silently).
    pub fn finish(self) -> Result<(), String> {
        match self.values.keys().next() {
            Some(k) => Err(format!("unknown option {k}")),
            None => Ok(()),
        }
    }
}
