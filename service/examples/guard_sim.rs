//! The rollout guard, simulated: how often it aborts rollouts whose two sides fail
//! equally often (false alarms), for every setting of the grid, and how soon it
//! aborts real regressions (power).
//!
//! A rollout: outcomes arrive one at a time, each on the candidate with probability
//! `share` and failing with its side's rate; the guard
//! (`loadout::releases::guard::check`) is asked after every outcome, until it aborts
//! or `HORIZON` outcomes. False alarms: `ROLLOUTS` rollouts with equal rates for
//! each failure rate and share, judged under every `min_outcomes` and `alpha` of the
//! grid. One run of outcomes serves every guard of its (rate, share) cell: after each
//! outcome the statistic is read once (`check` with the most permissive guard), and
//! any guard it could abort is then asked itself, so each guard's abort is its own
//! `check`'s verdict. The upper bound is the one-sided 95 % Clopper-Pearson bound.
//! Seeded (splitmix64 per cell), so a run is reproducible whatever the threads.
//!
//! To be fast, outcomes after which no guard can abort skip `check`: the guard's
//! statistic is a mixture likelihood (never above the best fit of the two rates)
//! over the null's best fit (the pooled rate, when the candidate fares worse), so
//! it never exceeds the generalized likelihood ratio `GLR`, cheap to compute; below
//! the smallest threshold, `1/alpha` for the largest alpha, nothing can abort. Every
//! `check` the simulation does make confirms the bound (a violation is counted and
//! printed), and `every` as the third argument asks `check` after every outcome
//! with no shortcut, for the same table, slower.
//!
//! Tenants: a shared rollout is judged per tenant (`loadout::releases::guard::joint`):
//! one tenant's guard tripping holds it, two agreeing (or the only reporter) abort
//! it. The last tables run that rule on scenarios with several tenants, silent ones
//! among them: how often it holds or aborts equal-rate rollouts, and how soon it
//! stops real regressions, within a number of outcomes a side.
//!
//! `cargo run --release -p loadout --example guard_sim -- [ROLLOUTS] [HORIZON] [every]`
//! (defaults 1000 and 20000; `bench/guard_sim.sh`).

use std::num::NonZero;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use loadout::releases::guard::{Counts, Guard, Ruling, Verdict, check, joint};

const RATES: [f64; 6] = [0.005, 0.01, 0.02, 0.05, 0.10, 0.20];
const SHARES: [f64; 5] = [0.01, 0.05, 0.10, 0.25, 0.50];
/// 1 is the least the API accepts.
const MIN_OUTCOMES: [u64; 5] = [1, 5, 20, 50, 100];
/// 0.5 is the most the API accepts.
const ALPHAS: [f64; 3] = [0.5, 0.05, 0.01];

/// Regressions (and one better candidate) for the power rows: base rate,
/// candidate rate, share. Judged with `min_outcomes` 20 and `alpha` 0.05.
const POWER: [(f64, f64, f64); 9] = [
    (0.01, 0.02, 0.10),
    (0.01, 0.03, 0.10),
    (0.05, 0.10, 0.10),
    (0.10, 0.20, 0.50),
    (0.05, 0.065, 0.50),
    (0.01, 0.10, 0.10),
    (0.005, 0.05, 0.05),
    (0.20, 0.30, 0.10),
    (0.05, 0.025, 0.10),
];
const POWER_GUARD: Guard = Guard {
    min_outcomes: 20,
    alpha: 0.05,
};
/// Power rollouts stop at the abort; the horizon only bounds those that never do.
const POWER_HORIZON: u64 = 200_000;

/// splitmix64: a seeded, deterministic generator, enough for simulated outcomes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One outcome: on the candidate with probability `share`, failing at its side's rate.
    fn outcome(
        &mut self,
        base: &mut Counts,
        candidate: &mut Counts,
        rates: (f64, f64),
        share: f64,
    ) {
        let (side, rate) = if self.unit() < share {
            (candidate, rates.1)
        } else {
            (base, rates.0)
        };
        if self.unit() < rate {
            side.failures += 1;
        } else {
            side.successes += 1;
        }
    }
}

