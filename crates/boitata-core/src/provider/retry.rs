//! Bounded retry with backoff for 429 and 5xx (placeholder: filled in by the providers work).

/// How often and how long to retry a request.
#[derive(Debug, Clone)]
pub struct RetryPolicy;
