//! Typed messages and their payload layouts (all integers big-endian).
//!
//! ```text
//! welcome  version u16 | max_data u32 | name_len u8 | name (UTF-8)
//! begin    operation u8 | format u8 | key_source u8 | params_len u16 | params
//!          key source 1 (password, PBKDF2-HMAC-SHA256 on the server):
//!          params = iterations u32 | password (params_len - 4 bytes)
//!          key source 2 (derived by the client):
//!          params = salt [8] | key [32] | iv [16]  (params_len = 56)
//!          key source 5 (a keyring key by name, format 2):
//!          params = the key's name (1 ..= 128 bytes)
//! key_token  the keyring token (1 ..= 512 bytes)
//! data     the chunk's bytes (1 ..= the receiver's data limit)
//! end      (empty)
//! queued   position u32 (1 = next to be admitted)
//! started  queue_us u64
//! done     bytes_in u64 | bytes_out u64 | queue_us u64 | processing_us u64
//! error    code u16 | message_len u16 | message (UTF-8)
//! ```

use std::fmt;

use zeroize::Zeroizing;

use crate::error::{ErrorCode, ProtoError};
use crate::frame::{FrameHeader, FrameKind, HEADER_LEN};
use crate::limits::{
    MAX_ERROR_MESSAGE_LEN, MAX_KEY_NAME_LEN, MAX_KEY_PARAMS_LEN, MAX_KEY_TOKEN_LEN,
    MAX_PASSWORD_LEN, MAX_SERVER_NAME_LEN, MAX_TOKEN_LEN, MIN_TOKEN_LEN,
};

/// Any frame, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// See [`Welcome`].
    Welcome(Welcome),
    /// The client's access token, when the welcome asks for one.
    Auth(AuthToken),
    /// The server accepted the token.
    Authorized,
    /// The keyring token the connection's by-name jobs run under.
    KeyToken(Secret),
    /// See [`Begin`].
    Begin(Begin),
    /// A chunk of file data.
    Data(Vec<u8>),
    /// The client's input is complete.
    End,
    /// See [`Queued`].
    Queued(Queued),
    /// See [`Started`].
    Started(Started),
    /// See [`Done`].
    Done(Done),
    /// See [`ErrorFrame`].
    Error(ErrorFrame),
}

/// The server's answer to a good hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The protocol version both sides now speak.
    pub version: u16,
    /// The largest data payload the server accepts; clients send chunks of
    /// at most this size.
    pub max_data: u32,
    /// The server's name and version, for logs (for example `aesd 0.1.0`).
    pub server: String,
    /// The server requires an [`Auth`](Message::Auth) frame before any job.
    pub token_required: bool,
    /// The server accepts [`KeySource::Derived`]: the client runs PBKDF2
    /// and sends key and IV, so the password never leaves it. Only set
    /// when the client's hello said it can send derived keys.
    pub derived_keys: bool,
}

/// Welcome flag bit 0: an access token is required.
const WELCOME_TOKEN_REQUIRED: u16 = 1;

/// Welcome flag bit 1: key source 2 (derived keys) is accepted.
const WELCOME_DERIVED_KEYS: u16 = 2;

/// Length of key source 2's parameters: salt, key, IV.
pub const DERIVED_KEY_PARAMS_LEN: usize = 8 + 32 + 16;

/// What a job does with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Plaintext in, ciphertext out.
    Encrypt,
    /// Ciphertext in, plaintext out.
    Decrypt,
    /// A by-name file's header in, the same header re-wrapped by the
    /// key's latest version out (format 2, key source 5 only).
    Rewrap,
    /// No input; a fresh 16-byte file key and the by-name header that
    /// wraps it with the key's latest version out, for a client that
    /// encrypts the payload itself (format 2, key source 5 only).
    DataKey,
    /// A by-name file's header in (its MAC verified), its 16-byte file
    /// key out, for a client that decrypts the payload itself (format 2,
    /// key source 5 only).
    Unwrap,
    /// No input; only the by-name header that wraps a fresh file key with
    /// the key's latest version out (the file key itself never leaves the
    /// server): for a client that prepares headers another, allowed to
    /// unwrap them, later encrypts or decrypts under (format 2, key
    /// source 5 only).
    DataKeyWrapped,
}

