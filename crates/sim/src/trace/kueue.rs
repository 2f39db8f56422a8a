//! Kueue's queue configuration as a gpuplan queues file
//! (`gpuplan trace import-kueue`; docs/estimates.md, docs/tenants.md).
//!
//! Reads ClusterQueue and Cohort objects (multi-document YAML, Kueue's
//! `kueue.x-k8s.io` API, v1beta1 field names and v1beta2's renames) and
//! maps, for one resource (`nvidia.com/gpu`):
//!
//! - a ClusterQueue → a leaf queue: `guarantee` = its `nominalQuota` summed
//!   over the flavours (gpuplan's queues count GPUs of every type),
//!   `borrow_limit` = the flavours' `borrowingLimit` summed (absent on any
//!   flavour: no limit; a ClusterQueue in no cohort borrows nothing and
//!   lends nothing, as in Kueue), `lend = false` where every flavour's
//!   `lendingLimit` is 0, `weight` = `fairSharing.weight`;
//! - a cohort (a Cohort object, or only named by `spec.cohort`) → a parent
//!   queue whose guarantee is its own `nominalQuota` plus its children's,
//!   under its `parent`, with its `borrowingLimit` and weight.
//!
//! Other kinds (ResourceFlavor, LocalQueue, ...) are skipped. A partial
//! `lendingLimit` cannot be said in a queues file (a queue lends all of
//! its idle guarantee or none): it is kept as lending, with a note.
//! Every problem is named `FILE:LINE:field: problem`.

use std::collections::{BTreeMap, BTreeSet};

use gpuplan_core::queue::Queue;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// The resource a queue's GPUs are counted in, by default.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The queues read, and what the mapping could not say exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct KueueImport {
    /// Parents before their children, cohorts first.
    pub queues: Vec<Queue>,
    /// Notes for the operator (partial lending limits, summed flavours, ...).
    pub notes: Vec<String>,
}

/// A YAML node with the line it starts on.
#[derive(Debug, Clone)]
enum Node {
    Scalar(String, usize),
    Seq(Vec<Node>, usize),
    /// Entries with each key's line.
    Map(Vec<(String, usize, Node)>, usize),
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Scalar(_, l) | Node::Seq(_, l) | Node::Map(_, l) => *l,
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(es, _) => es.iter().find(|e| e.0 == key).map(|e| &e.2),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Scalar(s, _) if s.is_empty() || s == "~" || s == "null")
    }
}

/// Builds [`Node`]s from the parser's events, one per document.
#[derive(Default)]
struct Builder {
    docs: Vec<Node>,
    /// Open containers; a map's pending key waits beside it.
    stack: Vec<(Node, Option<(String, usize)>)>,
    alias_line: Option<usize>,
}

impl Builder {
    fn push_value(&mut self, v: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(v),
            Some((Node::Seq(items, _), _)) => items.push(v),
            Some((Node::Map(es, _), pending)) => match pending.take() {
                Some((k, l)) => es.push((k, l, v)),
                None => {
                    // A key: scalars only (complex keys are read as their line).
                    let (k, l) = match &v {
                        Node::Scalar(s, l) => (s.clone(), *l),
                        other => (String::new(), other.line()),
                    };
                    *pending = Some((k, l));
                }
            },
            Some((Node::Scalar(..), _)) => {}
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(s, ..) => self.push_value(Node::Scalar(s, line)),
            Event::SequenceStart(..) => self.stack.push((Node::Seq(Vec::new(), line), None)),
            Event::MappingStart(..) => self.stack.push((Node::Map(Vec::new(), line), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((n, _)) = self.stack.pop() {
                    self.push_value(n);
                }
            }
            Event::Alias(_) => {
                self.alias_line.get_or_insert(line);
                self.push_value(Node::Scalar(String::new(), line));
            }
            _ => {}
        }
    }
}

