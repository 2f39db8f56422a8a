//! Ground-truth application profiles: what the simulator uses to advance
//! jobs, parsed from the Pollux artifact's measurements.
//!
//! Planners never see these tables; they see a [`crate::GoodputModel`]
//! fitted to the step times a job has observed.
//!
//! Throughput lookup, as in the artifact: an exact placement (normalised to
//! the lexicographically smallest rotation of its digit string) is
//! interpolated linearly over the local batch size. Other placements (five
//! or more nodes, or any (nodes, GPUs) pair without an exact row) are
//! interpolated over (nodes, GPUs, local batch) from the per-(nodes, GPUs)
//! means of `placements.csv` plus `scalability.csv`. The artifact uses a 3-D
//! Delaunay interpolation there; we interpolate over local batch within
//! each measured (nodes, GPUs) point and then barycentrically on a 2-D
//! Delaunay triangulation of the (nodes, GPUs) plane (`spade`). Both are
//! piecewise-linear and agree at every measured point; see docs/fidelity.md.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use spade::{DelaunayTriangulation, HasPosition, Point2, PositionInTriangulation, Triangulation};

use crate::error::{CoreError, ParseError};
use crate::model::{BatchLimits, GradParams};

/// Per-application constants of the Pollux artifact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppConstants {
    /// The application's batch-size limits.
    pub limits: BatchLimits,
    /// The job completes after this many (statistical) epochs.
    pub max_epochs: u32,
}

/// The applications of the Pollux artifact whose profiles ship with gpuplan.
pub const POLLUX_APPS: [&str; 6] = ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"];

/// Constants for a bundled application (M0, max batch, local batch range, epochs).
pub fn pollux_app_constants(app: &str) -> Option<AppConstants> {
    let (init, max, lo, hi, epochs) = match app {
        "bert" => (12, 384, 4, 12, 2),
        "cifar10" => (128, 4096, 32, 1024, 100),
        "deepspeech2" => (20, 640, 10, 80, 80),
        "imagenet" => (200, 12800, 20, 200, 90),
        "ncf" => (256, 32768, 32, 32768, 10),
        "yolov3" => (8, 512, 4, 8, 50),
        _ => return None,
    };
    Some(AppConstants {
        limits: BatchLimits {
            init_batch: init,
            max_batch: max,
            min_local: lo,
            max_local: hi,
        },
        max_epochs: epochs,
    })
}

/// True seconds per optimizer step and of it spent in gradient sync.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTime {
    /// Seconds per optimizer step.
    pub step_s: f64,
    /// Seconds of the step spent in gradient sync.
    pub sync_s: f64,
}

/// One measured configuration, for fitting and tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredPoint {
    /// Nodes it ran on.
    pub nodes: u32,
    /// GPUs in all.
    pub gpus: u32,
    /// Per-GPU batch size.
    pub local_bsz: u32,
    /// Measured seconds per optimizer step.
    pub step_s: f64,
    /// Measured seconds of the step spent in gradient sync.
    pub sync_s: f64,
}

impl MeasuredPoint {
    /// The point as the fit takes it: compute time is the step less its
    /// sync, floored at 1 ns so a profile whose sync reads as the whole
    /// step still fits. One rule for every caller (the simulator's fitted
    /// instances, `gpuplan models`).
    pub fn observation(&self) -> crate::fit::Observation {
        crate::fit::Observation {
            nodes: self.nodes,
            gpus: self.gpus,
            local_bsz: self.local_bsz,
            accum_time_s: (self.step_s - self.sync_s).max(1e-9),
            step_time_s: self.step_s,
        }
    }
}

/// (local batch, step s, sync s), sorted by local batch.
type Curve = Vec<(f64, f64, f64)>;

#[derive(Debug, Clone, Copy)]
struct PlaneVertex {
    pos: Point2<f64>,
    key: (u32, u32),
}

impl HasPosition for PlaneVertex {
    type Scalar = f64;
    fn position(&self) -> Point2<f64> {
        self.pos
    }
}

#[derive(Debug, Clone)]
struct Validation {
    batch: u32,
    progress: Vec<f64>,
    grad_sqr: Vec<f64>,
    grad_var: Vec<f64>,
}

