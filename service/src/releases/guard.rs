//! The rollout guard: does the candidate fail more often than the base?
//!
//! Pure (no database): given each side's counts of successes and failures and
//! the guard's parameters, [`check`] says `continue` or `regression` and shows
//! its statistic. It is meant to be asked after every outcome, so it must stay
//! valid under continuous monitoring: a fixed-sample test checked after each
//! outcome raises far more false alarms than its nominal level.
//!
//! The test is a one-sided mixture sequential probability ratio test (mSPRT,
//! Robbins 1970; Johari, Pekelis and Walsh, "Always valid inference", 2017, as
//! Optimizely's stats engine uses it) on the difference of the two failure rates,
//! `D = candidate rate - base rate`, taken as normal with variance
//! `V = p(1-p)(1/n_base + 1/n_candidate)` (`p` the pooled failure rate, the
//! variance under the null of equal rates). The likelihood ratio of `D` under
//! an effect `θ` against `θ = 0` is mixed over a half-normal prior on `θ > 0`
//! (scale [`TAU`]), which integrates to
//!
//! ```text
//! Λ = 2 · sqrt(V / (V + τ²)) · exp(τ² D² / (2 V (V + τ²))) · Φ(τ D / sqrt(V (V + τ²)))
//! ```
//!
//! (the two-sided mixture `sqrt(V/(V+τ²)) exp(τ²D²/(2V(V+τ²)))` of the paper,
//! restricted to `θ > 0`). Under the null `Λ` is a non-negative martingale with
//! mean 1, so by Ville's inequality the chance that it *ever* reaches `1/α` is at
//! most `α`, however often it is looked at: the guard aborts when `Λ ≥ 1/α`. A
//! candidate that does better drives `Λ` towards 0, so it is never aborted for
//! being different. `V` is estimated from the counts (the usual plug-in), which is
//! why each side needs `min_outcomes` first; the simulation in the tests measures
//! the false alarms this leaves (README, "The guard").

use serde::Serialize;
use utoipa::ToSchema;

/// The prior scale of the difference in failure rates the mixture expects
/// (five points): the test is most powerful for regressions of about this size
/// and still valid for any other.
pub const TAU: f64 = 0.05;

/// One side's outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub successes: u64,
    pub failures: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.successes + self.failures
    }

    /// The failure rate, 0 with no outcomes.
    pub fn failure_rate(&self) -> f64 {
        match self.total() {
            0 => 0.0,
            n => self.failures as f64 / n as f64,
        }
    }
}

/// A rollout's guard: at least `min_outcomes` on each side before it judges, and
/// the false-alarm rate `alpha` it allows over the whole rollout (the rollout's
/// `releases::rollouts::Guard` checks both when it starts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guard {
    pub min_outcomes: u64,
    pub alpha: f64,
}

/// What the guard decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Not enough outcomes yet, or no evidence that the candidate is worse.
    Continue,
    /// The candidate fails more often than the base, at the guard's confidence.
    Regression,
}

/// The guard's answer with what it computed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Decision {
    pub verdict: Verdict,
    pub base_failure_rate: f64,
    pub candidate_failure_rate: f64,
    pub base_outcomes: u64,
    pub candidate_outcomes: u64,
    /// The mixture likelihood ratio Λ (0 before both sides have `min_outcomes`).
    pub likelihood_ratio: f64,
    /// `1/alpha`: Λ at or above it is a regression.
    pub threshold: f64,
}

impl Decision {
    /// One line for the rollout's history when it aborts.
    pub fn reason(&self) -> String {
        format!(
            "guard: candidate failure rate {:.3} over {} outcomes against base {:.3} over {}; \
             mixture likelihood ratio {:.1} >= 1/alpha = {:.1}",
            self.candidate_failure_rate,
            self.candidate_outcomes,
            self.base_failure_rate,
            self.base_outcomes,
            self.likelihood_ratio,
            self.threshold,
        )
    }
}

/// Judges the candidate against the base (see the module's documentation).
pub fn check(guard: Guard, base: Counts, candidate: Counts) -> Decision {
    let mut decision = Decision {
        verdict: Verdict::Continue,
        base_failure_rate: base.failure_rate(),
        candidate_failure_rate: candidate.failure_rate(),
        base_outcomes: base.total(),
        candidate_outcomes: candidate.total(),
        likelihood_ratio: 0.0,
        threshold: 1.0 / guard.alpha,
    };
    let min = guard.min_outcomes.max(1);
    if base.total() < min || candidate.total() < min || !(guard.alpha > 0.0 && guard.alpha < 1.0) {
        return decision;
    }
    let log_ratio = log_likelihood_ratio(base, candidate);
    decision.likelihood_ratio = log_ratio.exp();
    if log_ratio >= (1.0 / guard.alpha).ln() {
        decision.verdict = Verdict::Regression;
    }
    decision
}

/// `ln Λ`; minus infinity when the counts carry no evidence (no variance, or the
/// candidate no worse).
fn log_likelihood_ratio(base: Counts, candidate: Counts) -> f64 {
    let (nb, nc) = (base.total() as f64, candidate.total() as f64);
    let difference = candidate.failure_rate() - base.failure_rate();
    let pooled = (base.failures + candidate.failures) as f64 / (nb + nc);
    let variance = pooled * (1.0 - pooled) * (1.0 / nb + 1.0 / nc);
    if variance <= 0.0 || difference <= 0.0 {
        return f64::NEG_INFINITY;
    }
    let tau2 = TAU * TAU;
    let spread = variance + tau2;
    let z = TAU * difference / (variance * spread).sqrt();
    std::f64::consts::LN_2
        + 0.5 * (variance / spread).ln()
        + tau2 * difference * difference / (2.0 * variance * spread)
        + normal_cdf(z).ln()
}