impl Operation {
    /// The operation's name, for logs and labels.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Encrypt => "encrypt",
            Operation::Decrypt => "decrypt",
            Operation::Rewrap => "rewrap",
            Operation::DataKey => "datakey",
            Operation::Unwrap => "unwrap",
            Operation::DataKeyWrapped => "datakey-wrapped",
        }
    }

    /// The operation's number on the wire.
    pub fn wire(self) -> u8 {
        match self {
            Operation::Encrypt => 1,
            Operation::Decrypt => 2,
            Operation::Rewrap => 3,
            Operation::DataKey => 4,
            Operation::Unwrap => 5,
            Operation::DataKeyWrapped => 6,
        }
    }
}

/// The file format of the ciphertext side of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `openssl enc -aes-256-cbc -salt -pbkdf2`: `Salted__`, an 8-byte
    /// salt, then AES-256-CBC with PKCS#7 padding; key and IV are the 48
    /// bytes of PBKDF2-HMAC-SHA256 over the password and salt.
    OpensslSaltedPbkdf2,
    /// age v1 (C2SP age.md, the `age` command's format): X25519
    /// recipients, 64 KiB ChaCha20-Poly1305 chunks, authenticated. Key
    /// source 3 encrypts, key source 4 decrypts.
    Age,
}

impl Format {
    /// The format's number on the wire.
    pub fn wire(self) -> u8 {
        match self {
            Format::OpensslSaltedPbkdf2 => 1,
            Format::Age => 2,
        }
    }

    /// The format's name, for logs and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpensslSaltedPbkdf2 => "openssl",
            Format::Age => "age",
        }
    }
}

/// Secret bytes (a password, an access token), wiped from memory when
/// dropped and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<Vec<u8>>);

/// A job's password.
pub type Password = Secret;

/// A pre-shared access token.
pub type AuthToken = Secret;

impl Secret {
    /// Wraps secret bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        Secret(Zeroizing::new(bytes))
    }

    /// The secret's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes redacted>)", self.0.len())
    }
}

/// Where the job's key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// Key source 1: a password, stretched with PBKDF2-HMAC-SHA256 on the
    /// server.
    Password {
        /// PBKDF2 iteration count (openssl's `-iter`, 10000 by default).
        iterations: u32,
        /// The password.
        password: Password,
    },
    /// Key source 2: key and IV the client derived itself from the
    /// password and `salt` (PBKDF2-HMAC-SHA256, as `openssl enc -pbkdf2`);
    /// the server does no key derivation and never sees the password.
    Derived(DerivedKeyParams),
    /// Key source 3 (format 2, encryption): the X25519 public keys of the
    /// file's recipients; the server makes the file key and wraps it to
    /// each. 1 to [`MAX_AGE_RECIPIENTS`].
    AgeRecipients(Vec<[u8; 32]>),
    /// Key source 4 (format 2, decryption): the file key the client
    /// unwrapped from the header with its identity; the identity never
    /// leaves the client. Wiped when dropped, never printed.
    AgeFileKey(AgeFileKey),
    /// Key source 5 (format 2, any operation): a key of the server's
    /// keyring, by name. Encryption wraps a fresh file key with the key's
    /// latest version into the header's `aesd-key` stanza; decryption and
    /// rewrap unwrap it with the version the stanza names. The
    /// connection's [`Message::KeyToken`] must grant the operation.
    KeyName(String),
}

/// The most recipients one age encryption names (their keys fill a begin
/// frame's key parameters).
pub const MAX_AGE_RECIPIENTS: usize = 32;

/// An age file key on the wire (16 bytes), wiped when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct AgeFileKey(pub zeroize::Zeroizing<[u8; 16]>);

impl fmt::Debug for AgeFileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AgeFileKey(<redacted>)")
    }
}

/// The parameters of key source 2.
#[derive(Clone, PartialEq, Eq)]
pub struct DerivedKeyParams {
    /// The file's salt: written after `Salted__` when encrypting; when
    /// decrypting, the salt the file must start with.
    pub salt: [u8; 8],
    /// The AES-256 key, wiped when dropped and never printed.
    pub key: zeroize::Zeroizing<[u8; 32]>,
    /// The CBC initialisation vector (derived from the password like the
    /// key, so never printed either).
    pub iv: zeroize::Zeroizing<[u8; 16]>,
}

impl fmt::Debug for DerivedKeyParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DerivedKeyParams")
            .field("salt", &self.salt)
            .field("key", &"<redacted>")
            .field("iv", &"<redacted>")
            .finish()
    }
}

impl KeySource {
    /// The key source's number on the wire.
    pub fn wire(&self) -> u8 {
        match self {
            KeySource::Password { .. } => 1,
            KeySource::Derived(_) => 2,
            KeySource::AgeRecipients(_) => 3,
            KeySource::AgeFileKey(_) => 4,
            KeySource::KeyName(_) => 5,
        }
    }