/// Ask `check` after every outcome, with no shortcut (the third argument `every`).
static EVERY: AtomicBool = AtomicBool::new(false);
/// Checks whose statistic exceeded the generalized likelihood ratio: must stay 0.
static ABOVE_GLR: AtomicU64 = AtomicU64::new(0);

/// `ln` of the generalized likelihood ratio of two rates against one, an upper
/// bound on the guard's statistic.
fn log_glr(base: Counts, candidate: Counts) -> f64 {
    let x_ln_x = |x: u64| {
        if x == 0 {
            0.0
        } else {
            x as f64 * (x as f64).ln()
        }
    };
    let fit = |c: Counts| x_ln_x(c.failures) + x_ln_x(c.successes) - x_ln_x(c.total());
    let pooled = Counts {
        successes: base.successes + candidate.successes,
        failures: base.failures + candidate.failures,
    };
    fit(base) + fit(candidate) - fit(pooled)
}

/// `check`, unless the generalized likelihood ratio shows that no guard with
/// a threshold of at least `least` can abort (then `None`).
fn statistic(
    guard: Guard,
    least: f64,
    base: Counts,
    candidate: Counts,
) -> Option<loadout::releases::guard::Decision> {
    let glr = log_glr(base, candidate);
    if !EVERY.load(Ordering::Relaxed) && glr < least.ln() - 1e-9 {
        return None;
    }
    let decision = check(guard, base, candidate);
    if decision.likelihood_ratio.ln() > glr + 1e-9 {
        ABOVE_GLR.fetch_add(1, Ordering::Relaxed);
    }
    Some(decision)
}

/// Every guard of the grid, in the order of [`MIN_OUTCOMES`] within [`ALPHAS`].
fn guards() -> Vec<Guard> {
    ALPHAS
        .iter()
        .flat_map(|&alpha| {
            MIN_OUTCOMES.iter().map(move |&min_outcomes| Guard {
                min_outcomes,
                alpha,
            })
        })
        .collect()
}

/// For one (rate, share) cell with equal rates: how many of `rollouts` each guard aborted.
fn false_alarms(rate: f64, share: f64, rollouts: u64, horizon: u64, seed: u64) -> Vec<u64> {
    let guards = guards();
    let probe = Guard {
        min_outcomes: 1,
        alpha: ALPHAS.iter().copied().fold(0.0, f64::max),
    };
    let least = 1.0 / probe.alpha;
    let mut rng = Rng(seed);
    let mut aborted = vec![0u64; guards.len()];
    for _ in 0..rollouts {
        let (mut base, mut candidate) = (Counts::default(), Counts::default());
        let mut done = vec![false; guards.len()];
        let mut left = guards.len();
        for _ in 0..horizon {
            rng.outcome(&mut base, &mut candidate, (rate, rate), share);
            let Some(probed) = statistic(probe, least, base, candidate) else {
                continue;
            };
            let statistic = probed.likelihood_ratio;
            if statistic < least * (1.0 - 1e-9) {
                continue;
            }
            let fewest = base.total().min(candidate.total());
            for (g, guard) in guards.iter().enumerate() {
                // A cheap pre-filter (a little generous, for rounding); the guard's
                // own `check` decides.
                let could = !done[g]
                    && fewest >= guard.min_outcomes
                    && statistic * guard.alpha >= 1.0 - 1e-9;
                if could && check(*guard, base, candidate).verdict == Verdict::Regression {
                    done[g] = true;
                    aborted[g] += 1;
                    left -= 1;
                }
            }
            if left == 0 {
                break;
            }
        }
    }
    aborted
}

/// For one power row: the outcomes (both sides) seen at each abort.
fn power(rates: (f64, f64), share: f64, rollouts: u64, seed: u64) -> Vec<u64> {
    let mut rng = Rng(seed);
    let mut aborts = Vec::new();
    for _ in 0..rollouts {
        let (mut base, mut candidate) = (Counts::default(), Counts::default());
        for seen in 1..=POWER_HORIZON {
            rng.outcome(&mut base, &mut candidate, rates, share);
            let decision = statistic(POWER_GUARD, 1.0 / POWER_GUARD.alpha, base, candidate);
            if decision.is_some_and(|d| d.verdict == Verdict::Regression) {
                aborts.push(seen);
                break;
            }
        }
    }
    aborts
}

