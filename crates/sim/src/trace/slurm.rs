//! An operator's own Slurm history as a workload and a cluster
//! (`gpuplan trace import-slurm`, docs/workload-format.md "Slurm"): what
//! `sacct --json` says each job asked for and ran, and what `sinfo --json`
//! (or `scontrol show node --json`) says each node has.
//!
//! Each job that ran on GPUs becomes a rigid row: submitted when Slurm got
//! it, on the GPUs it was given, for as long as it held them (failed and
//! cancelled jobs too: they held GPUs), in the queue named after its
//! account. Jobs that never ran, ran on no GPU, or still run are counted,
//! not imported. Both the 22.05 layout (plain numbers, `state.current` a
//! string) and the later one (numbers as `{set, infinite, number}`,
//! `state.current` a list) are read.

use std::collections::{BTreeMap, BTreeSet};

use gpuplan_core::{Cluster, CoreError, Node, ParseError};
use serde_json::Value;

use super::TraceJob;

/// What an import made of `sacct`'s jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmJobs {
    /// The imported jobs, by submission time, times from the earliest.
    pub jobs: Vec<TraceJob>,
    /// Each imported job's start and end in the trace's seconds (as
    /// `sacct` recorded them), in `jobs` order: what the cluster did.
    pub ran: Vec<(f64, f64)>,
    /// The epoch second the trace's time 0 stands for.
    pub epoch_s: i64,
    /// Jobs left out, by reason (`never ran`, `no GPUs`, `still running`).
    pub skipped: BTreeMap<&'static str, usize>,
}

/// The jobs of `sacct --json` output (`source` names the file in errors).
/// Every bad field is reported, naming the job's line and its JSON path.
pub fn parse_sacct(source: &str, text: &str) -> Result<SlurmJobs, CoreError> {
    let doc = parse_json(source, text)?;
    let Some(list) = doc.get("jobs").and_then(Value::as_array) else {
        return Err(one(
            source,
            0,
            "jobs",
            "no `jobs` list: not `sacct --json` output",
        ));
    };
    let mut errs = Vec::new();
    let mut lines = LineFinder::new(text);
    let mut rows = Vec::new();
    let mut skipped = BTreeMap::new();
    for (i, j) in list.iter().enumerate() {
        let id = j.get("job_id").and_then(number);
        let line = id.map_or(0, |id| lines.find(&format!("\"job_id\": {id}")));
        let mut e = |field: &str, reason: String| {
            errs.push(ParseError::new(
                source,
                line,
                &format!("jobs[{i}].{field}"),
                reason,
            ));
        };
        let Some(id) = id else {
            e(
                "job_id",
                format!("expected a number, got {}", show(j.get("job_id"))),
            );
            continue;
        };
        let time = |k: &str| j.get("time").and_then(|t| t.get(k)).and_then(number);
        let (submit, start, end) = (time("submission"), time("start"), time("end"));
        let states = state_names(j.get("state").and_then(|s| s.get("current")));
        if states
            .iter()
            .any(|s| s == "RUNNING" || s == "PENDING" || s == "SUSPENDED")
        {
            *skipped.entry("still running").or_insert(0) += 1;
            continue;
        }
        let Some(submit) = submit else {
            e(
                "time.submission",
                format!("expected a number, got {}", show(time_field(j, "submission"))),
            );
            continue;
        };
        let (Some(start), Some(end)) = (start, end) else {
            e(
                "time.start",
                "expected numbers for time.start and time.end".into(),
            );
            continue;
        };
        let gpus = match allocated_gpus(j) {
            Ok(g) => g,
            Err(reason) => {
                e("tres.allocated", reason);
                continue;
            }
        };
        if start <= 0 || end <= start {
            *skipped.entry("never ran").or_insert(0) += 1;
            continue;
        }
        if gpus == 0 {
            *skipped.entry("no GPUs").or_insert(0) += 1;
            continue;
        }
        if gpus > super::util::MAX_GPUS as i64 {
            e(
                "tres.allocated",
                format!(
                    "{gpus} GPUs, more than a workload row holds ({})",
                    super::util::MAX_GPUS
                ),
            );
            continue;
        }
        let account = j.get("account").and_then(Value::as_str).filter(|a| !a.is_empty());
        let name = j.get("name").and_then(Value::as_str).unwrap_or("");
        rows.push((
            submit,
            start,
            end,
            id,
            gpus as u32,
            name.to_string(),
            account.map(str::to_string),
        ));
    }
    if !errs.is_empty() {
        return Err(CoreError::Parse(errs));
    }
    rows.sort_by_key(|r| (r.0, r.3));
    let epoch_s = rows.first().map_or(0, |r| r.0);
    let mut out = SlurmJobs {
        epoch_s,
        skipped,
        ..Default::default()
    };
    for (submit, start, end, id, gpus, name, account) in rows {
        out.jobs.push(TraceJob {
            checkpoint_interval_s: None,
            name: format!("slurm-{id}"),
            submit_s: (submit - epoch_s) as f64,
            gpus,
            app: None,
            batch_size: None,
            duration_s: Some((end - start) as f64),
            model: (!name.is_empty()).then_some(name),
            group: account,
        });
        out.ran.push(((start - epoch_s) as f64, (end - epoch_s) as f64));
    }
    Ok(out)
}