    /// The key source's name, for logs and metric labels.
    pub fn name(&self) -> &'static str {
        match self {
            KeySource::Password { .. } => "password",
            KeySource::Derived(_) => "derived",
            KeySource::AgeRecipients(_) => "age_recipients",
            KeySource::AgeFileKey(_) => "age_file_key",
            KeySource::KeyName(_) => "key_name",
        }
    }
}

/// Starts a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begin {
    /// Encrypt or decrypt.
    pub operation: Operation,
    /// The ciphertext's file format.
    pub format: Format,
    /// Where the key comes from.
    pub key: KeySource,
}

/// The job waits for admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// 1 when the job is next to be admitted.
    pub position: u32,
}

/// The job was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// How long the job waited for admission, in microseconds.
    pub queue_us: u64,
}

/// The job completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// Input bytes the server received.
    pub bytes_in: u64,
    /// Output bytes the server sent.
    pub bytes_out: u64,
    /// Time from begin to admission, in microseconds.
    pub queue_us: u64,
    /// Time the job's cryptographic work (key derivation, cipher) took on
    /// the worker pool, including waiting for a free worker, in
    /// microseconds.
    pub processing_us: u64,
}

/// The job or the connection failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFrame {
    /// Why, as a stable code.
    pub code: ErrorCode,
    /// Why, for people.
    pub message: String,
}

impl ErrorFrame {
    /// An error frame; the message is cut (at a character boundary) to
    /// [`MAX_ERROR_MESSAGE_LEN`] bytes.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_ERROR_MESSAGE_LEN {
            let mut end = MAX_ERROR_MESSAGE_LEN;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        ErrorFrame { code, message }
    }
}

impl fmt::Display for ErrorFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl Message {
    /// The frame kind that carries this message.
    pub fn kind(&self) -> FrameKind {
        match self {
            Message::Welcome(_) => FrameKind::Welcome,
            Message::Auth(_) => FrameKind::Auth,
            Message::Authorized => FrameKind::Authorized,
            Message::KeyToken(_) => FrameKind::KeyToken,
            Message::Begin(_) => FrameKind::Begin,
            Message::Data(_) => FrameKind::Data,
            Message::End => FrameKind::End,
            Message::Queued(_) => FrameKind::Queued,
            Message::Started(_) => FrameKind::Started,
            Message::Done(_) => FrameKind::Done,
            Message::Error(_) => FrameKind::Error,
        }
    }