/// A tenant of a [`Scenario`]: its share of the outcomes (0: it holds an agent
/// key and reports nothing) and its base and candidate failure rates.
#[derive(Clone, Copy)]
struct Tenant {
    weight: f64,
    rates: (f64, f64),
}

/// A shared rollout judged per tenant: `population` tenants hold agent keys (the
/// listed ones and silent others), the candidate has `share` of the subjects, the
/// guard is [`TENANT_GUARD`], and a rollout runs until each side has `per_side`
/// outcomes or the rule stops it.
struct Scenario {
    name: &'static str,
    population: usize,
    tenants: &'static [Tenant],
    share: f64,
    per_side: u64,
}

const TENANT_GUARD: Guard = Guard {
    min_outcomes: 100,
    alpha: 0.05,
};

const fn tenant(weight: f64, base: f64, candidate: f64) -> Tenant {
    Tenant {
        weight,
        rates: (base, candidate),
    }
}

/// Issue 51's scenario first: 10 % against 40 %, one tenant reporting, a second
/// with an agent key and nothing to say.
const SCENARIOS: [Scenario; 9] = [
    Scenario {
        name: "regression, one reporter, a silent tenant (issue 51)",
        population: 2,
        tenants: &[tenant(1.0, 0.10, 0.40)],
        share: 0.5,
        per_side: 300,
    },
    Scenario {
        name: "regression seen by one tenant, another reports a few equal outcomes",
        population: 2,
        tenants: &[tenant(0.95, 0.10, 0.40), tenant(0.05, 0.10, 0.10)],
        share: 0.5,
        per_side: 300,
    },
    Scenario {
        name: "regression seen by one tenant, another reports half, equal",
        population: 2,
        tenants: &[tenant(0.5, 0.10, 0.40), tenant(0.5, 0.10, 0.10)],
        share: 0.5,
        per_side: 300,
    },
    Scenario {
        name: "regression seen by both tenants",
        population: 2,
        tenants: &[tenant(0.5, 0.10, 0.40), tenant(0.5, 0.10, 0.40)],
        share: 0.5,
        per_side: 300,
    },
    Scenario {
        name: "smaller regression (5 % → 10 %), one reporter of three",
        population: 3,
        tenants: &[tenant(1.0, 0.05, 0.10)],
        share: 0.5,
        per_side: 3000,
    },
    Scenario {
        name: "equal rates 10 %, two reporting tenants",
        population: 2,
        tenants: &[tenant(0.5, 0.10, 0.10), tenant(0.5, 0.10, 0.10)],
        share: 0.5,
        per_side: 10_000,
    },
    Scenario {
        name: "equal rates 1 %, three tenants, uneven",
        population: 3,
        tenants: &[
            tenant(0.7, 0.01, 0.01),
            tenant(0.2, 0.01, 0.01),
            tenant(0.1, 0.01, 0.01),
        ],
        share: 0.1,
        per_side: 2_000,
    },
    Scenario {
        name: "equal rates 20 %, one reporter, a silent tenant",
        population: 2,
        tenants: &[tenant(1.0, 0.20, 0.20)],
        share: 0.25,
        per_side: 10_000,
    },
    Scenario {
        name: "equal rates 5 %, five tenants, different rates per tenant",
        population: 5,
        tenants: &[
            tenant(0.4, 0.02, 0.02),
            tenant(0.3, 0.05, 0.05),
            tenant(0.2, 0.10, 0.10),
            tenant(0.05, 0.20, 0.20),
            tenant(0.05, 0.01, 0.01),
        ],
        share: 0.5,
        per_side: 5_000,
    },
];

