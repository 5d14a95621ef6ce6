//! The DNS-rebinding and cross-site guard, applied to every request, with or without
//! a token.
//!
//! A web page on another site can make a browser send requests to a server on
//! localhost: directly (cross-site; the page cannot read the answers, but a `POST`
//! still lands) or through a name it controls that it re-points at 127.0.0.1 (DNS
//! rebinding; then it can read them too). Two checks stop both:
//!
//! - **`Host`** must be an IP address literal (a rebinding page cannot make the
//!   browser send one: its requests carry the attacker's name), `localhost`, or a name
//!   given with `--allowed-host` (the name a reverse proxy serves the UI under).
//! - **`Origin`**, when a browser sends one, must be this server: its `host[:port]`
//!   equals the `Host` header (the page was served from here), or its host is a name
//!   given with `--allowed-host`. `Origin: null` (sandboxed frames, `file:` pages) is
//!   refused.
//!
//! Refusals are `403` with a JSON error naming the header.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::AppError;

/// Which `Host` names the server answers to, besides IP literals and `localhost`.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    allowed_names: Vec<String>,
}

impl HostPolicy {
    /// A policy that also accepts `names` (host names, without port; compared
    /// case-insensitively).
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        HostPolicy {
            allowed_names: names
                .into_iter()
                .map(|n| normalize_name(n.as_ref()))
                .filter(|n| !n.is_empty())
                .collect(),
        }
    }

    /// The extra names accepted.
    pub fn allowed_names(&self) -> &[String] {
        &self.allowed_names
    }

    /// Checks the request's `Host` and `Origin`.
    ///
    /// # Errors
    /// [`AppError::BadRequest`] without a `Host`; [`AppError::Forbidden`] for a host or
    /// origin this server does not answer.
    pub fn check(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), AppError> {
        let host = match headers.get(header::HOST) {
            Some(value) => value
                .to_str()
                .map_err(|_| AppError::BadRequest("the Host header is not ASCII".to_owned()))?
                .to_owned(),
            None => uri
                .authority()
                .map(|a| a.as_str().to_owned())
                .ok_or_else(|| AppError::BadRequest("the request has no Host header".to_owned()))?,
        };
        let (host_name, _) = split_authority(&host);
        if !self.host_allowed(&host_name) {
            return Err(AppError::Forbidden(format!(
                "host {host_name:?} is not served here (DNS-rebinding guard); to serve it, start the server with --allowed-host {host_name}"
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("null");
            if !self.origin_allowed(origin, &host) {
                return Err(AppError::Forbidden(format!(
                    "cross-origin request from {origin:?} refused"
                )));
            }
        }
        Ok(())
    }

    fn host_allowed(&self, name: &str) -> bool {
        name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || self.allowed_names.iter().any(|n| n == name)
    }

    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        let (origin_name, origin_port) = split_authority(authority);
        let (host_name, host_port) = split_authority(host);
        let same = origin_name == host_name
            && origin_port.unwrap_or(default_port) == host_port.unwrap_or(default_port);
        same || self.allowed_names.contains(&origin_name)
    }
}

/// Lower-cases a host name and drops a trailing dot and IPv6 brackets.
fn normalize_name(name: &str) -> String {
    let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
    name.strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .map(str::to_owned)
        .unwrap_or(name)
}

/// Splits `host[:port]` (or `[v6]:port`) into a normalized name and the port.
fn split_authority(authority: &str) -> (String, Option<u16>) {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((v6, tail)) => (
                normalize_name(v6),
                tail.strip_prefix(':').and_then(|p| p.parse().ok()),
            ),
            None => (normalize_name(authority), None),
        };
    }
    match authority.rsplit_once(':') {
        // Exactly one colon: name:port. More than one: a bare IPv6 address.
        Some((name, port)) if !name.contains(':') => (normalize_name(name), port.parse().ok()),
        _ => (normalize_name(authority), None),
    }
}

/// Middleware: applies its [`HostPolicy`] (its state, and all it needs).
pub(crate) async fn check_host(
    State(policy): State<Arc<HostPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(e) = policy.check(request.headers(), request.uri()) {
        return e.into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn check(policy: &HostPolicy, host: &str, origin: Option<&str>) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        policy
            .check(&headers, &Uri::from_static("/api/runs"))
            .is_ok()
    }

    #[test]
    fn hosts() {
        let policy = HostPolicy::new(["boitata.example.com"]);
        for ok in [
            "127.0.0.1:8420",
            "localhost:8420",
            "LOCALHOST",
            "[::1]:8420",
            "10.1.2.3",
            "boitata.example.com",
            "Boitata.Example.Com.:443",
        ] {
            assert!(check(&policy, ok, None), "{ok}");
        }
        for bad in [
            "evil.example:8420",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "",
        ] {
            assert!(!check(&policy, bad, None), "{bad}");
        }
    }

    #[test]
    fn origins() {
        let policy = HostPolicy::new(["boitata.example.com"]);
        assert!(check(
            &policy,
            "127.0.0.1:8420",
            Some("http://127.0.0.1:8420")
        ));
        assert!(check(&policy, "localhost:80", Some("http://localhost")));
        assert!(check(
            &policy,
            "127.0.0.1:8420",
            Some("https://boitata.example.com")
        ));
        assert!(!check(
            &policy,
            "127.0.0.1:8420",
            Some("http://127.0.0.1:9999")
        ));
        assert!(!check(
            &policy,
            "127.0.0.1:8420",
            Some("http://evil.example")
        ));
        assert!(!check(&policy, "127.0.0.1:8420", Some("http://1.2.3.4")));
        assert!(!check(&policy, "127.0.0.1:8420", Some("null")));
    }
}
