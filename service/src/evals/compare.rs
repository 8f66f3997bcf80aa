//! A candidate revision against its base on the same cases: pass rates, how many
//! cases turned, and whether the candidate is worse by McNemar's exact test.
//!
//! The cases are paired (the same case, two revisions), so only the discordant
//! pairs carry evidence: `b` cases that passed on the base and fail on the
//! candidate, `c` the other way. Under "no difference" each discordant pair is a
//! fair coin, `b ~ Binomial(b + c, 1/2)`; the one-sided p-value that the
//! candidate is worse is `P(X >= b)`, computed exactly (in log space, so any
//! number of cases stays finite). Pure: no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::assertions::Verdict;

/// One case's outcome on both revisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paired {
    pub base_pass: bool,
    pub candidate_pass: bool,
}

/// The candidate against its base.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Comparison {
    pub cases: u32,
    pub base_passed: u32,
    pub candidate_passed: u32,
    /// 0 to 1; 0 when there are no cases.
    pub base_pass_rate: f64,
    pub candidate_pass_rate: f64,
    /// Cases that passed on the base and fail on the candidate.
    pub turned_fail: u32,
    /// Cases that failed on the base and pass on the candidate.
    pub turned_pass: u32,
    /// One-sided exact McNemar p-value that the candidate is worse (1 when no case turned).
    pub p_worse: f64,
    /// `p_worse < alpha`.
    pub worse: bool,
    pub alpha: f64,
}

/// One assertion type's (and metric's) passes on both revisions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AssertionCount {
    /// The type as written (`not-contains`).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    pub base_passed: u32,
    pub candidate_passed: u32,
    /// The paired verdicts counted.
    pub total: u32,
}

/// Compares `pairs` at significance `alpha`.
pub fn compare(pairs: &[Paired], alpha: f64) -> Comparison {
    let count = |f: &dyn Fn(&Paired) -> bool| {
        u32::try_from(pairs.iter().filter(|p| f(p)).count()).unwrap_or(u32::MAX)
    };
    let cases = u32::try_from(pairs.len()).unwrap_or(u32::MAX);
    let base_passed = count(&|p| p.base_pass);
    let candidate_passed = count(&|p| p.candidate_pass);
    let turned_fail = count(&|p| p.base_pass && !p.candidate_pass);
    let turned_pass = count(&|p| !p.base_pass && p.candidate_pass);
    let rate = |passed: u32| match cases {
        0 => 0.0,
        n => f64::from(passed) / f64::from(n),
    };
    let p_worse = upper_tail(turned_fail + turned_pass, turned_fail);
    Comparison {
        cases,
        base_passed,
        candidate_passed,
        base_pass_rate: rate(base_passed),
        candidate_pass_rate: rate(candidate_passed),
        turned_fail,
        turned_pass,
        p_worse,
        worse: p_worse < alpha,
        alpha,
    }
}

/// `P(X >= k)` for `X ~ Binomial(n, 1/2)`: the log of each term from the last by
/// `ln C(n, i+1) = ln C(n, i) + ln(n - i) - ln(i + 1)`, summed with the largest
/// factored out.
pub fn upper_tail(n: u32, k: u32) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    let half = n as f64 * std::f64::consts::LN_2;
    let mut log_choose = 0.0;
    let mut logs = Vec::with_capacity((n - k + 1) as usize);
    for i in 0..n {
        if i >= k {
            logs.push(log_choose - half);
        }
        log_choose += f64::from(n - i).ln() - f64::from(i + 1).ln();
    }
    logs.push(log_choose - half);
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logs.iter().map(|l| (l - top).exp()).sum();
    (top + sum.ln()).exp().clamp(0.0, 1.0)
}