/// The measured behaviour of one application.
#[derive(Debug, Clone)]
pub struct AppProfile {
    /// The application's name (a key of [`POLLUX_APPS`] for the bundled ones).
    pub name: String,
    /// The application's batch-size limits.
    pub limits: BatchLimits,
    /// The job completes after this many (statistical) epochs.
    pub max_epochs: u32,
    exact: HashMap<String, Curve>,
    plane: BTreeMap<(u32, u32), Curve>,
    tri: DelaunayTriangulation<PlaneVertex>,
    validations: Vec<Validation>,
    /// progress_at_epoch(e) for e = 0..=rows.
    epoch_progress: Vec<f64>,
    points: Vec<MeasuredPoint>,
}

/// A parsed CSV table: named numeric columns, with the 1-based line of each row.
struct Table {
    lines: Vec<u64>,
    cols: Vec<Vec<f64>>,
    raw_first: Vec<String>,
}

/// How a numeric column is checked.
#[derive(Clone, Copy)]
enum Rule {
    NonNegative,
    Positive,
    Finite,
}

fn parse_table<R: Read>(
    source: &str,
    reader: R,
    spec: &[(&str, Rule)],
    errs: &mut Vec<ParseError>,
) -> Option<Table> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(reader);
    let headers = match rdr.headers() {
        Ok(h) => h.clone(),
        Err(e) => {
            errs.push(ParseError::new(source, 1, "header", e.to_string()));
            return None;
        }
    };
    let mut idx = Vec::new();
    let before = errs.len();
    for (name, _) in spec {
        match headers.iter().position(|h| h == *name) {
            Some(i) => idx.push(i),
            None => errs.push(ParseError::new(source, 1, name, "missing column")),
        }
    }
    if errs.len() > before {
        return None;
    }
    let mut t = Table {
        lines: Vec::new(),
        cols: vec![Vec::new(); spec.len()],
        raw_first: Vec::new(),
    };
    for (i, rec) in rdr.records().enumerate() {
        let line = i as u64 + 2;
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                errs.push(ParseError::new(source, line, "row", e.to_string()));
                continue;
            }
        };
        let mut row = Vec::with_capacity(spec.len());
        let mut ok = true;
        for (k, (name, rule)) in spec.iter().enumerate() {
            let cell = rec.get(idx[k]).unwrap_or("");
            let v = match cell.parse::<f64>() {
                Ok(v) => v,
                Err(_) => {
                    errs.push(ParseError::new(
                        source,
                        line,
                        name,
                        format!("not a number: '{cell}'"),
                    ));
                    ok = false;
                    continue;
                }
            };
            let bad = if !v.is_finite() {
                Some(format!("must be finite, got {cell}"))
            } else {
                match rule {
                    Rule::NonNegative if v < 0.0 => Some(format!("must be >= 0, got {cell}")),
                    Rule::Positive if v <= 0.0 => Some(format!("must be > 0, got {cell}")),
                    _ => None,
                }
            };
            if let Some(reason) = bad {
                errs.push(ParseError::new(source, line, name, reason));
                ok = false;
                continue;
            }
            row.push(v);
        }
        if ok {
            t.lines.push(line);
            t.raw_first.push(rec.get(idx[0]).unwrap_or("").to_string());
            for (k, v) in row.into_iter().enumerate() {
                t.cols[k].push(v);
            }
        }
    }
    Some(t)
}

/// Smallest rotation of a placement's digit string: `[2, 1]` and `[1, 2]` are the same ring.
fn normalise(shape: &[u32]) -> String {
    let digits: Vec<String> = shape.iter().filter(|&&k| k > 0).map(|k| k.to_string()).collect();
    let n = digits.len();
    (0..n.max(1))
        .map(|r| {
            let mut s = String::new();
            for i in 0..n {
                s.push_str(&digits[(r + i) % n]);
            }
            s
        })
        .min()
        .unwrap_or_default()
}

/// Linear interpolation over local batch, clamped at the ends.
fn interp(curve: &Curve, x: f64) -> (f64, f64) {
    let first = curve[0];
    let last = curve[curve.len() - 1];
    if x <= first.0 {
        return (first.1, first.2);
    }
    if x >= last.0 {
        return (last.1, last.2);
    }
    let i = curve.partition_point(|p| p.0 <= x);
    let (a, b) = (curve[i - 1], curve[i]);
    let t = (x - a.0) / (b.0 - a.0);
    (a.1 + t * (b.1 - a.1), a.2 + t * (b.2 - a.2))
}

