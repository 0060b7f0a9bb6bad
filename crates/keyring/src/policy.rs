//! ACL policies in the subset of OpenBao's HCL that the keyring's paths
//! need, and the capability check:
//!
//! ```hcl
//! # comments with #, // or /* */
//! path "transit/encrypt/k1" {
//!   capabilities = ["update"]
//! }
//! path "transit/keys/team-+/*" { capabilities = ["read", "list"] }
//! ```
//!
//! A path is exact, or ends in `*` (a prefix match, the glob only at the
//! end), and may hold `+` segments (any one segment). Capabilities:
//! `create`, `read`, `update`, `patch`, `delete`, `list`, `sudo`, `deny`
//! (`deny` wins over everything). Parameter constraints
//! (`allowed_parameters`, `denied_parameters`, `required_parameters`) and
//! wrapping TTLs are refused with [`PolicyErrorKind::UnsupportedAttribute`]
//! rather than ignored, so a policy never grants more than it says.
//!
//! Several policies make one [`Acl`]: rules with the same path pattern
//! are merged (union of capabilities); of the patterns matching a request
//! path, only the highest-priority one counts, by OpenBao's order (a later
//! first wildcard wins; no trailing `*` wins over one; fewer `+`
//! segments win; longer wins; lexicographically larger wins).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One capability, as OpenBao names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Create data at a path (POST/PUT).
    Create,
    /// Read (GET).
    Read,
    /// Update (POST/PUT).
    Update,
    /// Partial update (PATCH).
    Patch,
    /// Delete (DELETE).
    Delete,
    /// List (LIST).
    List,
    /// Root-protected paths.
    Sudo,
    /// Nothing, whatever else is granted.
    Deny,
}

const ALL: [(Capability, &str); 8] = [
    (Capability::Create, "create"),
    (Capability::Read, "read"),
    (Capability::Update, "update"),
    (Capability::Patch, "patch"),
    (Capability::Delete, "delete"),
    (Capability::List, "list"),
    (Capability::Sudo, "sudo"),
    (Capability::Deny, "deny"),
];

impl Capability {
    fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// OpenBao's name.
    pub fn as_str(self) -> &'static str {
        ALL[self as usize].1
    }

    /// The capability OpenBao calls `name`.
    pub fn parse(name: &str) -> Option<Self> {
        ALL.iter().find(|(_, n)| *n == name).map(|(c, _)| *c)
    }
}

/// A set of capabilities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Capabilities(u16);

impl Capabilities {
    /// Every capability but `deny` (the root token's).
    pub const ROOT: Capabilities = Capabilities(0x7f);

    /// Whether `cap` is granted (never when `deny` is in the set).
    pub fn allows(self, cap: Capability) -> bool {
        self.0 & Capability::Deny.bit() == 0 && self.0 & cap.bit() != 0
    }

    /// Whether the set holds `deny`.
    pub fn denies(self) -> bool {
        self.0 & Capability::Deny.bit() != 0
    }

    fn insert(&mut self, cap: Capability) {
        self.0 |= cap.bit();
    }

    /// OpenBao's names, in its order (`["deny"]` alone when denied).
    pub fn names(self) -> Vec<&'static str> {
        if self.denies() {
            return vec!["deny"];
        }
        ALL.iter()
            .filter(|(c, _)| self.allows(*c))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Why a policy was refused, with where (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("policy line {line}, column {column}: {kind}")]
pub struct PolicyError {
    /// Line, from 1.
    pub line: usize,
    /// Column (characters), from 1.
    pub column: usize,
    /// What is wrong.
    pub kind: PolicyErrorKind,
}

/// What is wrong in a policy.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyErrorKind {
    /// Something else was expected here.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar wanted.
        expected: &'static str,
        /// What was there.
        found: String,
    },
    /// A string without its closing quote, or with an escape other than
    /// `\"`, `\\`, `\n`, `\t`.
    #[error("unterminated string or unsupported escape")]
    BadString,
    /// A `/*` comment without `*/`.
    #[error("unterminated comment")]
    UnterminatedComment,
    /// A capability OpenBao does not have.
    #[error("unknown capability {0:?}")]
    UnknownCapability(String),
    /// An attribute aesd does not implement (parameter constraints,
    /// wrapping TTLs) or that OpenBao does not know.
    #[error("unsupported attribute {0:?} (aesd's policies take capabilities only)")]
    UnsupportedAttribute(String),
    /// A `path` block without `capabilities`.
    #[error("path {0:?} has no capabilities")]
    NoCapabilities(String),
    /// `*` anywhere but at the end of a path.
    #[error("path {0:?}: the glob * is allowed only as the last character")]
    GlobNotAtEnd(String),
    /// A policy larger than [`MAX_POLICY_LEN`] or with more than
    /// [`MAX_RULES`] paths.
    #[error("policy too large (at most {MAX_POLICY_LEN} bytes and {MAX_RULES} paths)")]
    TooLarge,
}