/// Φ, the standard normal distribution function.
fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The complementary error function by Chebyshev fitting (Numerical Recipes'
/// `erfcc`, fractional error under 1.2e-7 everywhere): std has no `erf`, and this
/// precision is far beyond what a threshold of `1/alpha` needs.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let value = t * poly.exp();
    if x >= 0.0 { value } else { 2.0 - value }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    const GUARD: Guard = Guard {
        min_outcomes: 100,
        alpha: 0.05,
    };

    /// One simulated rollout: outcomes arrive one at a time, each on the candidate
    /// with probability `share`, failing at its side's rate; the guard is asked
    /// after every outcome. The number of outcomes seen when it aborted, if it did.
    fn rollout(
        rng: &mut Rng,
        guard: Guard,
        rates: (f64, f64),
        share: f64,
        horizon: u64,
    ) -> Option<u64> {
        let (mut base, mut candidate) = (Counts::default(), Counts::default());
        for seen in 1..=horizon {
            let (side, rate) = if rng.unit() < share {
                (&mut candidate, rates.1)
            } else {
                (&mut base, rates.0)
            };
            if rng.unit() < rate {
                side.failures += 1;
            } else {
                side.successes += 1;
            }
            if check(guard, base, candidate).verdict == Verdict::Regression {
                return Some(seen);
            }
        }
        None
    }

    #[test]
    fn the_normal_distribution_function_matches_its_table() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.644_854) - 0.05).abs() < 1e-6);
        assert!((normal_cdf(3.090_232) - 0.999).abs() < 1e-6);
    }

    #[test]
    fn nothing_is_judged_before_each_side_has_its_minimum() {
        let base = Counts {
            successes: 90,
            failures: 9,
        };
        let candidate = Counts {
            successes: 0,
            failures: 99,
        };
        let decision = check(GUARD, base, candidate);
        assert_eq!(decision.verdict, Verdict::Continue);
        assert_eq!(decision.likelihood_ratio, 0.0);
    }

    #[test]
    fn a_candidate_failing_twice_as_often_is_a_regression_with_its_statistic() {
        let base = Counts {
            successes: 900,
            failures: 100,
        };
        let candidate = Counts {
            successes: 800,
            failures: 200,
        };
        let decision = check(GUARD, base, candidate);
        assert_eq!(decision.verdict, Verdict::Regression);
        assert!(decision.likelihood_ratio >= 20.0, "{decision:?}");
        assert!(
            decision
                .reason()
                .contains("candidate failure rate 0.200 over 1000"),
            "{}",
            decision.reason()
        );
    }

    #[test]
    fn a_candidate_failing_less_often_is_never_a_regression() {
        let base = Counts {
            successes: 800,
            failures: 200,
        };
        let candidate = Counts {
            successes: 900,
            failures: 100,
        };
        assert_eq!(check(GUARD, base, candidate).verdict, Verdict::Continue);
        let all_good = Counts {
            successes: 1000,
            failures: 0,
        };
        assert_eq!(check(GUARD, base, all_good).verdict, Verdict::Continue);
    }

    #[test]
    fn sides_without_any_failure_carry_no_evidence() {
        let clean = Counts {
            successes: 500,
            failures: 0,
        };
        assert_eq!(check(GUARD, clean, clean).verdict, Verdict::Continue);
    }

    #[test]
    fn a_planted_higher_failure_rate_is_caught_in_every_simulated_rollout() {
        let mut rng = Rng(26);
        let caught: Vec<u64> = (0..200)
            .filter_map(|_| rollout(&mut rng, GUARD, (0.10, 0.20), 0.5, 4_000))
            .collect();
        assert_eq!(
            caught.len(),
            200,
            "a 20 % candidate against a 10 % base went unnoticed"
        );
        let mean = caught.iter().sum::<u64>() as f64 / caught.len() as f64;
        println!(
            "10 % against 20 %: caught in 200 of 200 rollouts, after {mean:.0} outcomes on average"
        );
    }

    #[test]
    fn a_better_candidate_is_never_aborted_in_simulated_rollouts() {
        let mut rng = Rng(27);
        let aborted = (0..200)
            .filter(|_| rollout(&mut rng, GUARD, (0.20, 0.10), 0.5, 4_000).is_some())
            .count();
        assert_eq!(aborted, 0);
    }

    /// Issue 26's false-alarm measurement: 1,000 rollouts with equal failure rates,
    /// the guard asked after every one of 4,000 outcomes, abort no more often than
    /// `alpha`. Prints the measured rate (README, "The guard").
    #[test]
    fn equal_rates_abort_no_more_often_than_alpha_over_a_thousand_rollouts() {
        for (rate, share, seed) in [(0.10, 0.5, 1), (0.10, 0.1, 2), (0.30, 0.5, 3)] {
            let mut rng = Rng(seed);
            let runs = 1_000;
            let aborted = (0..runs)
                .filter(|_| rollout(&mut rng, GUARD, (rate, rate), share, 4_000).is_some())
                .count();
            let measured = aborted as f64 / runs as f64;
            println!(
                "equal failure rates {rate}, candidate share {share}: {aborted} of {runs} rollouts aborted \
                 ({measured:.3}; alpha {}, min_outcomes {}, 4,000 outcomes each, checked after every one)",
                GUARD.alpha, GUARD.min_outcomes
            );
            assert!(
                measured <= GUARD.alpha,
                "false-alarm rate {measured} above alpha"
            );
        }
    }
}