fn sort_curve(c: &mut Curve) {
    c.sort_by(|a, b| a.0.total_cmp(&b.0));
}

/// The `validation-<M>.csv` files of [`AppProfile::parse`], every bad cell
/// into `errs`.
fn read_validations<R: Read>(
    validations: Vec<(u32, &str, R)>,
    errs: &mut Vec<ParseError>,
) -> Vec<Validation> {
    use Rule::*;
    let v_spec = [
        ("progress", NonNegative),
        ("iteration", NonNegative),
        ("metric", Finite),
        ("grad_sqr", NonNegative),
        ("grad_var", NonNegative),
    ];
    let mut vals = Vec::new();
    for (m, src, r) in validations {
        if m == 0 {
            errs.push(ParseError::new(src, 0, "file name", "batch size must be > 0"));
            continue;
        }
        if let Some(t) = parse_table(src, r, &v_spec, errs) {
            if t.lines.is_empty() {
                errs.push(ParseError::new(src, 2, "progress", "no rows"));
                continue;
            }
            vals.push(Validation {
                batch: m,
                progress: t.cols[0].clone(),
                grad_sqr: t.cols[3].clone(),
                grad_var: t.cols[4].clone(),
            });
        }
    }
    vals
}

/// placements.csv's rows ([`AppProfile::parse`]): each placement's curve
/// by shape into `exact`, each row a measured point, and step and sync
/// sums per (nodes, GPUs, batch) for the plane.
fn placement_rows(
    src: &str,
    t: &Table,
    errs: &mut Vec<ParseError>,
    exact: &mut HashMap<String, Curve>,
    points: &mut Vec<MeasuredPoint>,
    sums: &mut BTreeMap<(u32, u32, u32), (f64, f64, u32)>,
) {
    for i in 0..t.lines.len() {
        let raw = &t.raw_first[i];
        if raw.is_empty() || !raw.bytes().all(|b| (b'1'..=b'9').contains(&b)) {
            errs.push(ParseError::new(
                src,
                t.lines[i],
                "placement",
                format!("must be digits 1-9 (GPUs per node), got '{raw}'"),
            ));
            continue;
        }
        let shape: Vec<u32> = raw.bytes().map(|b| (b - b'0') as u32).collect();
        let (bsz, step, sync) = (t.cols[1][i], t.cols[2][i], t.cols[3][i]);
        exact
            .entry(normalise(&shape))
            .or_default()
            .push((bsz, step, sync));
        let (n, g) = (shape.len() as u32, shape.iter().sum());
        points.push(MeasuredPoint {
            nodes: n,
            gpus: g,
            local_bsz: bsz as u32,
            step_s: step,
            sync_s: sync,
        });
        let e = sums.entry((n, g, bsz as u32)).or_insert((0.0, 0.0, 0));
        e.0 += step;
        e.1 += sync;
        e.2 += 1;
    }
}