    /// Appends the whole frame (header and payload) to `out`.
    ///
    /// Fails only when a field exceeds its cap (a too-long password or
    /// server name, a data chunk over the frame limit).
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), ProtoError> {
        let start = out.len();
        out.extend_from_slice(&[0u8; HEADER_LEN]);
        self.encode_payload(out)?;
        let len = out.len() - start - HEADER_LEN;
        let header = FrameHeader {
            kind: self.kind(),
            len: u32::try_from(len).map_err(|_| ProtoError::FieldTooLong {
                field: "payload",
                len,
                max: u32::MAX as usize,
            })?,
        };
        let max = self.kind().max_payload(u32::MAX);
        if header.len > max {
            out.truncate(start);
            return Err(ProtoError::FrameTooLarge {
                kind: self.kind().name(),
                len: header.len,
                max,
            });
        }
        out[start..start + HEADER_LEN].copy_from_slice(&header.encode());
        Ok(())
    }

    /// The whole frame as a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ProtoError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }

    fn encode_payload(&self, out: &mut Vec<u8>) -> Result<(), ProtoError> {
        match self {
            Message::Welcome(welcome) => {
                let name = welcome.server.as_bytes();
                check_len("server name", name.len(), MAX_SERVER_NAME_LEN)?;
                out.extend_from_slice(&welcome.version.to_be_bytes());
                out.extend_from_slice(&welcome.max_data.to_be_bytes());
                out.push(name.len() as u8);
                out.extend_from_slice(name);
                let mut flags = 0;
                if welcome.token_required {
                    flags |= WELCOME_TOKEN_REQUIRED;
                }
                if welcome.derived_keys {
                    flags |= WELCOME_DERIVED_KEYS;
                }
                out.extend_from_slice(&flags.to_be_bytes());
            }
            Message::Auth(token) => {
                check_token_len(token.as_bytes().len())?;
                out.extend_from_slice(token.as_bytes());
            }
            Message::Authorized => {}
            Message::KeyToken(token) => {
                check_key_token_len(token.as_bytes().len())?;
                out.extend_from_slice(token.as_bytes());
            }
            Message::Begin(begin) => {
                out.push(begin.operation.wire());
                check_format_and_key(begin)?;
                out.push(begin.format.wire());
                match &begin.key {
                    KeySource::Password {
                        iterations,
                        password,
                    } => {
                        let password = password.as_bytes();
                        check_len("password", password.len(), MAX_PASSWORD_LEN)?;
                        out.push(1);
                        out.extend_from_slice(&((4 + password.len()) as u16).to_be_bytes());
                        out.extend_from_slice(&iterations.to_be_bytes());
                        out.extend_from_slice(password);
                    }
                    KeySource::Derived(params) => {
                        out.push(2);
                        out.extend_from_slice(&(DERIVED_KEY_PARAMS_LEN as u16).to_be_bytes());
                        out.extend_from_slice(&params.salt);
                        out.extend_from_slice(params.key.as_ref());
                        out.extend_from_slice(params.iv.as_ref());
                    }
                    KeySource::AgeRecipients(recipients) => {
                        out.push(3);
                        out.extend_from_slice(&((1 + 32 * recipients.len()) as u16).to_be_bytes());
                        out.push(recipients.len() as u8);
                        for recipient in recipients {
                            out.extend_from_slice(recipient);
                        }
                    }
                    KeySource::AgeFileKey(file_key) => {
                        out.push(4);
                        out.extend_from_slice(&16u16.to_be_bytes());
                        out.extend_from_slice(file_key.0.as_ref());
                    }
                    KeySource::KeyName(name) => {
                        check_key_name_len(name.len())?;
                        out.push(5);
                        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
                        out.extend_from_slice(name.as_bytes());
                    }
                }
            }
            Message::Data(bytes) => out.extend_from_slice(bytes),
            Message::End => {}
            Message::Queued(queued) => out.extend_from_slice(&queued.position.to_be_bytes()),
            Message::Started(started) => out.extend_from_slice(&started.queue_us.to_be_bytes()),
            Message::Done(done) => {
                for value in [
                    done.bytes_in,
                    done.bytes_out,
                    done.queue_us,
                    done.processing_us,
                ] {
                    out.extend_from_slice(&value.to_be_bytes());
                }
            }
            Message::Error(error) => {
                let message = error.message.as_bytes();
                check_len("error message", message.len(), MAX_ERROR_MESSAGE_LEN)?;
                out.extend_from_slice(&error.code.to_wire().to_be_bytes());
                out.extend_from_slice(&(message.len() as u16).to_be_bytes());
                out.extend_from_slice(message);
            }
        }
        Ok(())
    }

    /// Decodes a payload of the given kind. The payload must be exactly one
    /// message: trailing bytes are an error.
    pub fn decode(kind: FrameKind, payload: &[u8]) -> Result<Message, ProtoError> {
        let mut cursor = Cursor {
            kind: kind.name(),
            rest: payload,
        };
        let message = match kind {
            FrameKind::Welcome => {
                let version = cursor.u16()?;
                let max_data = cursor.u32()?;
                let name_len = usize::from(cursor.u8()?);
                let server = cursor.utf8(name_len)?;
                let flags = cursor.u16()?;
                if flags & !(WELCOME_TOKEN_REQUIRED | WELCOME_DERIVED_KEYS) != 0 {
                    return Err(ProtoError::Malformed {
                        kind: "welcome",
                        reason: "unknown flag bits set",
                    });
                }
                Message::Welcome(Welcome {
                    version,
                    max_data,
                    server,
                    token_required: flags & WELCOME_TOKEN_REQUIRED != 0,
                    derived_keys: flags & WELCOME_DERIVED_KEYS != 0,
                })
            }
            FrameKind::Auth => {
                check_token_len(payload.len())?;
                return Ok(Message::Auth(AuthToken::new(payload.to_vec())));
            }
            FrameKind::Authorized => Message::Authorized,
            FrameKind::KeyToken => {
                check_key_token_len(payload.len())?;
                return Ok(Message::KeyToken(Secret::new(payload.to_vec())));
            }
            FrameKind::Begin => Message::Begin(decode_begin(&mut cursor)?),
            FrameKind::Data => {
                if payload.is_empty() {
                    return Err(ProtoError::Malformed {
                        kind: "data",
                        reason: "empty data frame",
                    });
                }
                return Ok(Message::Data(payload.to_vec()));
            }
            FrameKind::End => Message::End,
            FrameKind::Queued => Message::Queued(Queued {
                position: cursor.u32()?,
            }),
            FrameKind::Started => Message::Started(Started {
                queue_us: cursor.u64()?,
            }),
            FrameKind::Done => Message::Done(Done {
                bytes_in: cursor.u64()?,
                bytes_out: cursor.u64()?,
                queue_us: cursor.u64()?,
                processing_us: cursor.u64()?,
            }),
            FrameKind::Error => {
                let code = ErrorCode::from_wire(cursor.u16()?);
                let len = usize::from(cursor.u16()?);
                check_len("error message", len, MAX_ERROR_MESSAGE_LEN)?;
                Message::Error(ErrorFrame {
                    code,
                    message: cursor.utf8(len)?,
                })
            }
        };
        cursor.finish()?;
        Ok(message)
    }
}