/// The nodes with GPUs of `sinfo --json` or `scontrol show node --json`
/// output, each node once, GPUs and type from its `gres` (`gpu:a100:4`,
/// `gpu:4`, `gpu:a100:4(S:0-1),shard:8`; no type: `unknown`).
pub fn parse_nodes(source: &str, text: &str) -> Result<Cluster, CoreError> {
    let doc = parse_json(source, text)?;
    let mut lines = LineFinder::new(text);
    let mut seen = BTreeSet::new();
    let mut nodes = Vec::new();
    let mut errs = Vec::new();
    // (name, gres, JSON path) for each node record, in either layout.
    let mut records: Vec<(String, String, String)> = Vec::new();
    if let Some(list) = doc.get("nodes").and_then(Value::as_array) {
        for (i, n) in list.iter().enumerate() {
            let name = n.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            let gres = match n.get("gres") {
                Some(Value::String(s)) => s.clone(),
                Some(g) => g.get("total").and_then(Value::as_str).unwrap_or("").to_string(),
                None => String::new(),
            };
            records.push((name, gres, format!("nodes[{i}]")));
        }
    } else if let Some(list) = doc.get("sinfo").and_then(Value::as_array) {
        // Slurm 23.02+: one entry per node group, names listed in it.
        for (i, s) in list.iter().enumerate() {
            let gres = s
                .get("gres")
                .and_then(|g| g.get("total"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let names = s
                .get("nodes")
                .and_then(|n| n.get("nodes"))
                .and_then(Value::as_array);
            for name in names.into_iter().flatten().filter_map(Value::as_str) {
                records.push((name.to_string(), gres.clone(), format!("sinfo[{i}]")));
            }
        }
    } else {
        return Err(one(
            source,
            0,
            "nodes",
            "no `nodes` or `sinfo` list: not `sinfo --json` or `scontrol show node --json` output",
        ));
    }
    for (name, gres, path) in records {
        let line = lines.find(&format!("\"{name}\""));
        if name.is_empty() {
            errs.push(ParseError::new(
                source,
                line,
                &format!("{path}.name"),
                "a node without a name",
            ));
            continue;
        }
        if !seen.insert(name.clone()) {
            continue;
        }
        match gpus_of_gres(&gres) {
            Ok(None) => {}
            Ok(Some((gpus, ty))) => {
                if gpus as u64 > super::cluster_file::MAX_GPUS_PER_NODE {
                    errs.push(ParseError::new(
                        source,
                        line,
                        &format!("{path}.gres"),
                        format!(
                            "{gpus} GPUs on node {name}, more than {}",
                            super::cluster_file::MAX_GPUS_PER_NODE
                        ),
                    ));
                } else {
                    nodes.push(Node {
                        name,
                        gpus,
                        gpu_type: ty.into(),
                    });
                }
            }
            Err(reason) => errs.push(ParseError::new(source, line, &format!("{path}.gres"), reason)),
        }
    }
    if !errs.is_empty() {
        return Err(CoreError::Parse(errs));
    }
    if nodes.is_empty() {
        return Err(CoreError::Invalid(format!("{source}: no nodes with GPUs")));
    }
    Ok(Cluster { nodes })
}

/// GPUs and their type in a node's gres string; `None` without GPUs.
fn gpus_of_gres(gres: &str) -> Result<Option<(u32, String)>, String> {
    let mut total = 0u32;
    let mut types = BTreeSet::new();
    let mut depth = 0;
    let mut items = Vec::new();
    let mut cur = String::new();
    for c in gres.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if depth == 0 && c != ')' {
            cur.push(c);
        }
    }
    items.push(cur);
    for item in items
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty() && *s != "(null)")
    {
        let parts: Vec<&str> = item.split(':').collect();
        if parts[0] != "gpu" {
            continue;
        }
        let (ty, count) = match parts.as_slice() {
            [_, count] => ("unknown", *count),
            [_, ty, count] => (*ty, *count),
            _ => return Err(format!("`{item}`: expected gpu:COUNT or gpu:TYPE:COUNT")),
        };
        let n: u32 = count
            .parse()
            .map_err(|_| format!("`{item}`: GPU count `{count}` is not a whole number"))?;
        total += n;
        types.insert(ty.to_ascii_lowercase());
    }
    match types.len() {
        0 => Ok(None),
        1 => Ok((total > 0).then(|| (total, types.into_iter().next().unwrap_or_default()))),
        _ => Err(format!(
            "`{gres}`: GPUs of several types on one node ({}); gpuplan's nodes hold one type",
            types.into_iter().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// GPUs a job was allocated: its `gres/gpu` TRES (the untyped count where
/// Slurm lists both it and typed ones).
fn allocated_gpus(j: &Value) -> Result<i64, String> {
    let Some(tres) = j.get("tres").and_then(|t| t.get("allocated")) else {
        return Ok(0);
    };
    let Some(list) = tres.as_array() else {
        return Err(format!("expected a list, got {}", show(Some(tres))));
    };
    let (mut plain, mut typed) = (None, 0i64);
    for t in list {
        if t.get("type").and_then(Value::as_str) != Some("gres") {
            continue;
        }
        let name = t.get("name").and_then(Value::as_str).unwrap_or("");
        let count = t.get("count").and_then(number).unwrap_or(0).max(0);
        if name == "gpu" {
            plain = Some(count);
        } else if name.starts_with("gpu:") {
            typed += count;
        }
    }
    Ok(plain.unwrap_or(typed))
}

/// A number, plain or as Slurm 23.02+ writes it (`{set, infinite, number}`).
fn number(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::Object(o) => {
            if o.get("set").and_then(Value::as_bool) == Some(false)
                || o.get("infinite").and_then(Value::as_bool) == Some(true)
            {
                return Some(0);
            }
            o.get("number").and_then(Value::as_i64)
        }
        _ => None,
    }
}

fn time_field<'a>(j: &'a Value, k: &str) -> Option<&'a Value> {
    j.get("time").and_then(|t| t.get(k))
}

/// `state.current` as names: a string (22.05) or a list (later).
fn state_names(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or("nothing".into(), |v| {
        let s = v.to_string();
        if s.len() > 40 {
            format!("{}…", &s[..s.char_indices().nth(40).map_or(s.len(), |(i, _)| i)])
        } else {
            s
        }
    })
}

fn parse_json(source: &str, text: &str) -> Result<Value, CoreError> {
    serde_json::from_str(text).map_err(|e| {
        CoreError::Parse(vec![ParseError::new(
            source,
            e.line() as u64,
            &format!("column {}", e.column()),
            format!("not JSON: {e}"),
        )])
    })
}

fn one(source: &str, line: u64, field: &str, reason: &str) -> CoreError {
    CoreError::Parse(vec![ParseError::new(source, line, field, reason)])
}

/// Lines of keys found in order: Slurm writes one key per line, so the
/// line of a record's first distinctive key names the record.
struct LineFinder<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> LineFinder<'a> {
    fn new(text: &'a str) -> Self {
        LineFinder { text, at: 0 }
    }

    /// The 1-based line of the next `needle` from the last one found; 0
    /// if none.
    fn find(&mut self, needle: &str) -> u64 {
        match self.text[self.at..].find(needle) {
            Some(off) => {
                let pos = self.at + off;
                self.at = pos + needle.len();
                self.text[..pos].bytes().filter(|&b| b == b'\n').count() as u64 + 1
            }
            None => 0,
        }
    }
}