impl AppProfile {
    /// Parse an application's profile. `validations` holds (total batch M,
    /// source name, reader) per `validation-<M>.csv`. Reports every bad cell.
    pub fn parse<R: Read>(
        name: &str,
        constants: AppConstants,
        placements: (&str, R),
        scalability: (&str, R),
        validations: Vec<(u32, &str, R)>,
    ) -> Result<AppProfile, CoreError> {
        let mut errs = Vec::new();
        use Rule::*;
        let p_spec = [
            ("placement", Positive),
            ("local_bsz", Positive),
            ("step_time", Positive),
            ("sync_time", NonNegative),
        ];
        let s_spec = [
            ("num_nodes", Positive),
            ("num_replicas", Positive),
            ("local_bsz", Positive),
            ("step_time", Positive),
            ("sync_time", NonNegative),
        ];
        let pt = parse_table(placements.0, placements.1, &p_spec, &mut errs);
        let st = parse_table(scalability.0, scalability.1, &s_spec, &mut errs);
        if validations.is_empty() {
            return Err(CoreError::Invalid(format!("{name}: no validation-<M>.csv files")));
        }
        let mut vals = read_validations(validations, &mut errs);
        let mut exact: HashMap<String, Curve> = HashMap::new();
        let mut points = Vec::new();
        let mut sums: BTreeMap<(u32, u32, u32), (f64, f64, u32)> = BTreeMap::new();
        if let Some(t) = &pt {
            placement_rows(placements.0, t, &mut errs, &mut exact, &mut points, &mut sums);
        }
        let mut plane: BTreeMap<(u32, u32), Curve> = BTreeMap::new();
        for ((n, g, b), (s, y, c)) in sums {
            plane
                .entry((n, g))
                .or_default()
                .push((b as f64, s / c as f64, y / c as f64));
        }
        if let Some(t) = &st {
            for i in 0..t.lines.len() {
                let (n, g) = (t.cols[0][i] as u32, t.cols[1][i] as u32);
                let (bsz, step, sync) = (t.cols[2][i], t.cols[3][i], t.cols[4][i]);
                if g < n {
                    errs.push(ParseError::new(
                        scalability.0,
                        t.lines[i],
                        "num_replicas",
                        format!("{g} replicas cannot span {n} nodes"),
                    ));
                    continue;
                }
                plane.entry((n, g)).or_default().push((bsz, step, sync));
                points.push(MeasuredPoint {
                    nodes: n,
                    gpus: g,
                    local_bsz: bsz as u32,
                    step_s: step,
                    sync_s: sync,
                });
            }
        }
        if !errs.is_empty() {
            return Err(CoreError::Parse(errs));
        }
        if exact.is_empty() || plane.is_empty() {
            return Err(CoreError::Invalid(format!("{name}: empty throughput tables")));
        }
        exact.values_mut().for_each(sort_curve);
        plane.values_mut().for_each(sort_curve);
        let mut tri = DelaunayTriangulation::<PlaneVertex>::new();
        for &key in plane.keys() {
            let v = PlaneVertex {
                pos: Point2::new(key.0 as f64, key.1 as f64),
                key,
            };
            tri.insert(v)
                .map_err(|e| CoreError::Invalid(format!("{name}: triangulation failed: {e:?}")))?;
        }
        vals.sort_by_key(|v| v.batch);
        let rows = vals.iter().map(|v| v.progress.len()).min().unwrap_or(0);
        let mut epoch_progress = vec![0.0];
        for r in 0..rows {
            epoch_progress.push(vals.iter().map(|v| v.progress[r]).fold(f64::INFINITY, f64::min));
        }
        if (constants.max_epochs as usize) > rows {
            return Err(CoreError::Invalid(format!(
                "{name}: validation files have {rows} epochs but the job needs {}",
                constants.max_epochs
            )));
        }
        Ok(AppProfile {
            name: name.to_string(),
            limits: constants.limits,
            max_epochs: constants.max_epochs,
            exact,
            plane,
            tri,
            validations: vals,
            epoch_progress,
            points,
        })
    }

    /// True step and sync time of a placement (GPUs per occupied node, any
    /// order) at a local batch size.
    pub fn step_time(&self, shape: &[u32], local_bsz: f64) -> StepTime {
        if let Some(c) = self.exact.get(&normalise(shape)) {
            let (s, y) = interp(c, local_bsz);
            return StepTime { step_s: s, sync_s: y };
        }
        let nodes = shape.iter().filter(|&&k| k > 0).count() as u32;
        let gpus: u32 = shape.iter().sum();
        self.plane_lookup(nodes, gpus, local_bsz)
    }

    /// The measured compute share of a step, (step − sync)/step, at a
    /// placement: the simulator's true utilization of the job's GPUs.
    pub fn utilization(&self, shape: &[u32], local_bsz: f64) -> f64 {
        let st = self.step_time(shape, local_bsz);
        crate::model::compute_share(st.step_s, st.sync_s)
    }

