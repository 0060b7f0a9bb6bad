//! Hard caps on every length and count in the protocol.
//!
//! A peer that announces more than these is rejected before any memory is
//! reserved for it. Servers may configure lower limits (for example a
//! smaller data chunk), never higher ones.

/// Largest payload any frame may carry (1 MiB). Data frames are usually
/// much smaller: see [`DEFAULT_DATA_CHUNK`].
pub const MAX_FRAME_PAYLOAD: u32 = 1 << 20;

/// Smallest data payload limit a server may announce in its
/// [`Welcome`](crate::Welcome) (4 KiB): a smaller `max_data` is a broken
/// or hostile server, and clients refuse it.
pub const MIN_DATA_CHUNK: u32 = 4096;

/// Data chunk size a client uses unless the server's
/// [`Welcome`](crate::Welcome) asks for less (64 KiB).
pub const DEFAULT_DATA_CHUNK: u32 = 64 * 1024;

/// Longest password accepted in a [`Begin`](crate::Begin) (bytes).
pub const MAX_PASSWORD_LEN: usize = 1024;

/// Shortest access token accepted in an [`Auth`](crate::Message::Auth)
/// frame, and by a server's `token-file` (bytes): 16 bytes is 128 bits
/// when the token is random bytes, the least worth guarding a service with.
pub const MIN_TOKEN_LEN: usize = 16;

/// Longest access token accepted in an [`Auth`](crate::Message::Auth) frame
/// (bytes).
pub const MAX_TOKEN_LEN: usize = 256;

/// Longest keyring token accepted in a
/// [`KeyToken`](crate::Message::KeyToken) frame (bytes). Keyring tokens
/// may be as short as one byte (a dev root token such as `root`): they
/// are the keyring's, checked against its token store, not a pre-shared
/// secret.
pub const MAX_KEY_TOKEN_LEN: usize = 512;

/// Longest key name in a by-name [`Begin`](crate::Begin) (key source 5),
/// as the keyring allows (bytes).
pub const MAX_KEY_NAME_LEN: usize = 128;

/// Longest human-readable message in an error frame (bytes of UTF-8).
pub const MAX_ERROR_MESSAGE_LEN: usize = 1024;

/// Longest server name in a [`Welcome`](crate::Welcome) (bytes of UTF-8).
pub const MAX_SERVER_NAME_LEN: usize = 255;

/// Largest key-source parameter block in a [`Begin`](crate::Begin) (bytes).
pub const MAX_KEY_PARAMS_LEN: usize = 4 + MAX_PASSWORD_LEN;

/// Largest control (non-data) frame payload: the larger of a begin frame
/// with the longest password and an error frame with the longest message.
pub const MAX_CONTROL_PAYLOAD: u32 = {
    let begin = 5 + MAX_KEY_PARAMS_LEN;
    let error = 4 + MAX_ERROR_MESSAGE_LEN;
    (if begin > error { begin } else { error }) as u32
};