/// The largest policy text accepted, bytes.
pub const MAX_POLICY_LEN: usize = 16 * 1024;
/// The most `path` blocks in one policy.
pub const MAX_RULES: usize = 256;

/// One `path` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The pattern as written.
    pub path: String,
    /// Its capabilities.
    pub capabilities: Capabilities,
}

/// A parsed policy: its rules, and the text it was written as (what
/// `sys/policy/:name` reads back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The text as written.
    pub text: String,
    /// The `path` blocks, in order.
    pub rules: Vec<Rule>,
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Punct(char),
    End,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Ident(s) => s.clone(),
            Token::Str(s) => format!("{s:?}"),
            Token::Punct(c) => format!("'{c}'"),
            Token::End => "end of policy".into(),
        }
    }
}

impl<'a> Lexer<'a> {
    fn position(&self, at: usize) -> (usize, usize) {
        let before = &self.text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    fn error(&self, at: usize, kind: PolicyErrorKind) -> PolicyError {
        let (line, column) = self.position(at);
        PolicyError { line, column, kind }
    }

    fn skip_blank(&mut self) -> Result<(), PolicyError> {
        loop {
            let rest = &self.text[self.pos..];
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with('#') || trimmed.starts_with("//") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(body) = trimmed.strip_prefix("/*") {
                let end = body
                    .find("*/")
                    .ok_or_else(|| self.error(self.pos, PolicyErrorKind::UnterminatedComment))?;
                self.pos += end + 4;
            } else {
                return Ok(());
            }
        }
    }

    /// The next token and where it starts.
    fn next(&mut self) -> Result<(Token, usize), PolicyError> {
        self.skip_blank()?;
        let start = self.pos;
        let mut chars = self.text[start..].chars();
        let Some(first) = chars.next() else {
            return Ok((Token::End, start));
        };
        if first == '"' {
            let mut out = String::new();
            let mut escaped = false;
            for (i, c) in self.text[start + 1..].char_indices() {
                match (escaped, c) {
                    (true, '"' | '\\') => out.push(c),
                    (true, 'n') => out.push('\n'),
                    (true, 't') => out.push('\t'),
                    (true, _) | (false, '\n') => break,
                    (false, '\\') => {
                        escaped = true;
                        continue;
                    }
                    (false, '"') => {
                        self.pos = start + 1 + i + 1;
                        return Ok((Token::Str(out), start));
                    }
                    (false, _) => out.push(c),
                }
                escaped = false;
            }
            return Err(self.error(start, PolicyErrorKind::BadString));
        }
        if first.is_ascii_alphabetic() || first == '_' {
            let len = self.text[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(self.text.len() - start);
            self.pos += len;
            return Ok((Token::Ident(self.text[start..start + len].into()), start));
        }
        self.pos += first.len_utf8();
        Ok((Token::Punct(first), start))
    }

    fn expect_punct(&mut self, punct: char, expected: &'static str) -> Result<(), PolicyError> {
        match self.next()? {
            (Token::Punct(c), _) if c == punct => Ok(()),
            (other, at) => Err(self.error(
                at,
                PolicyErrorKind::Expected {
                    expected,
                    found: other.describe(),
                },
            )),
        }
    }
}

/// Parses a policy in the HCL subset of the module documentation.
pub fn parse(text: &str) -> Result<Policy, PolicyError> {
    let mut lexer = Lexer { text, pos: 0 };
    if text.len() > MAX_POLICY_LEN {
        return Err(lexer.error(0, PolicyErrorKind::TooLarge));
    }
    let mut rules = Vec::new();
    loop {
        match lexer.next()? {
            (Token::End, _) => break,
            (Token::Ident(word), _) if word == "path" => {}
            (other, at) => {
                return Err(lexer.error(
                    at,
                    PolicyErrorKind::Expected {
                        expected: "path",
                        found: other.describe(),
                    },
                ));
            }
        }
        let (path, path_at) = match lexer.next()? {
            (Token::Str(path), at) => (path, at),
            (other, at) => {
                return Err(lexer.error(
                    at,
                    PolicyErrorKind::Expected {
                        expected: "a quoted path",
                        found: other.describe(),
                    },
                ));
            }
        };
        if path.find('*').is_some_and(|i| i + 1 != path.len()) {
            return Err(lexer.error(path_at, PolicyErrorKind::GlobNotAtEnd(path)));
        }
        lexer.expect_punct('{', "'{'")?;
        let mut capabilities = None;
        loop {
            let (attr, attr_at) = match lexer.next()? {
                (Token::Punct('}'), _) => break,
                (Token::Ident(attr), at) => (attr, at),
                (other, at) => {
                    return Err(lexer.error(
                        at,
                        PolicyErrorKind::Expected {
                            expected: "capabilities or '}'",
                            found: other.describe(),
                        },
                    ));
                }
            };
            if attr != "capabilities" {
                return Err(lexer.error(attr_at, PolicyErrorKind::UnsupportedAttribute(attr)));
            }
            lexer.expect_punct('=', "'='")?;
            lexer.expect_punct('[', "'['")?;
            let mut caps = Capabilities::default();
            loop {
                match lexer.next()? {
                    (Token::Punct(']'), _) => break,
                    (Token::Str(name), at) => {
                        let cap = Capability::parse(&name).ok_or_else(|| {
                            lexer.error(at, PolicyErrorKind::UnknownCapability(name))
                        })?;
                        caps.insert(cap);
                        match lexer.next()? {
                            (Token::Punct(','), _) => {}
                            (Token::Punct(']'), _) => break,
                            (other, at) => {
                                return Err(lexer.error(
                                    at,
                                    PolicyErrorKind::Expected {
                                        expected: "',' or ']'",
                                        found: other.describe(),
                                    },
                                ));
                            }
                        }
                    }
                    (other, at) => {
                        return Err(lexer.error(
                            at,
                            PolicyErrorKind::Expected {
                                expected: "a quoted capability or ']'",
                                found: other.describe(),
                            },
                        ));
                    }
                }
            }
            capabilities = Some(caps);
        }
        let capabilities = capabilities
            .ok_or_else(|| lexer.error(path_at, PolicyErrorKind::NoCapabilities(path.clone())))?;
        if rules.len() == MAX_RULES {
            return Err(lexer.error(path_at, PolicyErrorKind::TooLarge));
        }
        rules.push(Rule { path, capabilities });
    }
    Ok(Policy {
        text: text.into(),
        rules,
    })
}

/// A pattern's priority key: larger is higher priority (OpenBao's order).
fn priority(pattern: &str) -> (usize, bool, std::cmp::Reverse<usize>, usize, &str) {
    let first_wildcard = pattern.find(['+', '*']).unwrap_or(usize::MAX);
    let plus_segments = pattern.split('/').filter(|s| *s == "+").count();
    (
        first_wildcard,
        !pattern.ends_with('*'),
        std::cmp::Reverse(plus_segments),
        pattern.len(),
        pattern,
    )
}

/// Whether `pattern` matches request path `path`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let (body, glob) = match pattern.strip_suffix('*') {
        Some(body) => (body, true),
        None => (pattern, false),
    };
    if !body.contains('+') {
        return if glob {
            path.starts_with(body)
        } else {
            path == body
        };
    }
    let pattern_segments: Vec<&str> = body.split('/').collect();
    let path_segments: Vec<&str> = path.split('/').collect();
    if path_segments.len() < pattern_segments.len()
        || (!glob && path_segments.len() != pattern_segments.len())
    {
        return false;
    }
    let last = pattern_segments.len() - 1;
    for (i, (p, s)) in pattern_segments.iter().zip(&path_segments).enumerate() {
        let ok = if *p == "+" {
            true
        } else if glob && i == last {
            s.starts_with(p)
        } else {
            p == s
        };
        if !ok {
            return false;
        }
    }
    // A glob ending inside a segment ("a/+/b*") may run on past it; one
    // ending after "/" ("a/+/") needs the next segment present, as the
    // prefix match does.
    true
}