    /// Interpolation over the (nodes, GPUs) plane, then local batch.
    fn plane_lookup(&self, nodes: u32, gpus: u32, local_bsz: f64) -> StepTime {
        let at = |key: (u32, u32)| interp(&self.plane[&key], local_bsz);
        if let Some(c) = self.plane.get(&(nodes, gpus)) {
            let (s, y) = interp(c, local_bsz);
            return StepTime { step_s: s, sync_s: y };
        }
        let p = Point2::new(nodes as f64, gpus as f64);
        let weighted: Vec<((u32, u32), f64)> = match self.tri.locate(p) {
            PositionInTriangulation::OnVertex(v) => vec![(self.tri.vertex(v).data().key, 1.0)],
            PositionInTriangulation::OnFace(f) => {
                let vs = self.tri.face(f).vertices();
                let pts: Vec<Point2<f64>> = vs.iter().map(|v| v.position()).collect();
                let (a, b, c) = (pts[0], pts[1], pts[2]);
                let det = (b.y - c.y) * (a.x - c.x) + (c.x - b.x) * (a.y - c.y);
                let w0 = ((b.y - c.y) * (p.x - c.x) + (c.x - b.x) * (p.y - c.y)) / det;
                let w1 = ((c.y - a.y) * (p.x - c.x) + (a.x - c.x) * (p.y - c.y)) / det;
                vec![
                    (vs[0].data().key, w0),
                    (vs[1].data().key, w1),
                    (vs[2].data().key, 1.0 - w0 - w1),
                ]
            }
            PositionInTriangulation::OnEdge(e) => {
                let e = self.tri.directed_edge(e);
                let (a, b) = (e.from(), e.to());
                let (pa, pb) = (a.position(), b.position());
                let len2 = (pb.x - pa.x).powi(2) + (pb.y - pa.y).powi(2);
                let t =
                    (((p.x - pa.x) * (pb.x - pa.x) + (p.y - pa.y) * (pb.y - pa.y)) / len2).clamp(0.0, 1.0);
                vec![(a.data().key, 1.0 - t), (b.data().key, t)]
            }
            PositionInTriangulation::OutsideOfConvexHull(_) | PositionInTriangulation::NoTriangulation => {
                // Outside every measurement: use the nearest measured (nodes, GPUs).
                let key = self
                    .plane
                    .keys()
                    .min_by(|a, b| {
                        let d = |k: &&(u32, u32)| (k.0 as f64 - p.x).powi(2) + (k.1 as f64 - p.y).powi(2);
                        d(a).total_cmp(&d(b))
                    })
                    .copied()
                    .unwrap_or((1, 1));
                vec![(key, 1.0)]
            }
        };
        let (mut s, mut y) = (0.0, 0.0);
        for (key, w) in weighted {
            let (a, b) = at(key);
            s += w * a;
            y += w * b;
        }
        StepTime {
            step_s: s,
            sync_s: y.max(0.0).min(s),
        }
    }

    /// Gradient statistics at (0-based) `epoch` and total batch `batch`,
    /// interpolated linearly between the bracketing measured batch sizes.
    pub fn grad_params(&self, epoch: u32, batch: f64) -> GradParams {
        let row = |v: &Validation| (epoch as usize).min(v.progress.len() - 1);
        let vals = &self.validations;
        let first = &vals[0];
        let last = &vals[vals.len() - 1];
        let get = |v: &Validation| (v.grad_sqr[row(v)], v.grad_var[row(v)]);
        let (sqr, var) = if batch <= first.batch as f64 {
            get(first)
        } else if batch >= last.batch as f64 {
            get(last)
        } else {
            let i = vals.partition_point(|v| (v.batch as f64) <= batch);
            let (a, b) = (&vals[i - 1], &vals[i]);
            let t = (batch - a.batch as f64) / (b.batch as f64 - a.batch as f64);
            let (sa, va) = get(a);
            let (sb, vb) = get(b);
            (sa + t * (sb - sa), va + t * (vb - va))
        };
        GradParams { sqr, var }
    }

    /// AdaScale gain r(M) = (var + sqr)/(var/(M/M0) + sqr); 1 if undefined.
    pub fn gain(&self, epoch: u32, batch: f64) -> f64 {
        let g = self.grad_params(epoch, batch);
        let scale = batch / self.limits.init_batch as f64;
        let den = g.var / scale + g.sqr;
        if den <= 0.0 || !den.is_finite() {
            1.0
        } else {
            (g.var + g.sqr) / den
        }
    }

    /// Progress at the end of `epochs_done` epochs (0 → 0): the minimum over
    /// measured batch sizes, as the artifact defines epoch boundaries.
    pub fn progress_at_epoch(&self, epochs_done: u32) -> f64 {
        let i = (epochs_done as usize).min(self.epoch_progress.len() - 1);
        self.epoch_progress[i]
    }

    /// Progress needed to complete.
    pub fn completion_progress(&self) -> f64 {
        self.progress_at_epoch(self.max_epochs)
    }

    /// Whole epochs completed at this progress, capped at max_epochs.
    pub fn epoch_at(&self, progress: f64) -> u32 {
        let n = self.epoch_progress.partition_point(|&p| p <= progress);
        (n.saturating_sub(1) as u32).min(self.max_epochs)
    }

