//! The search loop: breeding a generation's children from its parents,
//! keeping the new ones, evaluating them and letting NSGA-II choose the
//! next parents, for a fixed number of generations; natively, on two
//! threads when a round is large enough, drawing exactly what one thread
//! would. Apart from the evaluation context because it is the part that
//! moves genomes, buffers and threads around, not the part that knows
//! what a genome is worth.

use std::collections::HashMap;
use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::nsga::{self, select_survivors};
use super::seen::{genome_hash, Seen};
use super::{Ctx, GaConfig, Scratch, Terms, Tournament};
use crate::speedup::SpeedupCache;

/// One child as [`Ctx::breed`] made it: its cells, and where in the stream
/// the node orders its repair may walk begin.
pub(super) struct Kid {
    genome: Vec<u32>,
    orders_at: u128,
}

impl Ctx<'_> {
    /// One try of a generation: two parents by binary tournament on fitness,
    /// a cut between jobs, the two crossed children mutated, and the stream
    /// moved past the node orders their repairs may walk (each child keeps
    /// where they begin). Every draw of a try is here, in the stream's
    /// order; repairing, deduplicating and evaluating draw nothing (repair
    /// draws orders again on a second stream).
    pub(super) fn breed(
        &self,
        pop: &Population,
        cfg: &GaConfig,
        rng: &mut ChaCha8Rng,
        s: &mut Scratch,
        spare: &mut Vec<Vec<u32>>,
    ) -> [Kid; 2] {
        let (genomes, objs) = (&pop.genomes, &pop.objs);
        let pick = |rng: &mut ChaCha8Rng| {
            // Indices drawn as u32: a usize range draws differently on
            // 32-bit wasm than on 64-bit hosts, and the browser must
            // reproduce the CLI's plans.
            let a = rng.gen_range(0..genomes.len() as u32) as usize;
            let b = rng.gen_range(0..genomes.len() as u32) as usize;
            let first = match cfg.tournament {
                Tournament::Fitness => objs[a].0 >= objs[b].0,
                Tournament::DominanceCrowding => {
                    nsga::tournament((objs[a], pop.crowding[a]), (objs[b], pop.crowding[b]))
                        .unwrap_or_else(|| rng.gen::<bool>())
                }
            };
            if first {
                a
            } else {
                b
            }
        };
        let (a, b) = (pick(rng), pick(rng));
        // pymoo crosses a pair with probability `crossover_prob`, else the
        // children are the parents' copies (then mutated).
        let crossed = cfg.crossover_prob >= 1.0 || rng.gen_bool(cfg.crossover_prob);
        // Jobs before the cut come from the first parent. The artifact's
        // cut is in 0..jobs over rows sorted by attained service.
        let cut = match (crossed, cfg.cut_in_priority_order) {
            (false, _) => 0,
            (true, true) => rng.gen_range(0..self.jobs as u32) as usize,
            (true, false) => rng.gen_range(0..=self.jobs as u32) as usize,
        };
        let nodes = self.nodes;
        let by_priority = cfg.cut_in_priority_order;
        // Buffers of genomes the search let go of, or new ones.
        let mut cross = |x: &[u32], y: &[u32]| {
            let mut c = spare.pop().unwrap_or_default();
            c.clear();
            c.reserve_exact(self.cells());
            if by_priority {
                for (j, &r) in self.rank.iter().enumerate() {
                    let src = if r < cut { x } else { y };
                    c.extend_from_slice(&src[j * nodes..(j + 1) * nodes]);
                }
            } else {
                c.extend_from_slice(&x[..cut * nodes]);
                c.extend_from_slice(&y[cut * nodes..]);
            }
            c
        };
        let kids = [cross(&genomes[a], &genomes[b]), cross(&genomes[b], &genomes[a])];
        kids.map(|mut genome| {
            self.mutate(&mut genome, cfg, rng, s);
            let orders_at = rng.get_word_pos();
            self.skip_orders(rng, s);
            Kid { genome, orders_at }
        })
    }
}

/// A generation's parents and their (fitness, utility).
pub(super) struct Population {
    pub(super) genomes: Vec<Vec<u32>>,
    objs: Vec<(f64, f64)>,
    /// [`genome_hash`] of each genome, kept from when it was a child.
    hashes: Vec<u64>,
    /// Each parent's crowding distance in its front, as survival found it
    /// (the tournament's second key); empty for a brood's children.
    crowding: Vec<f64>,
}