/// The capabilities a set of policies grants, path by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    rules: BTreeMap<String, Capabilities>,
    root: bool,
}

impl Acl {
    /// The ACL of the root policy: everything.
    pub fn root() -> Self {
        Acl {
            rules: BTreeMap::new(),
            root: true,
        }
    }

    /// Merges `policies` (same pattern: union of capabilities).
    pub fn new<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> Self {
        let mut rules: BTreeMap<String, Capabilities> = BTreeMap::new();
        for policy in policies {
            for rule in &policy.rules {
                let caps = rules.entry(rule.path.clone()).or_default();
                caps.0 |= rule.capabilities.0;
            }
        }
        Acl { rules, root: false }
    }

    /// The capabilities on `path`: those of the highest-priority pattern
    /// that matches it, none if none matches.
    pub fn capabilities(&self, path: &str) -> Capabilities {
        if self.root {
            return Capabilities::ROOT;
        }
        self.rules
            .iter()
            .filter(|(pattern, _)| matches(pattern, path))
            .max_by(|(a, _), (b, _)| priority(a).cmp(&priority(b)))
            .map(|(_, caps)| *caps)
            .unwrap_or_default()
    }

    /// Whether `cap` is granted on `path`.
    pub fn allows(&self, path: &str, cap: Capability) -> bool {
        self.capabilities(path).allows(cap)
    }
}