/// Passes per assertion type and metric, over the same cases on both revisions
/// (`base[i]` and `candidate[i]` are one case's verdicts, paired by position; a
/// verdict without a partner is not counted). In type, then metric, order.
pub fn by_assertion(base: &[Vec<Verdict>], candidate: &[Vec<Verdict>]) -> Vec<AssertionCount> {
    let mut counts: BTreeMap<(String, Option<String>), (u32, u32, u32)> = BTreeMap::new();
    for (b, c) in base.iter().zip(candidate) {
        for (b, c) in b.iter().zip(c) {
            let entry = counts
                .entry((c.kind.clone(), c.metric.clone()))
                .or_default();
            entry.0 += u32::from(b.pass);
            entry.1 += u32::from(c.pass);
            entry.2 += 1;
        }
    }
    counts
        .into_iter()
        .map(
            |((kind, metric), (base_passed, candidate_passed, total))| AssertionCount {
                kind,
                metric,
                base_passed,
                candidate_passed,
                total,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(
        same_pass: usize,
        same_fail: usize,
        turned_fail: usize,
        turned_pass: usize,
    ) -> Vec<Paired> {
        let p = |base_pass, candidate_pass| Paired {
            base_pass,
            candidate_pass,
        };
        [
            (same_pass, p(true, true)),
            (same_fail, p(false, false)),
            (turned_fail, p(true, false)),
            (turned_pass, p(false, true)),
        ]
        .into_iter()
        .flat_map(|(n, pair)| std::iter::repeat_n(pair, n))
        .collect()
    }

    /// `P(X >= k)` summed directly with exact binomial coefficients (small n).
    fn direct(n: u32, k: u32) -> f64 {
        let choose =
            |n: u32, r: u32| (0..r).fold(1f64, |acc, i| acc * f64::from(n - i) / f64::from(i + 1));
        (k..=n).map(|i| choose(n, i)).sum::<f64>() / 2f64.powi(n as i32)
    }

    #[test]
    fn eight_turned_fail_against_one_is_significant() {
        let c = compare(&pairs(30, 5, 8, 1), 0.05);
        assert!((c.p_worse - 10.0 / 512.0).abs() < 1e-12, "{}", c.p_worse);
        assert!(c.worse);
        assert_eq!(
            (
                c.cases,
                c.base_passed,
                c.candidate_passed,
                c.turned_fail,
                c.turned_pass
            ),
            (44, 38, 31, 8, 1)
        );
        assert!((c.base_pass_rate - 38.0 / 44.0).abs() < 1e-12);
    }

    #[test]
    fn as_many_turned_each_way_is_not_worse() {
        let c = compare(&pairs(10, 0, 5, 5), 0.05);
        assert!(c.p_worse > 0.5 && !c.worse);
    }

    #[test]
    fn no_discordant_pair_gives_p_one() {
        assert_eq!(compare(&pairs(10, 3, 0, 0), 0.05).p_worse, 1.0);
        let empty = compare(&[], 0.05);
        assert_eq!(
            (empty.p_worse, empty.base_pass_rate, empty.worse),
            (1.0, 0.0, false)
        );
    }

    #[test]
    fn the_tail_agrees_with_direct_summation() {
        for n in 0..=60 {
            for k in 0..=n + 1 {
                let (fast, slow) = (upper_tail(n, k), direct(n, k).min(1.0));
                assert!(
                    (fast - slow).abs() <= 1e-9 * slow.max(1e-300) + 1e-15,
                    "n={n} k={k}: {fast} vs {slow}"
                );
            }
        }
    }

    #[test]
    fn a_thousand_discordant_pairs_stay_finite_and_ordered() {
        let mut last = 1.0;
        for k in 0..=1000 {
            let p = upper_tail(1000, k);
            assert!(
                p.is_finite() && (0.0..=1.0).contains(&p) && p <= last + 1e-12,
                "k={k}: {p}"
            );
            last = p;
        }
        assert!((upper_tail(1000, 500) - 0.5126125).abs() < 1e-6);
        assert!(upper_tail(1000, 1000) > 0.0);
    }

    #[test]
    fn assertions_are_counted_by_type_and_metric() {
        let v = |kind: &str, metric: Option<&str>, pass| Verdict {
            kind: kind.into(),
            metric: metric.map(Into::into),
            pass,
            score: 0.0,
            reason: String::new(),
        };
        let base = vec![
            vec![
                v("contains", None, true),
                v("llm-rubric", Some("tone"), true),
            ],
            vec![v("contains", None, false)],
        ];
        let candidate = vec![
            vec![
                v("contains", None, true),
                v("llm-rubric", Some("tone"), false),
            ],
            vec![v("contains", None, true)],
        ];
        let counts = by_assertion(&base, &candidate);
        assert_eq!(
            counts,
            vec![
                AssertionCount {
                    kind: "contains".into(),
                    metric: None,
                    base_passed: 1,
                    candidate_passed: 2,
                    total: 2
                },
                AssertionCount {
                    kind: "llm-rubric".into(),
                    metric: Some("tone".into()),
                    base_passed: 1,
                    candidate_passed: 0,
                    total: 1
                },
            ]
        );
    }
}