fn decode_begin(cursor: &mut Cursor<'_>) -> Result<Begin, ProtoError> {
    let operation = match cursor.u8()? {
        1 => Operation::Encrypt,
        2 => Operation::Decrypt,
        3 => Operation::Rewrap,
        4 => Operation::DataKey,
        5 => Operation::Unwrap,
        6 => Operation::DataKeyWrapped,
        other => return Err(ProtoError::UnknownOperation(other)),
    };
    let format = match cursor.u8()? {
        1 => Format::OpensslSaltedPbkdf2,
        2 => Format::Age,
        other => return Err(ProtoError::UnknownFormat(other)),
    };
    let source = cursor.u8()?;
    let params_len = usize::from(cursor.u16()?);
    check_len("key parameters", params_len, MAX_KEY_PARAMS_LEN)?;
    let params = cursor.take(params_len)?;
    let key = match source {
        1 => {
            let mut params = Cursor {
                kind: "begin",
                rest: params,
            };
            let iterations = params.u32()?;
            let password = Password::new(params.rest.to_vec());
            check_len("password", password.as_bytes().len(), MAX_PASSWORD_LEN)?;
            KeySource::Password {
                iterations,
                password,
            }
        }
        2 => {
            if params.len() != DERIVED_KEY_PARAMS_LEN {
                return Err(ProtoError::Malformed {
                    kind: "begin",
                    reason: "key source 2 takes exactly 56 bytes: salt, key, iv",
                });
            }
            let mut params = Cursor {
                kind: "begin",
                rest: params,
            };
            let salt = params.array::<8>()?;
            let mut key = zeroize::Zeroizing::new([0u8; 32]);
            key.copy_from_slice(params.take(32)?);
            let mut iv = zeroize::Zeroizing::new([0u8; 16]);
            iv.copy_from_slice(params.take(16)?);
            KeySource::Derived(DerivedKeyParams { salt, key, iv })
        }
        3 => {
            let (&count, keys) = params.split_first().ok_or(ProtoError::Malformed {
                kind: "begin",
                reason: "key source 3 takes a recipient count, then 32 bytes per recipient",
            })?;
            let count = usize::from(count);
            if count == 0 || count > MAX_AGE_RECIPIENTS || keys.len() != 32 * count {
                return Err(ProtoError::Malformed {
                    kind: "begin",
                    reason: "key source 3 takes 1 to 32 recipients of 32 bytes each, and nothing else",
                });
            }
            KeySource::AgeRecipients(
                keys.chunks_exact(32)
                    .map(|key| <[u8; 32]>::try_from(key).expect("32 bytes"))
                    .collect(),
            )
        }
        4 => {
            let file_key = <[u8; 16]>::try_from(params).map_err(|_| ProtoError::Malformed {
                kind: "begin",
                reason: "key source 4 takes exactly the 16-byte file key",
            })?;
            KeySource::AgeFileKey(AgeFileKey(zeroize::Zeroizing::new(file_key)))
        }
        5 => {
            check_key_name_len(params.len())?;
            let name = std::str::from_utf8(params).map_err(|_| ProtoError::Malformed {
                kind: "begin",
                reason: "key source 5 takes a key name in UTF-8",
            })?;
            KeySource::KeyName(name.to_owned())
        }
        other => return Err(ProtoError::UnknownKeySource(other)),
    };
    let begin = Begin {
        operation,
        format,
        key,
    };
    check_format_and_key(&begin)?;
    Ok(begin)
}