/// Parse multi-document YAML into its documents; a syntax error is
/// `source:line:yaml: problem`.
fn documents(text: &str, source: &str) -> Result<Vec<Node>, String> {
    let mut b = Builder::default();
    Parser::new_from_str(text)
        .load(&mut b, true)
        .map_err(|e| format!("{source}:{}:yaml: {}", e.marker().line(), e.info()))?;
    if let Some(l) = b.alias_line {
        return Err(format!("{source}:{l}:yaml: aliases (*name) are not supported"));
    }
    Ok(b.docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// One ClusterQueue's or Cohort's GPU quota.
#[derive(Debug, Default)]
struct Quota {
    nominal: u64,
    /// `None`: some flavour has no limit.
    borrow: Option<u64>,
    /// `None`: some flavour has no limit.
    lend: Option<u64>,
    flavours: Vec<String>,
}

/// One object read: a ClusterQueue or a Cohort.
#[derive(Debug)]
struct Object {
    cohort: bool,
    name: String,
    line: usize,
    /// The cohort a ClusterQueue is in, or a Cohort's parent.
    parent: Option<String>,
    quota: Quota,
    weight: f64,
}

/// Reads one file's objects, collecting every problem.
struct Reader<'a> {
    source: &'a str,
    errs: Vec<String>,
}

impl Reader<'_> {
    fn err(&mut self, line: usize, field: &str, problem: impl std::fmt::Display) {
        self.errs
            .push(format!("{}:{line}:{field}: {problem}", self.source));
    }

    fn string(&mut self, n: Option<&Node>, at: usize, field: &str, required: bool) -> Option<String> {
        match n {
            Some(Node::Scalar(s, _)) if !s.is_empty() && s != "~" && s != "null" => Some(s.clone()),
            Some(n) if !n.is_null() => {
                self.err(n.line(), field, "must be a string");
                None
            }
            _ => {
                if required {
                    self.err(at, field, "missing");
                }
                None
            }
        }
    }

    /// A whole number of GPUs (an integer, or a quantity string of one).
    fn count(&mut self, n: &Node, field: &str) -> Option<u64> {
        match n {
            Node::Scalar(s, l) => match s.trim().parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    self.err(*l, field, format!("must be a whole number of GPUs, got '{s}'"));
                    None
                }
            },
            other => {
                self.err(other.line(), field, "must be a number");
                None
            }
        }
    }

    fn seq<'n>(&mut self, n: Option<&'n Node>, field: &str) -> &'n [Node] {
        match n {
            Some(Node::Seq(items, _)) => items,
            Some(n) if !n.is_null() => {
                self.err(n.line(), field, "must be a list");
                &[]
            }
            _ => &[],
        }
    }

    /// The `resourceGroups` of a spec, for `resource`.
    fn quota(&mut self, spec: &Node, path: &str, resource: &str) -> Quota {
        let mut q = Quota {
            borrow: Some(0),
            lend: Some(0),
            ..Quota::default()
        };
        let groups = self.seq(spec.get("resourceGroups"), &format!("{path}.resourceGroups"));
        for (g, group) in groups.iter().enumerate() {
            let gp = format!("{path}.resourceGroups[{g}]");
            let flavours = self.seq(group.get("flavors"), &format!("{gp}.flavors"));
            if group.get("flavors").is_none() {
                self.err(group.line(), &format!("{gp}.flavors"), "missing");
            }
            for (f, flavour) in flavours.iter().enumerate() {
                let fp = format!("{gp}.flavors[{f}]");
                let name = self
                    .string(flavour.get("name"), flavour.line(), &format!("{fp}.name"), true)
                    .unwrap_or_default();
                let resources = self.seq(flavour.get("resources"), &format!("{fp}.resources"));
                if flavour.get("resources").is_none() {
                    self.err(flavour.line(), &format!("{fp}.resources"), "missing");
                }
                for (r, res) in resources.iter().enumerate() {
                    let rp = format!("{fp}.resources[{r}]");
                    let rname = self.string(res.get("name"), res.line(), &format!("{rp}.name"), true);
                    if rname.as_deref() != Some(resource) {
                        continue;
                    }
                    match res.get("nominalQuota") {
                        Some(n) if !n.is_null() => {
                            q.nominal += self.count(n, &format!("{rp}.nominalQuota")).unwrap_or(0);
                        }
                        _ => self.err(res.line(), &format!("{rp}.nominalQuota"), "missing"),
                    }
                    for (key, slot) in [("borrowingLimit", &mut q.borrow), ("lendingLimit", &mut q.lend)] {
                        match res.get(key) {
                            Some(n) if !n.is_null() => {
                                let v = self.count(n, &format!("{rp}.{key}")).unwrap_or(0);
                                *slot = slot.map(|s| s + v);
                            }
                            _ => *slot = None,
                        }
                    }
                    q.flavours.push(name.clone());
                }
            }
        }
        if q.flavours.is_empty() {
            q.borrow = None;
            q.lend = None;
        }
        q
    }

    fn weight(&mut self, spec: &Node, path: &str) -> f64 {
        let Some(w) = spec.get("fairSharing").and_then(|f| f.get("weight")) else {
            return 1.0;
        };
        if w.is_null() {
            return 1.0;
        }
        let field = format!("{path}.fairSharing.weight");
        match w {
            Node::Scalar(s, l) => match s.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => v,
                Ok(v) => {
                    self.err(
                        *l,
                        &field,
                        format!("must be > 0 (gpuplan gives every queue a share), got {v}"),
                    );
                    1.0
                }
                Err(_) => {
                    self.err(*l, &field, format!("must be a number, got '{s}'"));
                    1.0
                }
            },
            other => {
                self.err(other.line(), &field, "must be a number");
                1.0
            }
        }
    }

    /// The ClusterQueues (`want_cohorts` false) or Cohorts of one file.
    fn objects(&mut self, docs: &[Node], want_cohorts: bool, resource: &str) -> Vec<Object> {
        let mut out = Vec::new();
        for doc in docs {
            let Node::Map(..) = doc else {
                self.err(doc.line(), "kind", "a document must be a mapping");
                continue;
            };
            let Some(kind) = self.string(doc.get("kind"), doc.line(), "kind", true) else {
                continue;
            };
            let is_cohort = match kind.as_str() {
                "ClusterQueue" => false,
                "Cohort" => true,
                _ => continue,
            };
            if is_cohort != want_cohorts {
                continue;
            }
            match self.string(doc.get("apiVersion"), doc.line(), "apiVersion", true) {
                Some(v) if !v.starts_with("kueue.x-k8s.io/") => {
                    let l = doc.get("apiVersion").map_or(doc.line(), Node::line);
                    self.err(
                        l,
                        "apiVersion",
                        format!("not Kueue's (kueue.x-k8s.io/...), got '{v}'"),
                    );
                }
                _ => {}
            }
            let meta = doc.get("metadata");
            let name_line = meta.map_or(doc.line(), Node::line);
            let Some(name) = self.string(meta.and_then(|m| m.get("name")), name_line, "metadata.name", true)
            else {
                continue;
            };
            let Some(spec) = doc.get("spec").filter(|s| matches!(s, Node::Map(..))) else {
                let l = doc.get("spec").map_or(doc.line(), Node::line);
                self.err(l, "spec", format!("missing or not a mapping ({kind} {name})"));
                continue;
            };
            let parent = if is_cohort {
                let p = spec.get("parentName").or(spec.get("parent"));
                self.string(p, spec.line(), "spec.parentName", false)
            } else {
                let c = spec.get("cohortName").or(spec.get("cohort"));
                self.string(c, spec.line(), "spec.cohort", false)
            };
            let quota = self.quota(spec, "spec", resource);
            let weight = self.weight(spec, "spec");
            out.push(Object {
                cohort: is_cohort,
                name,
                line: doc.line(),
                parent,
                quota,
                weight,
            });
        }
        out
    }
}

