//! Glob patterns over the paths of a listing (a local directory walked, or the keys of an
//! object store's listing), matched in time proportional to the pattern's length times the
//! path's, whatever the pattern: `*a*a*a*a*a*a*b` against a name of 200 `a`s costs a few
//! thousand steps, where a backtracking matcher takes longer than a run does.
//!
//! One matcher serves local paths and object storage, so that `data/**/*.parquet` names the
//! same files on disk as under `s3://bucket/data/`.
//! A path's segments (split at `/`) are matched against the pattern's: `**` matches any number
//! of segments, any other pattern segment exactly one, by its characters: `*` any run of
//! characters, `?` one, `[abc]`, `[a-z]` and `[!abc]` (or `[^abc]`) one of, or none of, a set;
//! a `[` without its `]` is the character itself.
//! Both levels use the wildcard algorithm that remembers only the last star: an element that
//! is not a star consumes exactly one segment (one character), so when a match fails after a
//! star, moving that last star's match on by one is the only retry that can succeed.

/// Whether `segment` (one component of a path) holds a glob's special characters.
pub(crate) fn is_pattern(segment: &str) -> bool {
    segment.contains(['*', '?', '['])
}

/// One element of a segment's pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// This character.
    Char(char),
    /// `?`: any one character.
    Any,
    /// `*`: any run of characters.
    Star,
    /// `[...]`: one character of (or, negated, not of) these inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Char(expected) => *expected == c,
            Token::Any => true,
            Token::Star => false,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(low, high)| (*low..=*high).contains(&c)) != *negated
            }
        }
    }
}

/// The pattern of one segment, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SegmentPattern(Vec<Token>);

impl SegmentPattern {
    fn parse(text: &str) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let mut tokens = Vec::new();
        let mut index = 0;
        while index < chars.len() {
            match chars[index] {
                // Runs of stars are one star.
                '*' if tokens.last() == Some(&Token::Star) => index += 1,
                '*' => {
                    tokens.push(Token::Star);
                    index += 1;
                }
                '?' => {
                    tokens.push(Token::Any);
                    index += 1;
                }
                '[' => match parse_class(&chars[index + 1..]) {
                    Some((token, used)) => {
                        tokens.push(token);
                        index += 1 + used;
                    }
                    None => {
                        tokens.push(Token::Char('['));
                        index += 1;
                    }
                },
                c => {
                    tokens.push(Token::Char(c));
                    index += 1;
                }
            }
        }
        SegmentPattern(tokens)
    }

    /// Whether `name` matches, adding the comparisons made to `steps`.
    fn matches(&self, name: &str, steps: &mut u64) -> bool {
        let name: Vec<char> = name.chars().collect();
        wildcard_match(
            &self.0,
            &name,
            |token| *token == Token::Star,
            |token, c| {
                *steps += 1;
                token.matches(*c)
            },
        )
    }
}

/// The set after a `[`: the token and the characters it used (its `]` included); `None` when
/// the set has no closing `]`. A `]` right after `[` or `[!` belongs to the set.
fn parse_class(chars: &[char]) -> Option<(Token, usize)> {
    let negated = matches!(chars.first(), Some('!' | '^'));
    let start = usize::from(negated);
    let close = start + 1 + chars.get(start + 1..)?.iter().position(|&c| c == ']')?;
    let set = &chars[start..close];
    let mut ranges = Vec::new();
    let mut index = 0;
    while index < set.len() {
        if index + 2 < set.len() && set[index + 1] == '-' {
            ranges.push((set[index], set[index + 2]));
            index += 3;
        } else {
            ranges.push((set[index], set[index]));
            index += 1;
        }
    }
    Some((Token::Class { negated, ranges }, close + 1))
}

/// One segment of a path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of segments.
    AnyDepth,
    /// Exactly one segment that matches this pattern.
    One(SegmentPattern),
}

/// A glob over the segments of a path (or of an object's key), parsed once for a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathPattern(Vec<Segment>);

impl PathPattern {
    /// The pattern of these segments (`**` alone in a segment matches any depth).
    pub(crate) fn parse<S: AsRef<str>>(segments: &[S]) -> Self {
        let mut parsed: Vec<Segment> = Vec::new();
        for segment in segments {
            match segment.as_ref() {
                "**" if parsed.last() == Some(&Segment::AnyDepth) => {}
                "**" => parsed.push(Segment::AnyDepth),
                text => parsed.push(Segment::One(SegmentPattern::parse(text))),
            }
        }
        PathPattern(parsed)
    }

    /// Whether the path segments `parts` match.
    pub(crate) fn matches(&self, parts: &[&str]) -> bool {
        self.matches_counting(parts).0
    }

    /// Whether `parts` match, and the character comparisons it took.
    fn matches_counting(&self, parts: &[&str]) -> (bool, u64) {
        let mut steps = 0;
        let matched = wildcard_match(
            &self.0,
            parts,
            |segment| *segment == Segment::AnyDepth,
            |segment, part| {
                steps += 1;
                match segment {
                    Segment::AnyDepth => false,
                    Segment::One(pattern) => pattern.matches(part, &mut steps),
                }
            },
        );
        (matched, steps)
    }
}