impl Population {
    /// The first generation's parents, ranked as pymoo's initial (dummy)
    /// survival ranks them, so their tournaments have crowding distances.
    pub(super) fn new(genomes: Vec<Vec<u32>>, objs: Vec<(f64, f64)>) -> Self {
        let hashes = genomes.iter().map(|g| genome_hash(g)).collect();
        let ranked = select_survivors(&objs, objs.len(), true, &mut nsga::Scratch::default());
        let mut crowding = vec![0.0; objs.len()];
        for (&i, &c) in ranked.keep.iter().zip(&ranked.crowding) {
            crowding[i] = c;
        }
        Population {
            genomes,
            objs,
            hashes,
            crowding,
        }
    }
}

/// One generation's children as they come: repaired, kept if new,
/// evaluated, in the order tried (as one thread would).
pub(super) struct Brood<'p> {
    parents: &'p [Vec<u32>],
    seen: Seen,
    children: Vec<Vec<u32>>,
    objs: Vec<(f64, f64)>,
    hashes: Vec<u64>,
    /// Duplicates' buffers, for [`Ctx::breed`] to reuse.
    pub(super) spare: Vec<Vec<u32>>,
}

impl<'p> Brood<'p> {
    pub(super) fn new(pop: &'p Population, spare: Vec<Vec<u32>>) -> Self {
        let parents = &pop.genomes[..];
        let mut b = Brood {
            parents,
            seen: Seen {
                first: HashMap::with_capacity_and_hasher(2 * parents.len() + 2, Default::default()),
                overflow: Vec::new(),
            },
            children: Vec::with_capacity(parents.len() + 1),
            objs: Vec::with_capacity(parents.len() + 1),
            hashes: Vec::with_capacity(parents.len() + 1),
            spare,
        };
        for (i, (g, &h)) in parents.iter().zip(&pop.hashes).enumerate() {
            b.insert(g, h, i as u32);
        }
        b
    }

    fn genome(&self, id: u32) -> &[u32] {
        let i = id as usize;
        match self.parents.get(i) {
            Some(g) => g,
            None => &self.children[i - self.parents.len()],
        }
    }

    /// Whether `g` is new; if so it is known as `id` from now on.
    fn insert(&mut self, g: &[u32], h: u64, id: u32) -> bool {
        use std::collections::hash_map::Entry;
        let other = match self.seen.first.entry(h) {
            Entry::Vacant(e) => {
                e.insert(id);
                return true;
            }
            Entry::Occupied(e) => *e.get(),
        };
        if self.genome(other) == g {
            return false;
        }
        if self
            .seen
            .overflow
            .iter()
            .any(|&(x, i)| x == h && self.genome(i) == g)
        {
            return false;
        }
        self.seen.overflow.push((h, id));
        true
    }

    /// Repairs a child from [`Ctx::breed`], keeps and evaluates it if new.
    pub(super) fn take(
        &mut self,
        ctx: &Ctx,
        kid: Kid,
        replay: &mut ChaCha8Rng,
        cache: &mut [SpeedupCache],
        terms: &mut [Terms],
        s: &mut Scratch,
    ) {
        let Kid {
            genome: mut kid,
            orders_at,
        } = kid;
        ctx.repair_with(&mut kid, orders_at, replay, s);
        let id = (self.parents.len() + self.children.len()) as u32;
        let h = genome_hash(&kid);
        if self.insert(&kid, h, id) {
            self.objs.push(ctx.evaluate(&kid, cache, terms));
            self.children.push(kid);
            self.hashes.push(h);
        } else {
            self.spare.push(kid);
        }
    }

    pub(super) fn full(&self) -> bool {
        self.children.len() >= self.parents.len()
    }

    pub(super) fn done(self) -> Bred {
        Bred {
            children: Population {
                genomes: self.children,
                objs: self.objs,
                hashes: self.hashes,
                crowding: Vec::new(),
            },
            spare: self.spare,
        }
    }
}

/// The population after the search, and why it stopped early, if it did.
pub(super) struct Evolved {
    pub(super) pop: Vec<Vec<u32>>,
    pub(super) objs: Vec<(f64, f64)>,
    pub(super) stopped: Option<String>,
}

/// A generation's children, and buffers to reuse.
pub(super) struct Bred {
    children: Population,
    spare: Vec<Vec<u32>>,
}

