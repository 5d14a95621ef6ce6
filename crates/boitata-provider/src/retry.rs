//! When and how long to wait before asking a model API again.
//!
//! The HTTP providers retry a request that failed with 429 (rate limited), a 5xx
//! (server error, including Anthropic's 529 "overloaded") or a failed connection. The
//! wait grows exponentially from [`RetryPolicy::base_delay`] up to
//! [`RetryPolicy::max_delay`], with jitter so that many clients do not retry in step.
//! A `retry-after` header (seconds, or an HTTP date), or OpenAI's `retry-after-ms`,
//! replaces the computed wait, capped at [`RetryPolicy::max_delay`].

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// How often and how long to retry a request.
///
/// Only the waits between requests are bounded here; each request's own timeout is
/// the provider's `timeout` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many times a failed request is sent again (0: never). A request is thus
    /// made at most `max_retries + 1` times.
    pub max_retries: u32,
    /// The wait before the first retry; each later retry waits twice as long.
    pub base_delay: Duration,
    /// The longest wait between two requests, whatever the backoff or the server's
    /// `retry-after` say.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Four retries, waiting from 500 ms up to 30 s.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The default waits with `max_retries` retries.
    pub fn new(max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            ..RetryPolicy::default()
        }
    }

    /// A policy that never retries.
    pub fn never() -> Self {
        RetryPolicy::new(0)
    }

    /// The wait before retry number `retry` (0 for the first retry): `retry_after`
    /// when the server sent one, else the exponential backoff; never more than
    /// [`RetryPolicy::max_delay`].
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(wait) => wait.min(self.max_delay),
            None => self.backoff(retry),
        }
    }

    /// Exponential backoff with jitter: a random wait between half and all of
    /// `base_delay * 2^retry`, capped at [`RetryPolicy::max_delay`].
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(31));
        let ceiling = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let half = ceiling / 2;
        let spread = ceiling.saturating_sub(half).as_nanos();
        let jitter = match u64::try_from(spread) {
            Ok(0) | Err(_) => 0,
            Ok(spread) => random_u64() % (spread + 1),
        };
        half + Duration::from_nanos(jitter)
    }
}

/// A random number from the standard library's randomly seeded hasher keys (no
/// dependency needed for jitter; not for cryptography).
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, sent by OpenAI),
/// else `retry-after` as delay-seconds or an HTTP date (RFC 9110 §10.2.3) relative to
/// `now`. A date in the past means no wait. `None` when absent or unreadable.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        // A value too large for a Duration (1e30) is unreadable, not a panic.
        if let Ok(wait) = Duration::try_from_secs_f64(ms / 1000.0) {
            return Some(wait);
        }
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let at = SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_secs(u64::try_from(date.timestamp()).ok()?))?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_too_large_for_a_duration_is_ignored_not_a_panic() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "1e30")]), now),
            None
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1e30"), ("retry-after", "7")]),
                now
            ),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 07:28:00
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
                now
            ),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[]), now), None);
    }

    #[test]
    fn delays_grow_with_jitter_and_stay_capped() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        for _ in 0..50 {
            let first = policy.backoff(0);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = policy.backoff(2);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            assert!(policy.backoff(30) <= Duration::from_secs(1));
            assert!(policy.backoff(u32::MAX) >= Duration::from_millis(500));
        }
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(120))),
            Duration::from_secs(1)
        );
        assert_eq!(policy.delay(3, Some(Duration::ZERO)), Duration::ZERO);
    }
}