/// Format 1 takes key sources 1 and 2 (either operation); format 2 takes
/// key source 3 to encrypt and 4 to decrypt.
fn check_format_and_key(begin: &Begin) -> Result<(), ProtoError> {
    let fits = match (begin.format, begin.operation, &begin.key) {
        (Format::OpensslSaltedPbkdf2, _, KeySource::Password { .. } | KeySource::Derived(_)) => {
            true
        }
        (Format::Age, Operation::Encrypt, KeySource::AgeRecipients(recipients)) => {
            (1..=MAX_AGE_RECIPIENTS).contains(&recipients.len())
        }
        (Format::Age, Operation::Decrypt, KeySource::AgeFileKey(_)) => true,
        (Format::Age, _, KeySource::KeyName(_)) => true,
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(ProtoError::Malformed {
            kind: "begin",
            reason: "format 1 takes key source 1 or 2; format 2 (age) takes key source 3 (1 to 32 recipients) to encrypt, 4 to decrypt, 5 (a key name) for either, to rewrap, for a data key (with or without its plaintext) and to unwrap",
        })
    }
}

/// An access token must be [`MIN_TOKEN_LEN`]..=[`MAX_TOKEN_LEN`] bytes.
fn check_token_len(len: usize) -> Result<(), ProtoError> {
    check_len("access token", len, MAX_TOKEN_LEN)?;
    if len < MIN_TOKEN_LEN {
        return Err(ProtoError::Malformed {
            kind: "auth",
            reason: "access token shorter than 16 bytes",
        });
    }
    Ok(())
}

/// A keyring token must be 1..=[`MAX_KEY_TOKEN_LEN`] bytes.
fn check_key_token_len(len: usize) -> Result<(), ProtoError> {
    check_len("keyring token", len, MAX_KEY_TOKEN_LEN)?;
    if len == 0 {
        return Err(ProtoError::Malformed {
            kind: "key_token",
            reason: "empty keyring token",
        });
    }
    Ok(())
}

/// A key name must be 1..=[`MAX_KEY_NAME_LEN`] bytes.
fn check_key_name_len(len: usize) -> Result<(), ProtoError> {
    check_len("key name", len, MAX_KEY_NAME_LEN)?;
    if len == 0 {
        return Err(ProtoError::Malformed {
            kind: "begin",
            reason: "key source 5 takes a key name of 1 to 128 bytes",
        });
    }
    Ok(())
}

fn check_len(field: &'static str, len: usize, max: usize) -> Result<(), ProtoError> {
    if len > max {
        Err(ProtoError::FieldTooLong { field, len, max })
    } else {
        Ok(())
    }
}