/// A queues file for the imported jobs' accounts (docs/tenants.md): each
/// guaranteed ⌊`capacity` × its share of the imported GPU-time⌋, a start
/// the operator edits to the cluster's real quotas.
pub fn queues_toml(jobs: &[TraceJob], capacity: u32) -> String {
    let mut gpu_s: BTreeMap<String, f64> = BTreeMap::new();
    for j in jobs {
        let q = j
            .group
            .clone()
            .unwrap_or_else(|| gpuplan_core::queue::DEFAULT_QUEUE.to_string());
        *gpu_s.entry(q).or_insert(0.0) += j.gpu_s().unwrap_or(0.0);
    }
    let total: f64 = gpu_s.values().sum();
    let mut s = format!(
        "# Queues of the imported Slurm accounts: each guaranteed ⌊{capacity} GPUs × its\n\
         # share of the imported GPU-time⌋ (gpuplan trace import-slurm). Edit to taste.\n"
    );
    for (q, g) in &gpu_s {
        let share = if total > 0.0 { g / total } else { 0.0 };
        let guarantee = (capacity as f64 * share).floor() as u32;
        s.push_str(&format!(
            "\n# {:.1}% of the GPU-time ({:.2} GPU-h)\n[[queue]]\nname = {}\nguarantee = {guarantee}\n",
            share * 100.0,
            g / 3600.0,
            toml_string(q)
        ));
    }
    s
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.replace('"', "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real output of the test Slurm cluster (scripts/slurm-cluster.sh
    /// with ACCOUNTING=1, Slurm 22.05; tests/data/slurm/README.md): each
    /// imported job's times and GPUs agree with `sacct`'s own text output
    /// of the same jobs, read independently here.
    #[test]
    fn real_sacct_output_agrees_with_sacct_text() {
        let dir = format!("{}/../../tests/data/slurm", env!("CARGO_MANIFEST_DIR"));
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap();
        let got = parse_sacct("sacct.json", &read("sacct.json")).unwrap();
        // sacct -P: JobID|JobName|Account|State|Submit|Start|End|AllocTRES.
        let text = read("sacct.txt");
        let mut want = Vec::new();
        let mut never = 0;
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split('|').collect();
            // (Written on a machine in UTC, as the JSON's epoch seconds are.)
            let ts = |s: &str| crate::trace::parse_datetime_s(&s.replace('T', " ")).unwrap();
            let gpus = f[7]
                .split(',')
                .find_map(|kv| kv.strip_prefix("gres/gpu="))
                .map(|g| g.parse::<u32>().unwrap());
            match gpus {
                Some(g) => want.push((
                    format!("slurm-{}", f[0]),
                    f[2].to_string(),
                    ts(f[4]),
                    ts(f[5]),
                    ts(f[6]),
                    g,
                )),
                None => never += 1,
            }
        }
        assert_eq!(got.jobs.len(), want.len());
        assert_eq!(got.skipped.get("never ran"), Some(&never));
        let t0 = want.iter().map(|w| w.2).fold(f64::INFINITY, f64::min);
        for (w, (j, ran)) in want.iter().zip(got.jobs.iter().zip(&got.ran)) {
            assert_eq!(j.name, w.0);
            assert_eq!(j.group.as_deref(), Some(w.1.as_str()), "{}", j.name);
            assert_eq!(j.submit_s, w.2 - t0, "{}", j.name);
            assert_eq!(*ran, (w.3 - t0, w.4 - t0), "{}", j.name);
            assert_eq!(j.duration_s, Some(w.4 - w.3), "{}", j.name);
            assert_eq!(j.gpus, w.5, "{}", j.name);
        }
        let c = parse_nodes("sinfo.json", &read("sinfo.json")).unwrap();
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.total_gpus(), 8);
    }

    #[test]
    fn gres_strings() {
        assert_eq!(gpus_of_gres("gpu:a100:4"), Ok(Some((4, "a100".into()))));
        assert_eq!(gpus_of_gres("gpu:8"), Ok(Some((8, "unknown".into()))));
        assert_eq!(
            gpus_of_gres("gpu:A100:4(S:0-1),shard:8"),
            Ok(Some((4, "a100".into())))
        );
        assert_eq!(
            gpus_of_gres("gpu:v100:2(S:0,1),gpu:v100:2(S:1)"),
            Ok(Some((4, "v100".into())))
        );
        assert_eq!(gpus_of_gres(""), Ok(None));
        assert_eq!(gpus_of_gres("(null)"), Ok(None));
        assert_eq!(gpus_of_gres("shard:8"), Ok(None));
        assert!(gpus_of_gres("gpu:a100:four")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(gpus_of_gres("gpu:a100:2,gpu:t4:2")
            .unwrap_err()
            .contains("several types"));
    }

    #[test]
    fn numbers_in_both_layouts() {
        let v: Value = serde_json::json!([5, {"set": true, "infinite": false, "number": 7}, {"set": false, "number": 9}]);
        let got: Vec<_> = v.as_array().unwrap().iter().map(number).collect();
        assert_eq!(got, vec![Some(5), Some(7), Some(0)]);
    }

    /// The later layout (23.02+: numbers as objects, states as lists, sinfo
    /// by node group), written by hand from Slurm's schema.
    #[test]
    fn the_later_layout() {
        let sacct = r#"{"jobs": [
          {"job_id": 11, "name": "x", "account": "t",
           "state": {"current": ["COMPLETED"]},
           "time": {"submission": {"set": true, "infinite": false, "number": 100},
                    "start": {"set": true, "infinite": false, "number": 160},
                    "end": {"set": true, "infinite": false, "number": 400}},
           "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2},
                                  {"type": "gres", "name": "gpu:h100", "count": 2}]}},
          {"job_id": 12, "name": "y", "account": "t",
           "state": {"current": ["RUNNING"]},
           "time": {"submission": 120, "start": 130, "end": 0}, "tres": {"allocated": []}}
        ]}"#;
        let got = parse_sacct("s.json", sacct).unwrap();
        assert_eq!(got.jobs.len(), 1);
        assert_eq!(got.jobs[0].gpus, 2);
        assert_eq!(got.jobs[0].duration_s, Some(240.0));
        assert_eq!(got.ran, vec![(60.0, 300.0)]);
        assert_eq!(got.skipped.get("still running"), Some(&1));
        let sinfo = r#"{"sinfo": [
          {"nodes": {"nodes": ["g1", "g2"]}, "gres": {"total": "gpu:h100:8(S:0-1)"}},
          {"nodes": {"nodes": ["g2", "c1"]}, "gres": {"total": ""}}
        ]}"#;
        let c = parse_nodes("n.json", sinfo).unwrap();
        assert_eq!(c.total_gpus(), 16);
        assert_eq!(c.nodes.len(), 2);
    }

    #[test]
    fn bad_input_names_file_line_and_field() {
        let e = parse_sacct("s.json", "{\"jobs\": [\n").unwrap_err().to_string();
        assert!(e.starts_with("s.json:2:"), "{e}");
        let e = parse_sacct("s.json", "{\"nodes\": []}").unwrap_err().to_string();
        assert!(e.contains("not `sacct --json` output"), "{e}");
        let bad = "{\"jobs\": [\n {\n  \"job_id\": 3,\n  \"time\": {\"submission\": \"soon\"}\n }\n]}";
        let e = parse_sacct("s.json", bad).unwrap_err().to_string();
        assert!(
            e.contains("s.json:3:jobs[0].time.submission: expected a number, got \"soon\""),
            "{e}"
        );
        let e = parse_nodes(
            "n.json",
            "{\"nodes\": [\n{\"name\": \"n1\",\n \"gres\": \"gpu:x:y\"}]}",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("n.json:2:nodes[0].gres: `gpu:x:y`"), "{e}");
    }
}
