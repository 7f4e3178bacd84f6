//! Redis's glob patterns (KEYS, SCAN MATCH, CONFIG GET): `*`, `?`,
//! `[abc]`, `[^a-z]`, and `\` to quote the next byte.

/// Whether `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    // Iterative with one backtrack point for the last `*`: linear in
    // practice, and never recursion deep enough to overflow the stack.
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pattern, p + 1, s[i]) {
                        if hit {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() && pattern[p + 1] == s[i] => {
                    p += 2;
                    i += 1;
                    continue;
                }
                b'\\' if p + 1 < pattern.len() => {}
                c if c == s[i] => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting after `[` at `p`: returns
/// whether it matched and where the pattern continues.
fn class(pattern: &[u8], mut p: usize, c: u8) -> Option<(bool, usize)> {
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    loop {
        match pattern.get(p) {
            // An unterminated class ends at the pattern's end, as in Redis.
            None => return Some((hit != negate, p)),
            Some(b']') => return Some((hit != negate, p + 1)),
            Some(b'\\') if p + 1 < pattern.len() => {
                hit |= pattern[p + 1] == c;
                p += 2;
            }
            Some(&lo) if pattern.get(p + 1) == Some(&b'-') && p + 2 < pattern.len() && pattern[p + 2] != b']' => {
                let hi = pattern[p + 2];
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                hit |= (lo..=hi).contains(&c);
                p += 3;
            }
            Some(&x) => {
                hit |= x == c;
                p += 1;
            }
        }
    }
}

/// The literal bytes every match starts with (for a range scan).
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < pattern.len() {
        match pattern[p] {
            b'*' | b'?' | b'[' => break,
            b'\\' if p + 1 < pattern.len() => {
                out.push(pattern[p + 1]);
                p += 2;
            }
            c => {
                out.push(c);
                p += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_in_redis() {
        let yes = [
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("user:*:name", "user:42:name"),
            ("a\\*b", "a*b"),
            ("", ""),
        ];
        let no = [("h?llo", "hllo"), ("h[^e]llo", "hello"), ("h[a-b]llo", "hcllo"), ("a\\*b", "axb"), ("a*", "b")];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes()), "{p} {s}");
        }
        for (p, s) in no {
            assert!(!matches(p.as_bytes(), s.as_bytes()), "{p} {s}");
        }
        assert_eq!(literal_prefix(b"user:\\*x*"), b"user:*x");
    }
}