/// Why a policy could not be stored or removed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyStoreError {
    /// The policy text was refused.
    #[error(transparent)]
    Parse(#[from] PolicyError),
    /// The name breaks the key-name rule (OpenBao lowercases names; so
    /// does aesd).
    #[error("invalid policy name: {0}")]
    InvalidName(String),
    /// `root` cannot be written; `root` and `default` cannot be deleted.
    #[error("the {0:?} policy cannot be changed")]
    Reserved(String),
    /// No policy of that name.
    #[error("no policy named {0:?}")]
    Unknown(String),
    /// [`MAX_POLICIES`] reached.
    #[error("too many policies (limit {MAX_POLICIES})")]
    Full,
}

/// The most policies kept.
pub const MAX_POLICIES: usize = 64;

/// ACL policies by (lowercased) name: `sys/policy/:name`,
/// `sys/policies/acl/:name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyStore {
    by_name: BTreeMap<String, Policy>,
}

impl PolicyStore {
    /// Parses and stores `text` as policy `name` (lowercased); returns
    /// the name stored.
    pub fn put(&mut self, name: &str, text: &str) -> Result<String, PolicyStoreError> {
        let name = name.to_ascii_lowercase();
        crate::name::validate(&name).map_err(|e| PolicyStoreError::InvalidName(e.to_string()))?;
        if name == crate::token::ROOT_POLICY {
            return Err(PolicyStoreError::Reserved(name));
        }
        let policy = parse(text)?;
        if !self.by_name.contains_key(&name) && self.by_name.len() >= MAX_POLICIES {
            return Err(PolicyStoreError::Full);
        }
        self.by_name.insert(name.clone(), policy);
        Ok(name)
    }

    /// The policy `name` (lowercased).
    pub fn get(&self, name: &str) -> Option<&Policy> {
        self.by_name.get(&name.to_ascii_lowercase())
    }

    /// Removes policy `name`.
    pub fn delete(&mut self, name: &str) -> Result<(), PolicyStoreError> {
        let name = name.to_ascii_lowercase();
        if name == crate::token::ROOT_POLICY || name == "default" {
            return Err(PolicyStoreError::Reserved(name));
        }
        self.by_name
            .remove(&name)
            .map(|_| ())
            .ok_or(PolicyStoreError::Unknown(name))
    }

    /// The names, sorted (`root` is implicit and listed by the API).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}
