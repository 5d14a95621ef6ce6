//! "Did you mean …?" suggestions for misspelled names.

/// The Levenshtein distance between `a` and `b`, in chars.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `name`, if it is close enough to be a likely typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    // Inputs are names from a file; keep the work bounded for absurd ones.
    if name.len() > 256 {
        return None;
    }
    let limit = (name.chars().count() / 3).max(1) + 1;
    candidates
        .into_iter()
        .filter(|c| c.len() <= 256)
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `"; did you mean \"x\"?"`, or `""` when nothing is close.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    match closest(name, candidates) {
        Some(c) => format!("; did you mean {c:?}?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested() {
        assert_eq!(distance("tset", "test"), 2);
        assert_eq!(closest("tset", ["box", "code", "test"]), Some("test"));
        assert_eq!(closest("zzzzzz", ["box", "code", "test"]), None);
        assert_eq!(closest("sucess", ["success", "failure"]), Some("success"));
    }
}