/// Read Kueue's ClusterQueues (`cluster_queues`: text and its name) and,
/// where given, Cohorts, into gpuplan queues counting `resource`
/// ([`GPU_RESOURCE`]). `Err`: every problem, `FILE:LINE:field: problem`.
pub fn import_kueue(
    cluster_queues: (&str, &str),
    cohorts: Option<(&str, &str)>,
    resource: &str,
) -> Result<KueueImport, Vec<String>> {
    let cq_source = cluster_queues.1;
    let co_source = cohorts.map_or(cq_source, |c| c.1);
    let (cqs, mut cos) = read_objects(cluster_queues, cohorts, resource)?;
    if cqs.is_empty() {
        return Err(vec![format!("{cq_source}:1:kind: no ClusterQueue in the file")]);
    }
    let errs = check_tree(&cqs, &mut cos, cq_source, co_source);
    if !errs.is_empty() {
        return Err(errs);
    }
    let (mut errs, mut notes) = (Vec::new(), Vec::new());
    let mut queues = cohort_queues(&cos, &cqs, &mut errs, &mut notes);
    queues.extend(cluster_queue_queues(&cqs, resource, &mut errs, &mut notes));
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(KueueImport { queues, notes })
}

/// The ClusterQueues and the Cohorts of both files (Cohorts may sit in the
/// ClusterQueues' file too); every reading problem at once.
fn read_objects(
    cluster_queues: (&str, &str),
    cohorts: Option<(&str, &str)>,
    resource: &str,
) -> Result<(Vec<Object>, Vec<Object>), Vec<String>> {
    let mut errs = Vec::new();
    let mut read = |text: &str, source: &str, want_cohorts: bool| -> Vec<Object> {
        match documents(text, source) {
            Err(e) => {
                errs.push(e);
                Vec::new()
            }
            Ok(docs) => {
                let mut r = Reader {
                    source,
                    errs: Vec::new(),
                };
                let objs = r.objects(&docs, want_cohorts, resource);
                errs.extend(r.errs);
                objs
            }
        }
    };
    let (cq_text, cq_source) = cluster_queues;
    let cqs = read(cq_text, cq_source, false);
    // Cohorts may sit in the ClusterQueues' file too.
    let mut cos = read(cq_text, cq_source, true);
    if let Some((text, source)) = cohorts {
        cos.extend(read(text, source, true));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok((cqs, cos))
}

/// The tree's problems: names unique across both kinds, parents that are
/// cohorts, no cohort its own ancestor. Cohorts named but not defined are
/// added to `cos`, implicit, with no quota of their own.
fn check_tree(cqs: &[Object], cos: &mut Vec<Object>, cq_source: &str, co_source: &str) -> Vec<String> {
    let mut errs = Vec::new();
    // Names: unique across both kinds.
    let mut seen: BTreeMap<&str, (bool, usize)> = BTreeMap::new();
    for o in cos.iter().chain(cqs) {
        if let Some((was_cohort, line)) = seen.insert(&o.name, (o.cohort, o.line)) {
            let src = if o.cohort { co_source } else { cq_source };
            errs.push(format!(
                "{src}:{}:metadata.name: '{}' is also the name of a {} (line {line})",
                o.line,
                o.name,
                if was_cohort { "Cohort" } else { "ClusterQueue" }
            ));
        }
    }
    // Cohorts named but not defined are implicit, with no quota of their own.
    let defined: BTreeSet<String> = cos.iter().map(|c| c.name.clone()).collect();
    let mut implicit: BTreeSet<String> = BTreeSet::new();
    for o in cqs.iter().chain(cos.iter()) {
        if let Some(p) = &o.parent {
            if !defined.contains(p) && !cqs.iter().any(|c| &c.name == p) {
                implicit.insert(p.clone());
            }
            if cqs.iter().any(|c| &c.name == p) {
                let src = if o.cohort { co_source } else { cq_source };
                errs.push(format!(
                    "{src}:{}:spec.cohort: '{p}' is a ClusterQueue, not a cohort",
                    o.line
                ));
            }
        }
    }
    for name in &implicit {
        cos.push(Object {
            cohort: true,
            name: name.clone(),
            line: 0,
            parent: None,
            quota: Quota::default(),
            weight: 1.0,
        });
    }
    // Cohort cycles.
    for c in cos.iter() {
        let mut at = c.parent.clone();
        let mut steps = 0;
        while let Some(p) = at {
            if p == c.name {
                errs.push(format!(
                    "{co_source}:{}:spec.parentName: cohort '{}' is its own ancestor",
                    c.line, c.name
                ));
                break;
            }
            steps += 1;
            if steps > cos.len() {
                break;
            }
            at = cos.iter().find(|o| o.name == p).and_then(|o| o.parent.clone());
        }
    }
    errs
}

// Guarantees bottom-up: a cohort's own quota plus its children's.
fn guarantee(name: &str, cos: &[Object], cqs: &[Object], depth: usize) -> u64 {
    let own = cos.iter().find(|c| c.name == name).map_or(0, |c| c.quota.nominal);
    if depth > cos.len() {
        return own;
    }
    let kids: u64 = cqs
        .iter()
        .filter(|q| q.parent.as_deref() == Some(name))
        .map(|q| q.quota.nominal)
        .sum::<u64>()
        + cos
            .iter()
            .filter(|c| c.parent.as_deref() == Some(name))
            .map(|c| guarantee(&c.name, cos, cqs, depth + 1))
            .sum::<u64>();
    own + kids
}

/// `v` GPUs as gpuplan counts them, or a problem naming `what`.
fn to_u32(v: u64, what: &str, errs: &mut Vec<String>) -> u32 {
    u32::try_from(v).unwrap_or_else(|_| {
        errs.push(format!("{what}: {v} GPUs, more than gpuplan counts"));
        u32::MAX
    })
}

/// The cohorts as queues, parents first (by depth): each guarantees its
/// own quota plus its children's.
fn cohort_queues(
    cos: &[Object],
    cqs: &[Object],
    errs: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Vec<Queue> {
    let mut queues = Vec::new();
    // Parents first: cohorts by depth, then the ClusterQueues.
    let depth = |c: &Object| {
        let mut d = 0;
        let mut at = c.parent.clone();
        while let Some(p) = at {
            d += 1;
            if d > cos.len() {
                break;
            }
            at = cos.iter().find(|o| o.name == p).and_then(|o| o.parent.clone());
        }
        d
    };
    let mut order: Vec<&Object> = cos.iter().collect();
    order.sort_by_key(|c| depth(c));
    for c in order {
        let g = guarantee(&c.name, cos, cqs, 0);
        queues.push(Queue {
            parent: c.parent.clone(),
            guarantee: to_u32(g, &format!("cohort {}", c.name), errs),
            weight: c.weight,
            borrow_limit: c
                .quota
                .borrow
                .filter(|_| !c.quota.flavours.is_empty())
                .map(|b| to_u32(b, &c.name, errs)),
            ..Queue::new(c.name.clone())
        });
        if c.line == 0 {
            notes.push(format!(
                "cohort {} has no Cohort object: its guarantee is its ClusterQueues' ({g} GPUs)",
                c.name
            ));
        }
    }
    queues
}

/// The ClusterQueues as leaf queues, with what a queues file cannot say
/// as notes.
fn cluster_queue_queues(
    cqs: &[Object],
    resource: &str,
    errs: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Vec<Queue> {
    let mut queues = Vec::new();
    for q in cqs {
        let quota = &q.quota;
        if quota.flavours.is_empty() {
            notes.push(format!(
                "ClusterQueue {} has no {resource} quota: guarantee 0",
                q.name
            ));
        }
        if quota.flavours.len() > 1 {
            notes.push(format!(
                "ClusterQueue {}: flavours {} summed ({} GPUs); gpuplan's queues count GPUs of every type",
                q.name,
                quota.flavours.join(", "),
                quota.nominal
            ));
        }
        let in_cohort = q.parent.is_some();
        let lend = in_cohort && quota.lend != Some(0);
        if let Some(l) = quota.lend.filter(|&l| in_cohort && l > 0 && l < quota.nominal) {
            notes.push(format!(
                "ClusterQueue {}: lendingLimit {l} of {} GPUs cannot be said in a queues file; it lends all of its idle guarantee",
                q.name, quota.nominal
            ));
        }
        queues.push(Queue {
            parent: q.parent.clone(),
            guarantee: to_u32(quota.nominal, &q.name, errs),
            weight: q.weight,
            borrow_limit: if in_cohort {
                quota.borrow.map(|b| to_u32(b, &q.name, errs))
            } else {
                Some(0)
            },
            lend,
            ..Queue::new(q.name.clone())
        });
    }
    queues
}

/// The queues as a queues file (docs/tenants.md), with a header naming
/// the files they came from and the notes as comments.
pub fn queues_toml(import: &KueueImport, sources: &str) -> String {
    let mut s = format!("# Queues imported from Kueue ({sources}) by gpuplan trace import-kueue.\n");
    for n in &import.notes {
        s.push_str(&format!("# note: {n}\n"));
    }
    let str_ = |x: &str| serde_json::to_string(x).unwrap_or_else(|_| format!("\"{x}\""));
    for q in &import.queues {
        s.push_str(&format!("\n[[queue]]\nname = {}\n", str_(&q.name)));
        if let Some(p) = &q.parent {
            s.push_str(&format!("parent = {}\n", str_(p)));
        }
        s.push_str(&format!("guarantee = {}\n", q.guarantee));
        if q.weight != 1.0 {
            s.push_str(&format!("weight = {}\n", q.weight));
        }
        if let Some(b) = q.borrow_limit {
            s.push_str(&format!("borrow_limit = {b}\n"));
        }
        if !q.lend {
            s.push_str("lend = false\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written from Kueue's documented API (ClusterQueue v1beta1, Cohort
    /// v1alpha1): two teams in a cohort under an organisation's cohort, a
    /// third queue on its own, a ResourceFlavor and a LocalQueue to skip.
    const CQS: &str = r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: a100
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  cohort: research
  fairSharing:
    weight: "2"
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: a100
      resources:
      - name: "cpu"
        nominalQuota: 64
      - name: "memory"
        nominalQuota: 512Gi
      - name: "nvidia.com/gpu"
        nominalQuota: 16
        borrowingLimit: 8
    - name: t4
      resources:
      - name: "cpu"
        nominalQuota: 32
      - name: "memory"
        nominalQuota: 256Gi
      - name: "nvidia.com/gpu"
        nominalQuota: "8"
        borrowingLimit: 0
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-b
spec:
  cohort: research
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 16
        lendingLimit: 0
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: batch
spec:
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: t4
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: team-a
  name: user-queue
spec:
  clusterQueue: team-a
"#;

    const COHORTS: &str = r#"apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata:
  name: research
spec:
  parent: org
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata:
  name: org
spec:
  fairSharing:
    weight: 3
"#;

    #[test]
    fn cluster_queues_and_cohorts_become_a_queue_tree() {
        let imp = import_kueue((CQS, "cq.yaml"), Some((COHORTS, "cohorts.yaml")), GPU_RESOURCE).unwrap();
        let by = |n: &str| imp.queues.iter().find(|q| q.name == n).unwrap().clone();
        let names: Vec<&str> = imp.queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["org", "research", "team-a", "team-b", "batch"]);
        // org: a cohort with no quota of its own, over research (8 + 24 + 16).
        assert_eq!(by("org").guarantee, 48);
        assert_eq!(by("org").weight, 3.0);
        assert_eq!(by("research").parent.as_deref(), Some("org"));
        assert_eq!(by("research").guarantee, 48);
        let a = by("team-a");
        assert_eq!(
            (a.guarantee, a.borrow_limit, a.weight, a.lend),
            (24, Some(8), 2.0, true)
        );
        let b = by("team-b");
        // No borrowing limit: unlimited; lendingLimit 0: lends nothing.
        assert_eq!((b.guarantee, b.borrow_limit, b.lend), (16, None, false));
        // In no cohort: borrows and lends nothing, as in Kueue.
        let c = by("batch");
        assert_eq!(
            (c.parent, c.guarantee, c.borrow_limit, c.lend),
            (None, 8, Some(0), false)
        );
        assert!(
            imp.notes.iter().any(|n| n.contains("a100, t4 summed")),
            "{:?}",
            imp.notes
        );
        // The file it writes is a valid queues file with the same queues.
        let text = queues_toml(&imp, "cq.yaml, cohorts.yaml");
        let back = gpuplan_core::queue::parse_queues_toml(&text, "q.toml").unwrap();
        assert_eq!(back, imp.queues);
    }

    #[test]
    fn a_cohort_without_an_object_is_its_queues_sum_and_v1beta2_names_work() {
        let text = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: x}
spec:
  cohortName: pool
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 2}
"#;
        let imp = import_kueue((text, "x.yaml"), None, GPU_RESOURCE).unwrap();
        assert_eq!(imp.queues[0].name, "pool");
        assert_eq!(imp.queues[0].guarantee, 4);
        assert_eq!(imp.queues[1].parent.as_deref(), Some("pool"));
        assert!(imp.queues[1].lend);
        assert!(
            imp.notes.iter().any(|n| n.contains("lendingLimit 2 of 4")),
            "{:?}",
            imp.notes
        );
        assert!(
            imp.notes.iter().any(|n| n.contains("no Cohort object")),
            "{:?}",
            imp.notes
        );
    }

    #[test]
    fn broken_manifests_name_file_line_and_field() {
        let bad_yaml = "kind: ClusterQueue\nmetadata:\n  name: [unclosed\n";
        let e = import_kueue((bad_yaml, "b.yaml"), None, GPU_RESOURCE).unwrap_err();
        assert!(e[0].starts_with("b.yaml:") && e[0].contains(":yaml: "), "{e:?}");
        let missing = r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: q
spec:
  resourceGroups:
  - flavors:
    - name: f
      resources:
      - name: nvidia.com/gpu
        borrowingLimit: many
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: w}
spec:
  fairSharing: {weight: 0}
"#;
        let e = import_kueue((missing, "m.yaml"), None, GPU_RESOURCE).unwrap_err();
        let want = [
            "m.yaml:10:spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: missing",
            "m.yaml:11:spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must be a whole number of GPUs, got 'many'",
            "m.yaml:13:metadata.name: missing",
            "m.yaml:21:spec.fairSharing.weight: must be > 0",
        ];
        for w in want {
            assert!(e.iter().any(|x| x.starts_with(w)), "{w} not in {e:?}");
        }
        // A cohort that is its own ancestor, and no ClusterQueue at all.
        let cyc = "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: a}\nspec: {parent: b}\n---\napiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: b}\nspec: {parent: a}\n";
        let cq = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\nspec: {cohort: a}\n";
        let e = import_kueue((cq, "q.yaml"), Some((cyc, "c.yaml")), GPU_RESOURCE).unwrap_err();
        assert!(
            e.iter()
                .any(|x| x.starts_with("c.yaml:1:spec.parentName: cohort 'a' is its own ancestor")),
            "{e:?}"
        );
        let e = import_kueue((cyc, "c.yaml"), None, GPU_RESOURCE).unwrap_err();
        assert_eq!(e, ["c.yaml:1:kind: no ClusterQueue in the file"]);
    }
}
