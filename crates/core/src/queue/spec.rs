//! A queue as round files and queues files write it, and the checks that
//! need no plan: below the round, which holds queues.

use serde::{Deserialize, Serialize};

/// The queue of a job that names none.
pub const DEFAULT_QUEUE: &str = "default";

/// Most queues a round may carry: the MIPs add constraints per (job, queue)
/// pair on a job's path, and the checks compare queues pairwise.
pub const MAX_QUEUES: usize = 1024;

/// One queue of the tree, as round files and queues files write it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Queue {
    /// Unique name; jobs name their (leaf) queue by it.
    pub name: String,
    /// The queue above it; absent: a top-level queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// GPUs the queue is guaranteed while its jobs want them. A parent's
    /// guarantee covers its children's (their sum may not exceed it).
    #[serde(default)]
    pub guarantee: u32,
    /// The queue's share of what lies beyond the guarantees, against its
    /// siblings' (KAI's over-quota weight, Kueue's fair-sharing weight).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub weight: f64,
    /// Most GPUs the queue may hold beyond its guarantee; absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_limit: Option<u32>,
    /// Whether others may use its idle guarantee (reclaimed when it wants
    /// it back). Absent: true, as in Kueue and KAI.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub lend: bool,
}

fn one() -> f64 {
    1.0
}
fn is_one(w: &f64) -> bool {
    *w == 1.0
}
fn yes() -> bool {
    true
}
fn is_yes(b: &bool) -> bool {
    *b
}

impl Queue {
    /// A queue with only a name: top level, no guarantee, weight 1, no
    /// limit, lending. Builders state the rest with struct update syntax.
    pub fn new(name: impl Into<String>) -> Self {
        Queue {
            name: name.into(),
            parent: None,
            guarantee: 0,
            weight: 1.0,
            borrow_limit: None,
            lend: true,
        }
    }
}

/// A queues file (TOML; docs/tenants.md): `[[queue]]` tables with the
/// keys of [`Queue`]. Every problem is named `source:line:field: message`,
/// the line where the table (or its field) is written; the tree's own
/// rules (unique names, parents, no cycles, children within their
/// parent's guarantee) are checked here, those that need the cluster and
/// the jobs when a round is built ([`check`]).
pub fn parse_queues_toml(text: &str, source: &str) -> Result<Vec<Queue>, Vec<String>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        queue: Vec<Queue>,
    }
    let file: File = toml::from_str(text).map_err(|e| {
        let start = e.span().map(|s| s.start.min(text.len()));
        let line = start.map_or(0, |s| text[..s].matches('\n').count() + 1);
        // The key of the line the error points into (`guarantee = "x"`), so
        // that a wrong type names its field as the checks' messages do.
        let key = start
            .and_then(|s| text[..s].rsplit('\n').next().zip(text[s..].split('\n').next()))
            .map(|(before, after)| format!("{before}{after}"))
            .and_then(|l| l.split_once('=').map(|(k, _)| k.trim().to_string()))
            .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match key {
            Some(k) => vec![format!("{source}:{line}:{k}: {}", e.message().trim())],
            None => vec![format!("{source}:{line}: {}", e.message().trim())],
        }
    })?;
    if file.queue.is_empty() {
        return Err(vec![format!("{source}:1: no [[queue]] tables")]);
    }
    let mut errs = Vec::new();
    check_tree(&file.queue, &mut errs);
    if errs.is_empty() {
        return Ok(file.queue);
    }
    // `queues[i].field: msg` → the line of the i-th [[queue]] table's field.
    let tables: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[queue]]"))
        .map(|(i, _)| i)
        .collect();
    Err(errs
        .into_iter()
        .map(|e| {
            let Some(rest) = e.strip_prefix("queues[") else {
                return format!("{source}:1: {e}");
            };
            let Some((i, rest)) = rest.split_once(']') else {
                return format!("{source}:1: {e}");
            };
            let (field, msg) = rest
                .strip_prefix('.')
                .and_then(|r| r.split_once(": "))
                .unwrap_or(("", rest.trim_start_matches(": ")));
            let start = i
                .parse::<usize>()
                .ok()
                .and_then(|i| tables.get(i))
                .copied()
                .unwrap_or(0);
            let end = tables.iter().find(|&&t| t > start).copied().unwrap_or(usize::MAX);
            let line = text
                .lines()
                .enumerate()
                .skip(start)
                .take(end.saturating_sub(start))
                .find(|(_, l)| {
                    !field.is_empty()
                        && l.trim_start()
                            .strip_prefix(field)
                            .is_some_and(|r| r.trim_start().starts_with('='))
                })
                .map_or(start + 1, |(n, _)| n + 1);
            format!("{source}:{line}:{field}: {msg}")
        })
        .collect())
}