    /// Measured total batch sizes, ascending.
    pub fn measured_batches(&self) -> Vec<u32> {
        self.validations.iter().map(|v| v.batch).collect()
    }

    /// Every measured point of both throughput tables.
    pub fn measured_points(&self) -> Vec<MeasuredPoint> {
        self.points.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/pollux");

    fn read(app: &str, file: &str) -> Vec<u8> {
        std::fs::read(format!("{ROOT}/{app}/{file}")).unwrap()
    }

    fn load(app: &str) -> AppProfile {
        let mut vals = Vec::new();
        let mut names = Vec::new();
        for e in std::fs::read_dir(format!("{ROOT}/{app}")).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if let Some(m) = n.strip_prefix("validation-").and_then(|r| r.strip_suffix(".csv")) {
                names.push((m.parse::<u32>().unwrap(), n.clone()));
            }
        }
        for (m, n) in &names {
            vals.push((*m, n.as_str(), read(app, n)));
        }
        let p = read(app, "placements.csv");
        let s = read(app, "scalability.csv");
        AppProfile::parse(
            app,
            pollux_app_constants(app).unwrap(),
            ("placements.csv", p.as_slice()),
            ("scalability.csv", s.as_slice()),
            vals.iter().map(|(m, n, b)| (*m, *n, b.as_slice())).collect(),
        )
        .unwrap()
    }

    fn rows(app: &str, file: &str) -> Vec<Vec<String>> {
        let text = String::from_utf8(read(app, file)).unwrap();
        text.lines()
            .skip(1)
            .map(|l| l.split(',').map(String::from).collect())
            .collect()
    }

    #[test]
    fn exact_placements_reproduce_the_csv() {
        for app in POLLUX_APPS {
            let p = load(app);
            for r in rows(app, "placements.csv").iter().step_by(7) {
                let shape: Vec<u32> = r[0].bytes().map(|b| (b - b'0') as u32).collect();
                let st = p.step_time(&shape, r[1].parse().unwrap());
                // Several rows may share a (placement, bsz) only if duplicated; they do not here.
                assert!(
                    (st.step_s - r[2].parse::<f64>().unwrap()).abs() < 1e-12,
                    "{app} {r:?}"
                );
                assert!(
                    (st.sync_s - r[3].parse::<f64>().unwrap()).abs() < 1e-12,
                    "{app} {r:?}"
                );
            }
        }
    }

    #[test]
    fn rotation_midpoint_and_clamping() {
        let p = load("cifar10");
        assert_eq!(p.step_time(&[1, 2], 64.0), p.step_time(&[2, 1], 64.0));
        assert_eq!(p.step_time(&[1, 1, 2], 64.0), p.step_time(&[2, 1, 1], 64.0));
        // cifar10 placement 1: bsz 32 → 0.0427886962890625, bsz 45 → 0.05048525333404541.
        let mid = p.step_time(&[1], 38.5).step_s;
        assert!((mid - (0.0427886962890625 + 0.05048525333404541) / 2.0).abs() < 1e-12);
        assert_eq!(p.step_time(&[1], 1.0).step_s, 0.0427886962890625);
        let top = p.step_time(&[1], 1e9);
        let last = rows("cifar10", "placements.csv")
            .into_iter()
            .rev()
            .find(|r| r[0] == "1")
            .unwrap();
        assert_eq!(top.step_s, last[2].parse::<f64>().unwrap());
    }

    #[test]
    fn unmeasured_placements_interpolate_between_neighbours() {
        let p = load("cifar10");
        // (6 nodes, 6 GPUs) is a scalability row: reproduced exactly at a measured bsz.
        let r = rows("cifar10", "scalability.csv")
            .into_iter()
            .find(|r| r[0] == "6" && r[1] == "6")
            .unwrap();
        let st = p.step_time(&[1; 6], r[2].parse().unwrap());
        assert!((st.step_s - r[3].parse::<f64>().unwrap()).abs() < 1e-12);
        // 5 nodes × 2 GPUs is unmeasured; its triangle's corners are measured
        // (nodes, GPUs) points with 4 to 6 nodes, so it lies within their range.
        let five = p.step_time(&[2; 5], 128.0).step_s;
        let near: Vec<f64> = p
            .plane
            .keys()
            .filter(|k| (4..=6).contains(&k.0) && (5..=24).contains(&k.1))
            .map(|k| p.plane_lookup(k.0, k.1, 128.0).step_s)
            .collect();
        let lo = near.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = near.iter().cloned().fold(0.0, f64::max);
        assert!(five >= lo - 1e-12 && five <= hi + 1e-12, "{lo} <= {five} <= {hi}");
        // Far outside: nearest measured point, finite.
        let far = p.step_time(&[4; 40], 64.0);
        assert!(far.step_s.is_finite() && far.step_s > 0.0);
    }