/// What one simulated shared rollout came to: the first ruling other than
/// `continue` and the outcomes (both sides) seen then.
fn shared_rollout(scenario: &Scenario, rng: &mut Rng) -> Option<(Ruling, u64)> {
    let mut sides = vec![(Counts::default(), Counts::default()); scenario.tenants.len()];
    let total: f64 = scenario.tenants.iter().map(|t| t.weight).sum();
    let threshold = scenario.population.max(scenario.tenants.len()) as f64 / TENANT_GUARD.alpha;
    let mut seen = 0;
    loop {
        let (base_total, candidate_total) = sides
            .iter()
            .fold((0, 0), |(b, c), (x, y)| (b + x.total(), c + y.total()));
        if base_total >= scenario.per_side && candidate_total >= scenario.per_side {
            return None;
        }
        let mut pick = rng.unit() * total;
        let mut who = scenario.tenants.len() - 1;
        for (i, t) in scenario.tenants.iter().enumerate() {
            if pick < t.weight {
                who = i;
                break;
            }
            pick -= t.weight;
        }
        let (base, candidate) = &mut sides[who];
        rng.outcome(base, candidate, scenario.tenants[who].rates, scenario.share);
        seen += 1;
        // Only the tenant that just reported can trip; when its GLR shows it cannot
        // (at the least threshold any split gives it), the ruling cannot change.
        let (base, candidate) = sides[who];
        let least = threshold.min(1.0 / TENANT_GUARD.alpha);
        if statistic(TENANT_GUARD, least, base, candidate).is_none() {
            continue;
        }
        let ruling = joint(TENANT_GUARD, scenario.population, &sides).ruling;
        if ruling != Ruling::Continue {
            return Some((ruling, seen));
        }
    }
}

/// For each scenario: rollouts held, aborted, and the outcomes seen at the first stop.
fn tenant_rows(rollouts: u64) -> Vec<(u64, u64, Vec<u64>)> {
    parallel(SCENARIOS.len(), |s| {
        let mut rng = Rng(5_000 + s as u64);
        let (mut held, mut aborted, mut at) = (0, 0, Vec::new());
        for _ in 0..rollouts {
            match shared_rollout(&SCENARIOS[s], &mut rng) {
                Some((Ruling::Hold, seen)) => {
                    held += 1;
                    at.push(seen);
                }
                Some((_, seen)) => {
                    aborted += 1;
                    at.push(seen);
                }
                None => {}
            }
        }
        at.sort_unstable();
        (held, aborted, at)
    })
}