/// The tree's own rules, each problem named by path (`queues[2].parent`).
fn check_tree(qs: &[Queue], errs: &mut Vec<String>) {
    if qs.len() > MAX_QUEUES {
        errs.push(format!(
            "queues: {} queues, more than the {MAX_QUEUES} supported",
            qs.len()
        ));
        return;
    }
    let index = |name: &str| qs.iter().position(|q| q.name == name);
    for (i, q) in qs.iter().enumerate() {
        if q.name.trim().is_empty() {
            errs.push(format!("queues[{i}].name: empty"));
        }
        if let Some(first) = qs[..i].iter().position(|o| o.name == q.name) {
            errs.push(format!(
                "queues[{i}].name: duplicate '{}', also queues[{first}]",
                q.name
            ));
        }
        if !(q.weight.is_finite() && q.weight > 0.0) {
            errs.push(format!("queues[{i}].weight: must be > 0, got {}", q.weight));
        }
        match q.parent.as_deref() {
            Some(p) if index(p).is_none() => {
                errs.push(format!("queues[{i}].parent: no queue named '{p}'"));
            }
            Some(p) if p == q.name => errs.push(format!("queues[{i}].parent: the queue itself")),
            _ => {}
        }
    }
    // Cycles: walk up from each queue at most len steps.
    for (i, q) in qs.iter().enumerate() {
        let mut at = q.parent.as_deref().and_then(index);
        let mut steps = 0;
        while let Some(p) = at {
            if p == i {
                errs.push(format!("queues[{i}].parent: '{}' is its own ancestor", q.name));
                break;
            }
            steps += 1;
            if steps > qs.len() {
                break;
            }
            at = qs[p].parent.as_deref().and_then(index);
        }
    }
    for (i, q) in qs.iter().enumerate() {
        let kids: u64 = qs
            .iter()
            .filter(|c| c.parent.as_deref() == Some(q.name.as_str()))
            .map(|c| u64::from(c.guarantee))
            .sum();
        if kids > u64::from(q.guarantee) {
            errs.push(format!(
                "queues[{i}].guarantee: {} GPUs, less than its children's guarantees ({kids})",
                q.guarantee
            ));
        }
    }
}

/// Why a job may not be in `queue` (`None`: `default`) of `qs`: no such
/// queue (the message lists them), or one with queues below it. `None` when
/// it may, and always without queues. The round check and the daemon's
/// submissions word it alike.
pub fn leaf_problem(qs: &[Queue], queue: Option<&str>) -> Option<String> {
    if qs.is_empty() {
        return None;
    }
    let name = queue.unwrap_or(DEFAULT_QUEUE);
    if !qs.iter().any(|q| q.name == name) {
        if name == DEFAULT_QUEUE {
            return None; // the implicit default queue: guarantee 0
        }
        return Some(format!(
            "no queue named '{name}'; queues: {}",
            qs.iter().map(|q| q.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if qs.iter().any(|c| c.parent.as_deref() == Some(name)) {
        return Some(format!("'{name}' has queues below it; a job names a leaf queue"));
    }
    None
}

/// `qs` with every guarantee scaled by capacity ÷ the top level's sum
/// (rounded down) when the top level asks for more than `capacity` GPUs:
/// a live cluster that loses GPUs keeps planning, each queue owed its
/// proportion of what is left, rather than refusing every round. Children
/// stay within their parents (a sum of floors is at most the floor of the
/// sum). `None` when the guarantees fit.
pub fn fit_guarantees(qs: &[Queue], capacity: u32) -> Option<Vec<Queue>> {
    let top: u64 = qs
        .iter()
        .filter(|q| q.parent.is_none())
        .map(|q| u64::from(q.guarantee))
        .sum();
    if top <= u64::from(capacity) {
        return None;
    }
    Some(
        qs.iter()
            .map(|q| Queue {
                guarantee: (u64::from(q.guarantee) * u64::from(capacity) / top) as u32,
                ..q.clone()
            })
            .collect(),
    )
}

/// Problems with `queues` on a cluster whose jobs may hold `capacity`
/// GPUs, and with the queue each job names (`jobs`: its name and queue, in
/// round order), each naming its path (`queues[2].parent: ...`, `jobs[4]
/// (name).queue: ...`). The round check calls it with the round's parts.
pub fn check_parts(qs: &[Queue], capacity: u64, jobs: &[(&str, Option<&str>)], errs: &mut Vec<String>) {
    // Without queues the round is one pool: jobs' queue names (a trace's
    // tenants) are kept for reports but bind nothing.
    if qs.is_empty() {
        return;
    }
    check_tree(qs, errs);
    if qs.len() > MAX_QUEUES {
        return;
    }
    // The top level within the cluster.
    let top: u64 = qs
        .iter()
        .filter(|q| q.parent.is_none())
        .map(|q| u64::from(q.guarantee))
        .sum();
    if top > capacity {
        errs.push(format!(
            "queues: top-level guarantees sum to {top} GPUs, more than the {capacity} GPUs the round's jobs may hold (the cluster's, less reserved ones)"
        ));
    }
    for (i, &(job, queue)) in jobs.iter().enumerate() {
        if let Some(why) = leaf_problem(qs, queue) {
            errs.push(format!("jobs[{i}] ({job}).queue: {why}"));
        }
    }
    // A pinned (non-preemptible, running) job that breaks a limit is kept:
    // the limits count what pinned jobs hold as allowed. Nothing to refuse.
}