/// Reads big-endian fields off a payload, failing with a
/// [`ProtoError::Malformed`] when it runs short.
struct Cursor<'a> {
    kind: &'static str,
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if self.rest.len() < n {
            return Err(ProtoError::Malformed {
                kind: self.kind,
                reason: "payload too short",
            });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, ProtoError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ProtoError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn utf8(&mut self, n: usize) -> Result<String, ProtoError> {
        let kind = self.kind;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| ProtoError::Malformed {
            kind,
            reason: "text is not UTF-8",
        })
    }

    fn finish(self) -> Result<(), ProtoError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(ProtoError::Malformed {
                kind: self.kind,
                reason: "trailing bytes after the last field",
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: Message) {
        let bytes = message.to_bytes().expect("encodes");
        let header = FrameHeader::decode(
            bytes[..HEADER_LEN].try_into().expect("header"),
            crate::limits::MAX_FRAME_PAYLOAD,
        )
        .expect("header decodes");
        assert_eq!(header.len as usize, bytes.len() - HEADER_LEN);
        assert_eq!(
            Message::decode(header.kind, &bytes[HEADER_LEN..]),
            Ok(message)
        );
    }

    #[test]
    fn every_message_round_trips() {
        round_trip(Message::Welcome(Welcome {
            version: 1,
            max_data: 65536,
            server: "aesd 0.1.0".into(),
            token_required: false,
            derived_keys: false,
        }));
        round_trip(Message::Welcome(Welcome {
            version: 1,
            max_data: 4096,
            server: String::new(),
            token_required: true,
            derived_keys: true,
        }));
        round_trip(Message::Auth(AuthToken::new(vec![0xa5; MIN_TOKEN_LEN])));
        round_trip(Message::Auth(AuthToken::new(vec![0; MAX_TOKEN_LEN])));
        round_trip(Message::Authorized);
        round_trip(Message::Begin(Begin {
            operation: Operation::Decrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Password {
                iterations: 10_000,
                password: Password::new(b"hunter2".to_vec()),
            },
        }));
        round_trip(Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Derived(DerivedKeyParams {
                salt: [1; 8],
                key: [2; 32].into(),
                iv: [3; 16].into(),
            }),
        }));
        round_trip(Message::Data(vec![7; 300]));
        round_trip(Message::End);
        round_trip(Message::Queued(Queued { position: 3 }));
        round_trip(Message::Started(Started { queue_us: 12 }));
        round_trip(Message::Done(Done {
            bytes_in: 1 << 40,
            bytes_out: (1 << 40) + 16,
            queue_us: 5,
            processing_us: 6,
        }));
        round_trip(Message::Error(ErrorFrame::new(
            ErrorCode::Busy,
            "queue full",
        )));
    }

    #[test]
    fn short_and_long_payloads_are_malformed() {
        assert!(matches!(
            Message::decode(FrameKind::Done, &[0; 31]),
            Err(ProtoError::Malformed {
                reason: "payload too short",
                ..
            })
        ));
        assert!(matches!(
            Message::decode(FrameKind::End, &[0]),
            Err(ProtoError::Malformed { .. })
        ));
        assert!(matches!(
            Message::decode(FrameKind::Data, &[]),
            Err(ProtoError::Malformed { .. })
        ));
    }

    #[test]
    fn unknown_begin_fields_are_typed_errors() {
        let payload = [9, 1, 1, 0, 4, 0, 0, 0, 1];
        assert_eq!(
            Message::decode(FrameKind::Begin, &payload),
            Err(ProtoError::UnknownOperation(9))
        );
        let payload = [1, 9, 1, 0, 4, 0, 0, 0, 1];
        assert_eq!(
            Message::decode(FrameKind::Begin, &payload),
            Err(ProtoError::UnknownFormat(9))
        );
        let payload = [1, 1, 9, 0, 4, 0, 0, 0, 1];
        assert_eq!(
            Message::decode(FrameKind::Begin, &payload),
            Err(ProtoError::UnknownKeySource(9))
        );
    }

    #[test]
    fn by_name_operations_round_trip_with_their_wire_numbers_and_names() {
        for (operation, wire, name) in [
            (Operation::Encrypt, 1, "encrypt"),
            (Operation::Decrypt, 2, "decrypt"),
            (Operation::Rewrap, 3, "rewrap"),
            (Operation::DataKey, 4, "datakey"),
            (Operation::Unwrap, 5, "unwrap"),
            (Operation::DataKeyWrapped, 6, "datakey-wrapped"),
        ] {
            assert_eq!((operation.wire(), operation.name()), (wire, name));
            let begin = Message::Begin(Begin {
                operation,
                format: Format::Age,
                key: KeySource::KeyName("files".into()),
            });
            round_trip(begin.clone());
            let bytes = begin.to_bytes().expect("encodes");
            assert_eq!(bytes[HEADER_LEN], wire, "{operation:?} on the wire");
        }
        // The next number is unknown; the known one with the same frame
        // decodes (the operation byte is why).
        let payload = [7, 2, 5, 0, 1, b'k'];
        assert_eq!(
            Message::decode(FrameKind::Begin, &payload),
            Err(ProtoError::UnknownOperation(7))
        );
        assert!(matches!(
            Message::decode(FrameKind::Begin, &[6, 2, 5, 0, 1, b'k']),
            Ok(Message::Begin(Begin {
                operation: Operation::DataKeyWrapped,
                ..
            }))
        ));
    }

    #[test]
    fn age_begins_round_trip_and_mismatched_formats_and_key_sources_are_refused() {
        round_trip(Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::Age,
            key: KeySource::AgeRecipients(vec![[1; 32], [2; 32]]),
        }));
        round_trip(Message::Begin(Begin {
            operation: Operation::Decrypt,
            format: Format::Age,
            key: KeySource::AgeFileKey(AgeFileKey(zeroize::Zeroizing::new([3; 16]))),
        }));
        let mismatched = [
            (
                Operation::Decrypt,
                Format::Age,
                KeySource::AgeRecipients(vec![[1; 32]]),
            ),
            (
                Operation::Encrypt,
                Format::Age,
                KeySource::AgeRecipients(vec![]),
            ),
            (
                Operation::Encrypt,
                Format::Age,
                KeySource::AgeRecipients(vec![[1; 32]; MAX_AGE_RECIPIENTS + 1]),
            ),
            (
                Operation::Encrypt,
                Format::OpensslSaltedPbkdf2,
                KeySource::AgeFileKey(AgeFileKey(zeroize::Zeroizing::new([3; 16]))),
            ),
            (
                Operation::Encrypt,
                Format::Age,
                KeySource::Password {
                    iterations: 1,
                    password: Password::new(b"pw".to_vec()),
                },
            ),
            // Data keys and unwrapping are by name only.
            (
                Operation::DataKey,
                Format::Age,
                KeySource::AgeRecipients(vec![[1; 32]]),
            ),
            (
                Operation::Unwrap,
                Format::Age,
                KeySource::AgeFileKey(AgeFileKey(zeroize::Zeroizing::new([3; 16]))),
            ),
            (
                Operation::DataKeyWrapped,
                Format::Age,
                KeySource::AgeRecipients(vec![[1; 32]]),
            ),
            (
                Operation::DataKeyWrapped,
                Format::OpensslSaltedPbkdf2,
                KeySource::KeyName("files".into()),
            ),
        ];
        for (operation, format, key) in mismatched {
            let begin = Message::Begin(Begin {
                operation,
                format,
                key,
            });
            let mut out = Vec::new();
            assert!(
                matches!(
                    begin.encode(&mut out),
                    Err(ProtoError::Malformed { kind: "begin", .. })
                ),
                "{begin:?} encoded"
            );
        }
        // Decoding refuses them too: format 2, decrypt, key source 3.
        let mut payload = vec![2, 2, 3, 0, 33, 1];
        payload.extend_from_slice(&[5; 32]);
        assert!(matches!(
            Message::decode(FrameKind::Begin, &payload),
            Err(ProtoError::Malformed { kind: "begin", .. })
        ));
        // A count that disagrees with the keys that follow.
        let mut payload = vec![1, 2, 3, 0, 33, 2];
        payload.extend_from_slice(&[5; 32]);
        assert!(matches!(
            Message::decode(FrameKind::Begin, &payload),
            Err(ProtoError::Malformed { kind: "begin", .. })
        ));
    }

    #[test]
    fn over_long_password_is_refused_both_ways() {
        let begin = Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Password {
                iterations: 1,
                password: Password::new(vec![b'x'; MAX_PASSWORD_LEN + 1]),
            },
        });
        assert!(matches!(
            begin.to_bytes(),
            Err(ProtoError::FieldTooLong {
                field: "password",
                ..
            })
        ));
    }

    #[test]
    fn access_tokens_out_of_bounds_are_refused_both_ways() {
        for len in [0, MIN_TOKEN_LEN - 1, MAX_TOKEN_LEN + 1] {
            let auth = Message::Auth(AuthToken::new(vec![1; len]));
            assert!(auth.to_bytes().is_err(), "encoding {len} bytes");
            assert!(
                Message::decode(FrameKind::Auth, &vec![1; len]).is_err(),
                "decoding {len} bytes"
            );
        }
    }

    #[test]
    fn derived_key_params_must_be_exactly_56_bytes() {
        for len in [0usize, 55, 57] {
            let mut payload = vec![1, 1, 2];
            payload.extend_from_slice(&(len as u16).to_be_bytes());
            payload.extend(std::iter::repeat_n(7, len));
            assert!(
                matches!(
                    Message::decode(FrameKind::Begin, &payload),
                    Err(ProtoError::Malformed { kind: "begin", .. })
                ),
                "{len} bytes"
            );
        }
    }

    #[test]
    fn derived_keys_are_never_printed() {
        let params = DerivedKeyParams {
            salt: [1; 8],
            key: [0xab; 32].into(),
            iv: [0xcd; 16].into(),
        };
        let shown = format!("{params:?}");
        assert!(
            !shown.contains("171") && !shown.contains("ab, ab"),
            "{shown}"
        );
        assert!(!shown.contains("205"), "{shown}");
    }

    #[test]
    fn unknown_welcome_flags_are_malformed() {
        let mut bytes = Message::Welcome(Welcome {
            version: 1,
            max_data: 4096,
            server: "s".into(),
            token_required: false,
            derived_keys: false,
        })
        .to_bytes()
        .expect("encodes");
        let last = bytes.len() - 1;
        bytes[last] = 0b100;
        assert!(matches!(
            Message::decode(FrameKind::Welcome, &bytes[HEADER_LEN..]),
            Err(ProtoError::Malformed {
                kind: "welcome",
                ..
            })
        ));
    }

    #[test]
    fn password_is_never_printed() {
        let password = Password::new(b"secret".to_vec());
        assert!(!format!("{password:?}").contains("secret"));
    }

    #[test]
    fn error_messages_are_cut_at_a_character_boundary() {
        let error = ErrorFrame::new(ErrorCode::Internal, "é".repeat(MAX_ERROR_MESSAGE_LEN));
        assert!(error.message.len() <= MAX_ERROR_MESSAGE_LEN);
        round_trip(Message::Error(error));
    }
}