/// The generations: `breed_generation` makes each one's children and their
/// objectives (up to 4 × population tries, until population new genomes)
/// from the parents and buffers to reuse, NSGA-II keeps the population's
/// size. `deadline(gen)` says why to stop before `gen`.
pub(super) fn evolve(
    cfg: &GaConfig,
    pop: Population,
    cache: &mut [SpeedupCache],
    terms: &mut [Terms],
    deadline: impl Fn(usize) -> Option<String>,
    mut breed_generation: impl FnMut(&Arc<Population>, Vec<Vec<u32>>, &mut [SpeedupCache], &mut [Terms]) -> Bred,
) -> Evolved {
    let mut scratch = nsga::Scratch::default();
    let mut pop = Arc::new(pop);
    let mut spare = Vec::new();
    let mut stopped = None;
    for gen in 0..cfg.generations {
        if let Some(why) = deadline(gen) {
            stopped = Some(why);
            break;
        }
        let bred = breed_generation(&pop, std::mem::take(&mut spare), cache, terms);
        let Population {
            mut genomes,
            mut objs,
            mut hashes,
            ..
        } = Arc::into_inner(pop).expect("a generation's breeders have let go of its parents");
        genomes.extend(bred.children.genomes);
        objs.extend(bred.children.objs);
        hashes.extend(bred.children.hashes);
        spare = bred.spare;
        let pymoo = cfg.tournament == Tournament::DominanceCrowding;
        let kept = select_survivors(&objs, cfg.population, pymoo, &mut scratch);
        let keep = &kept.keep;
        // Survivors are distinct indices: move them out instead of cloning.
        pop = Arc::new(Population {
            genomes: keep.iter().map(|&i| std::mem::take(&mut genomes[i])).collect(),
            objs: keep.iter().map(|&i| objs[i]).collect(),
            hashes: keep.iter().map(|&i| hashes[i]).collect(),
            crowding: kept.crowding,
        });
        spare.extend(genomes.into_iter().filter(|g| g.capacity() > 0));
    }
    let Population { genomes, objs, .. } = Arc::into_inner(pop).expect("no breeder is left");
    Evolved {
        pop: genomes,
        objs,
        stopped,
    }
}

/// Whether to breed on a second thread (natively only).
pub(super) fn pipelined(jobs: usize, nodes: usize) -> bool {
    jobs * nodes >= PIPELINE_MIN_CELLS
}

/// Rounds of fewer jobs × nodes breed on one thread, sparing a thread for
/// a search that is over in microseconds. Workload-6 takes as long from
/// 1 to 32 (37.5 against 37.7-38.4 s) and longer at 128 (41.3 s).
const PIPELINE_MIN_CELLS: usize = 32;

/// [`evolve`] with the draws on a second thread: it breeds tries ahead
/// (every draw of a try is in [`Ctx::breed`]) while this thread repairs,
/// deduplicates and evaluates them in order. When this thread has its
/// generation's children it tells the breeder which try was the last used;
/// the breeder rewinds its stream to just after that try (ChaCha's word
/// position), so the next generation draws exactly what one thread would:
/// the same plans for a seed, on two cores.
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn evolve_pipelined(
    ctx: &Ctx,
    cfg: &GaConfig,
    pop: Population,
    mut rng: ChaCha8Rng,
    cache: &mut [SpeedupCache],
    terms: &mut [Terms],
    deadline: impl Fn(usize) -> Option<String>,
) -> Evolved {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    // This thread repairs, drawing node orders again from a second stream.
    let mut replay = rng.clone();

    /// Hand-overs are a few µs apart and both threads are busy, so a
    /// waiting thread spins a while before it sleeps: waking a sleeper
    /// costs more than a try. Measured on workload-6 (2 cores): 2^11
    /// polls 37.4-38.0 s; 2^9 38.7 s; 2^14 44-53 s (long spins starve the
    /// other thread when the simulator's pool threads wake).
    const SPINS: u32 = 1 << 11;
    fn recv<T>(rx: &mpsc::Receiver<T>) -> Result<T, mpsc::RecvError> {
        for _ in 0..SPINS {
            match rx.try_recv() {
                Ok(v) => return Ok(v),
                Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
                Err(mpsc::TryRecvError::Disconnected) => return Err(mpsc::RecvError),
            }
        }
        rx.recv()
    }
    fn send<T>(tx: &mpsc::SyncSender<T>, mut v: T) -> Result<(), mpsc::SendError<T>> {
        for _ in 0..SPINS {
            match tx.try_send(v) {
                Ok(()) => return Ok(()),
                Err(mpsc::TrySendError::Full(back)) => {
                    v = back;
                    std::hint::spin_loop();
                }
                Err(mpsc::TrySendError::Disconnected(back)) => return Err(mpsc::SendError(back)),
            }
        }
        tx.send(v)
    }
    /// A try's two children, or: the breeder has let go of the parents.
    enum Msg {
        Try([Kid; 2]),
        Done,
    }
    const RUNNING: usize = usize::MAX;
    let stop_after = AtomicUsize::new(RUNNING);
    let (gen_tx, gen_rx) = mpsc::channel::<(Arc<Population>, Vec<Vec<u32>>)>();
    let (try_tx, try_rx) = mpsc::sync_channel::<Msg>(8);
    std::thread::scope(|scope| {
        let stop_after = &stop_after;
        scope.spawn(move || {
            let mut s = Scratch::default();
            let mut after: Vec<u128> = Vec::new();
            while let Ok((pop, mut spare)) = recv(&gen_rx) {
                after.clear();
                let tries = 4 * pop.genomes.len();
                loop {
                    let stop = stop_after.load(Ordering::Acquire);
                    if stop != RUNNING {
                        if rng.get_word_pos() != after[stop] {
                            rng.set_word_pos(after[stop]);
                        }
                        break;
                    }
                    if after.len() == tries {
                        std::hint::spin_loop();
                        continue;
                    }
                    let kids = ctx.breed(&pop, cfg, &mut rng, &mut s, &mut spare);
                    after.push(rng.get_word_pos());
                    if send(&try_tx, Msg::Try(kids)).is_err() {
                        return;
                    }
                }
                drop(pop);
                if send(&try_tx, Msg::Done).is_err() {
                    return;
                }
            }
        });
        let mut s = Scratch::default();
        let evolved = evolve(cfg, pop, cache, terms, deadline, |pop, spare, cache, terms| {
            let tries = 4 * pop.genomes.len();
            stop_after.store(RUNNING, Ordering::Release);
            // The buffers go to the breeder; duplicates come back next time.
            gen_tx
                .send((Arc::clone(pop), spare))
                .expect("the breeder runs while evolve does");
            let mut brood = Brood::new(pop, Vec::new());
            let mut used = 0;
            loop {
                match recv(&try_rx).expect("the breeder answers every generation") {
                    Msg::Try(_) if used == tries || brood.full() => {}
                    Msg::Try(kids) => {
                        for kid in kids {
                            brood.take(ctx, kid, &mut replay, cache, terms, &mut s);
                        }
                        used += 1;
                        if used == tries || brood.full() {
                            stop_after.store(used - 1, Ordering::Release);
                        }
                    }
                    Msg::Done => return brood.done(),
                }
            }
        });
        drop(gen_tx);
        evolved
    })
}