/// The one-sided 95 % Clopper-Pearson upper bound on a rate seen `k` times in `n`:
/// the `p` at which `P(X <= k) = 0.05` for `X ~ Binomial(n, p)`, by bisection.
fn upper_bound(k: u64, n: u64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let cdf = |p: f64| {
        // ln P(X = i), from i = 0 up.
        let mut log = n as f64 * (-p).ln_1p();
        let mut sum = log.exp();
        for i in 0..k {
            log += ((n - i) as f64 / (i + 1) as f64).ln() + p.ln() - (-p).ln_1p();
            sum += log.exp();
        }
        sum
    };
    let (mut low, mut high) = (k as f64 / n as f64, 1.0);
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if cdf(middle) > 0.05 {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}

/// Runs `jobs` on every core, each job's result with its index.
fn parallel<T: Send>(jobs: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, NonZero::get)
        .min(jobs.max(1));
    let next = AtomicUsize::new(0);
    let (send, receive) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let send = send.clone();
            let (next, work) = (&next, &work);
            scope.spawn(move || {
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    if job >= jobs {
                        break;
                    }
                    if send.send((job, work(job))).is_err() {
                        break;
                    }
                }
            });
        }
    });
    drop(send);
    let mut results: Vec<(usize, T)> = receive.into_iter().collect();
    results.sort_by_key(|(job, _)| *job);
    results.into_iter().map(|(_, result)| result).collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rollouts: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let horizon: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    EVERY.store(args.next().is_some_and(|a| a == "every"), Ordering::Relaxed);
    let started = Instant::now();

    let cells: Vec<(f64, f64)> = RATES
        .iter()
        .flat_map(|&rate| SHARES.iter().map(move |&share| (rate, share)))
        .collect();
    let counts = parallel(cells.len(), |c| {
        let (rate, share) = cells[c];
        false_alarms(rate, share, rollouts, horizon, 1 + c as u64)
    });
    println!(
        "False alarms: the fraction of {rollouts} rollouts with equal failure rates that the guard \
         aborted, asked after every outcome up to {horizon} outcomes (95 % upper bound in brackets)."
    );
    for (a, alpha) in ALPHAS.iter().enumerate() {
        println!("\nalpha {alpha}\n");
        let mut header = "| failure rate | share |".to_owned();
        let mut rule = "|---|---|".to_owned();
        for min in MIN_OUTCOMES {
            header += &format!(" min_outcomes {min} |");
            rule += "---|";
        }
        println!("{header}\n{rule}");
        let (mut worst, mut worst_bound) = (0.0_f64, 0.0_f64);
        for (c, (rate, share)) in cells.iter().enumerate() {
            let mut row = format!("| {:.1} % | {:.0} % |", rate * 100.0, share * 100.0);
            for m in 0..MIN_OUTCOMES.len() {
                let g = a * MIN_OUTCOMES.len() + m;
                let k = counts[c][g];
                let fraction = k as f64 / rollouts as f64;
                let bound = upper_bound(k, rollouts);
                worst = worst.max(fraction);
                worst_bound = worst_bound.max(bound);
                row += &format!(" {fraction:.4} ({bound:.4}) |");
            }
            println!("{row}");
        }
        println!(
            "\nalpha {alpha}: the most any cell aborted is {worst:.4} (95 % upper bound {worst_bound:.4}); {}",
            if worst <= *alpha {
                "within alpha everywhere"
            } else {
                "ABOVE ALPHA"
            }
        );
    }

    let rows = parallel(POWER.len(), |p| {
        let (base, candidate, share) = POWER[p];
        power((base, candidate), share, rollouts, 1_000 + p as u64)
    });
    println!(
        "\nPower: {rollouts} rollouts each, min_outcomes {}, alpha {}, asked after every outcome up to \
         {POWER_HORIZON} outcomes; outcomes counted on both sides.\n",
        POWER_GUARD.min_outcomes, POWER_GUARD.alpha
    );
    println!(
        "| base rate | candidate rate | share | aborted | median outcomes to abort | 90th percentile |"
    );
    println!("|---|---|---|---|---|---|");
    for ((base, candidate, share), mut aborts) in POWER.into_iter().zip(rows) {
        aborts.sort_unstable();
        let quantile = |q: f64| {
            // Rollouts that never aborted count as later than any abort.
            let index = (q * rollouts as f64).ceil() as usize;
            match aborts.get(index.saturating_sub(1)) {
                Some(seen) => seen.to_string(),
                None => format!("> {POWER_HORIZON}"),
            }
        };
        println!(
            "| {:.1} % | {:.1} % | {:.0} % | {:.3} | {} | {} |",
            base * 100.0,
            candidate * 100.0,
            share * 100.0,
            aborts.len() as f64 / rollouts as f64,
            quantile(0.5),
            quantile(0.9),
        );
    }
    println!(
        "\nTenants: {rollouts} shared rollouts per scenario, each tenant's guard min_outcomes {}, \
         alpha {} split over the tenants with agent keys; the first hold or abort within the \
         outcomes a side.\n",
        TENANT_GUARD.min_outcomes, TENANT_GUARD.alpha
    );
    println!(
        "| scenario | tenants with keys | share | outcomes a side | held | aborted | held or aborted (95 % upper bound) | median outcomes to stop |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (scenario, (held, aborted, at)) in SCENARIOS.iter().zip(tenant_rows(rollouts)) {
        let stopped = held + aborted;
        let median = match at.get(at.len().saturating_sub(1) / 2) {
            Some(seen) if !at.is_empty() => seen.to_string(),
            _ => "-".to_owned(),
        };
        println!(
            "| {} | {} | {:.0} % | {} | {:.3} | {:.3} | {:.3} ({:.3}) | {median} |",
            scenario.name,
            scenario.population,
            scenario.share * 100.0,
            scenario.per_side,
            held as f64 / rollouts as f64,
            aborted as f64 / rollouts as f64,
            stopped as f64 / rollouts as f64,
            upper_bound(stopped, rollouts),
        );
    }
    let above = ABOVE_GLR.load(Ordering::Relaxed);
    let every = EVERY.load(Ordering::Relaxed);
    println!(
        "\n{:.0} s; check after every outcome: {}; statistics above the GLR bound: {above}{}",
        started.elapsed().as_secs_f64(),
        if every {
            "yes"
        } else {
            "whenever the GLR allows an abort"
        },
        if above == 0 || every {
            ""
        } else {
            " (the shortcut is not valid for this guard: rerun with `every`)"
        }
    );
}