    #[test]
    fn progress_and_efficiency_match_validation_files_to_the_row() {
        for app in POLLUX_APPS {
            let p = load(app);
            let m0 = p.limits.init_batch as f64;
            let batches = p.measured_batches();
            let files: Vec<Vec<Vec<String>>> = batches
                .iter()
                .map(|m| rows(app, &format!("validation-{m}.csv")))
                .collect();
            let n = files.iter().map(|f| f.len()).min().unwrap();
            for e in 1..=n {
                let want = files
                    .iter()
                    .map(|f| f[e - 1][0].parse::<f64>().unwrap())
                    .fold(f64::INFINITY, f64::min);
                assert_eq!(p.progress_at_epoch(e as u32), want, "{app} epoch {e}");
                assert_eq!(p.epoch_at(want), (e as u32).min(p.max_epochs), "{app}");
            }
            for (m, f) in batches.iter().zip(&files) {
                for (i, row) in f.iter().enumerate() {
                    let (sqr, var): (f64, f64) = (row[3].parse().unwrap(), row[4].parse().unwrap());
                    let g = p.grad_params(i as u32, *m as f64);
                    assert_eq!((g.sqr, g.var), (sqr, var), "{app} M={m} row {i}");
                    // E(M) = (φ + M0)/(φ + M) with φ = M0·var/sqr.
                    let phi = m0 * var / sqr;
                    // sqr = 0 (pure noise, some deepspeech2 rows): φ = ∞ and E → 1.
                    let e_hand = if phi.is_finite() {
                        (phi + m0) / (phi + *m as f64)
                    } else {
                        1.0
                    };
                    let e = p.gain(i as u32, *m as f64) / (*m as f64 / m0);
                    assert!(
                        (e - e_hand).abs() < 1e-12 * e_hand.max(1.0),
                        "{app} M={m} row {i}: {e} vs {e_hand}"
                    );
                }
            }
            assert_eq!(p.completion_progress(), p.progress_at_epoch(p.max_epochs));
        }
    }

    fn parse_err(placements: &str) -> String {
        let c = pollux_app_constants("bert").unwrap();
        let v = "progress,iteration,metric,grad_sqr,grad_var\n1,1,0.5,1,1\n2,2,0.6,1,1\n";
        let s = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n6,6,4,0.5,0.1\n";
        AppProfile::parse(
            "bert",
            c,
            ("placements.csv", placements.as_bytes()),
            ("scalability.csv", s.as_bytes()),
            vec![(12, "validation-12.csv", v.as_bytes())],
        )
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn parser_errors_name_file_line_field() {
        let h = "placement,local_bsz,step_time,sync_time\n";
        assert_eq!(
            parse_err(&format!("{h}1,4,abc,0.1\n")),
            "placements.csv:2:step_time: not a number: 'abc'"
        );
        assert_eq!(
            parse_err(&format!("{h}1,4,0.5,0.1\n1,8,NaN,0.1\n")),
            "placements.csv:3:step_time: must be finite, got NaN"
        );
        assert_eq!(
            parse_err(&format!("{h}1,4,-3,0.1\n")),
            "placements.csv:2:step_time: must be > 0, got -3"
        );
        assert_eq!(
            parse_err("placement,local_bsz,step_time\n1,4,0.5\n"),
            "placements.csv:1:sync_time: missing column"
        );
        let two = parse_err(&format!("{h}1,4,-3,0.1\n1,8,0.5,-1\n"));
        assert_eq!(two.lines().count(), 2, "{two}");
        assert!(
            two.contains("placements.csv:3:sync_time: must be >= 0, got -1"),
            "{two}"
        );
        assert!(parse_err(&format!("{h}10,4,0.5,0.1\n"))
            .contains("placements.csv:2:placement: must be digits 1-9"));
    }
}