#[cfg(target_arch = "wasm32")]
pub(super) fn evolve_pipelined(
    _: &Ctx,
    _: &GaConfig,
    _: Population,
    _: ChaCha8Rng,
    _: &mut [SpeedupCache],
    _: &mut [Terms],
    _: impl Fn(usize) -> Option<String>,
) -> Evolved {
    unreachable!("pipelined() is false on wasm32")
}

#[cfg(test)]
mod tests {
    use crate::planners::pollux_ga::{GaConfig, PolluxGa};
    use crate::testutil::{job, model, round, running};
    use crate::{Limits, Planner};
    use gpuplan_core::{validate, Interference};

    /// The two-thread search is the one-thread search, draw for draw: the
    /// same plans, fitness and final population over consecutive rounds
    /// (each warm-started from the last), with pinned jobs, both
    /// interference rules, several seeds and populations small enough that
    /// generations often run out of tries.
    #[test]
    fn two_threads_search_as_one_does() {
        let rounds = |interference| {
            (0..3)
                .map(|k| {
                    let mut jobs: Vec<gpuplan_core::RoundJob> = (0..9)
                        .map(|i| {
                            let mut j = job(i, 1 + i % 4, 10.0 * f64::from(i));
                            j.model = Some(model());
                            j.state.max_gpus_used = 1 + (i + k) % 5;
                            j
                        })
                        .collect();
                    jobs[0] = running(jobs[0].clone(), &[(0, 2), (1, 2)]);
                    jobs[1] = running(jobs[1].clone(), &[(2, 3)]);
                    jobs[2] = running(jobs[2].clone(), &[(3, 1)]);
                    jobs[2].preemptible = false;
                    jobs.truncate(6 + k as usize);
                    round("6x4", jobs, interference)
                })
                .collect::<Vec<_>>()
        };
        for interference in [Interference::Avoid, Interference::Allow] {
            for (seed, population) in [(0, 12), (3, 30), (11, 5)] {
                let cfg = GaConfig {
                    population,
                    generations: 25,
                    ..Default::default()
                };
                let lim = Limits {
                    seed,
                    time_limit_s: 1e9,
                    ..Default::default()
                };
                let (mut one, mut two) = (PolluxGa::new(cfg), PolluxGa::new(cfg));
                one.pipeline = Some(false);
                two.pipeline = Some(true);
                for r in rounds(interference) {
                    let (a, b) = (one.plan(&r, &lim).unwrap(), two.plan(&r, &lim).unwrap());
                    validate(&r, &b).unwrap();
                    assert_eq!(
                        a.allocations, b.allocations,
                        "seed {seed}, population {population}"
                    );
                    assert_eq!(one.fitness.to_bits(), two.fitness.to_bits());
                    assert_eq!(one.last, two.last);
                }
            }
        }
    }
}