/// Whether `text` matches `pattern`, where the elements for which `is_star` holds match any run
/// of `text` and every other element matches one item of `text` when `one` says so.
///
/// `one` is called at most `(pattern.len() + 1) * (text.len() + 1)` times.
fn wildcard_match<P, T>(
    pattern: &[P],
    text: &[T],
    is_star: impl Fn(&P) -> bool,
    mut one: impl FnMut(&P, &T) -> bool,
) -> bool {
    let (mut p, mut t) = (0, 0);
    // The pattern position after the last star seen, and where in `text` its run ends now.
    let mut last_star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && is_star(&pattern[p]) {
            last_star = Some((p + 1, t));
            p += 1;
        } else if p < pattern.len() && one(&pattern[p], &text[t]) {
            p += 1;
            t += 1;
        } else if let Some((after, end)) = last_star {
            // The last star takes one more item; everything after it is matched again.
            last_star = Some((after, end + 1));
            p = after;
            t = end + 1;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(is_star)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, key: &str) -> bool {
        let pattern: Vec<&str> = pattern.split('/').collect();
        let parts: Vec<&str> = key.split('/').collect();
        PathPattern::parse(&pattern).matches(&parts)
    }

    #[test]
    fn globs_match_segments_and_any_depth() {
        assert!(matches("*.parquet", "part-0.parquet"));
        assert!(!matches("*.parquet", "a/part-0.parquet"));
        assert!(matches("**/*.parquet", "a/b/part-0.parquet"));
        assert!(matches("**/*.parquet", "part-0.parquet"));
        assert!(matches("a/**/x/**/*.pq", "a/x/b/c/d.pq"));
        assert!(!matches("a/**/x/**/*.pq", "a/y/b/c/d.pq"));
        assert!(matches("part-?.parquet", "part-7.parquet"));
        assert!(!matches("part-?.parquet", "part-17.parquet"));
        assert!(matches("part-[0-3].parquet", "part-2.parquet"));
        assert!(!matches("part-[!0-3].parquet", "part-2.parquet"));
        assert!(matches("part-[^0-3].parquet", "part-7.parquet"));
        assert!(matches("[]]x", "]x"));
        assert!(matches("a[b", "a[b"));
        assert!(matches("day=*/x.parquet", "day=1/x.parquet"));
        assert!(matches("é?.pq", "éü.pq"));
    }

    /// The pathological pattern of a backtracking matcher: six stars before a `b` that never
    /// comes, against 200 `a`s. A backtracking matcher tries every placement of the stars
    /// (about 200^6 / 6! = 9e10); this one makes at most (tokens + 1) x (characters + 1)
    /// comparisons per segment.
    #[test]
    fn a_pathological_glob_takes_steps_linear_in_pattern_times_key() {
        let key = format!("data/{}.parquet", "a".repeat(200));
        let pattern = PathPattern::parse(&["data", "*a*a*a*a*a*a*b.parquet"]);
        let parts: Vec<&str> = key.split('/').collect();
        let (matched, steps) = pattern.matches_counting(&parts);
        assert!(!matched);
        let name_chars = 208;
        let tokens = "*a*a*a*a*a*a*b.parquet".len() as u64;
        assert!(
            steps <= (tokens + 1) * (name_chars + 1) + 64,
            "{steps} steps"
        );
        // With the `b`, it matches.
        let key = format!("data/{}b.parquet", "a".repeat(200));
        let parts: Vec<&str> = key.split('/').collect();
        assert!(pattern.matches(&parts));
        // The same at the level of segments: `**` between many segments.
        let deep: Vec<String> = (0..300).map(|_| "a".to_string()).collect();
        let parts: Vec<&str> = deep.iter().map(String::as_str).collect();
        let pattern = PathPattern::parse(&["**", "a", "**", "a", "**", "a", "**", "b"]);
        let (matched, steps) = pattern.matches_counting(&parts);
        assert!(!matched);
        assert!(steps <= 9 * 301 * 3, "{steps} steps");
    }

    /// A backtracking matcher, the definition the linear one must agree with.
    fn reference_segment(pattern: &[Token], name: &[char]) -> bool {
        match pattern.split_first() {
            None => name.is_empty(),
            Some((Token::Star, rest)) => {
                (0..=name.len()).any(|skip| reference_segment(rest, &name[skip..]))
            }
            Some((token, rest)) => name
                .split_first()
                .is_some_and(|(c, others)| token.matches(*c) && reference_segment(rest, others)),
        }
    }

    fn reference_path(pattern: &[Segment], parts: &[&str]) -> bool {
        match pattern.split_first() {
            None => parts.is_empty(),
            Some((Segment::AnyDepth, rest)) => {
                (0..=parts.len()).any(|skip| reference_path(rest, &parts[skip..]))
            }
            Some((Segment::One(segment), rest)) => {
                parts.split_first().is_some_and(|(p, others)| {
                    let chars: Vec<char> = p.chars().collect();
                    reference_segment(&segment.0, &chars) && reference_path(rest, others)
                })
            }
        }
    }

    #[test]
    fn the_linear_matcher_agrees_with_backtracking_on_random_globs() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let pieces = ["a", "b", "*", "?", "[ab]", "[!a]", "**"];
        for _ in 0..20_000 {
            let segments = 1 + next(3) as usize;
            let pattern: Vec<String> = (0..segments)
                .map(|_| {
                    let length = next(5) as usize;
                    let text: String = (0..length).map(|_| pieces[next(7) as usize]).collect();
                    if text.is_empty() {
                        "**".to_string()
                    } else {
                        text
                    }
                })
                .collect();
            let key_segments = 1 + next(3) as usize;
            let key: Vec<String> = (0..key_segments)
                .map(|_| (0..next(6)).map(|_| ["a", "b"][next(2) as usize]).collect())
                .collect();
            let parts: Vec<&str> = key.iter().map(String::as_str).collect();
            let parsed = PathPattern::parse(&pattern);
            assert_eq!(
                parsed.matches(&parts),
                reference_path(&parsed.0, &parts),
                "{pattern:?} against {key:?}"
            );
        }
    }
}
