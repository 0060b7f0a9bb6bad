//! A connection to aesd: connect, handshake, then jobs (see [`crate::job`]).

use std::time::Duration;

use aesd_proto::handshake::PROTOCOL_VERSION;
use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameReader, FrameWriter, Hello, Message, Welcome};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::error::ClientError;

/// How long [`Client::connect`] waits for the TCP connection and welcome.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An open, handshaken connection to an aesd server.
pub struct Client {
    pub(crate) reader: FrameReader<OwnedReadHalf>,
    pub(crate) writer: FrameWriter<OwnedWriteHalf>,
    pub(crate) welcome: Welcome,
    pub(crate) broken: bool,
}

impl Client {
    /// Connects to `addr` (`host:port`) and performs the handshake.
    pub async fn connect(addr: &str) -> Result<Client, ClientError> {
        tokio::time::timeout(CONNECT_TIMEOUT, Self::connect_inner(addr))
            .await
            .map_err(|_| ClientError::ConnectTimeout {
                addr: addr.to_owned(),
                secs: CONNECT_TIMEOUT.as_secs(),
            })?
    }

    async fn connect_inner(addr: &str) -> Result<Client, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        // Output chunks are the input chunk plus at most a block of carry
        // and a block of padding; accept anything up to the protocol cap.
        let mut reader = FrameReader::new(read, MAX_FRAME_PAYLOAD);
        let mut writer = FrameWriter::new(write);
        writer.send_hello(Hello::current()).await?;
        let welcome = match reader.read_message().await? {
            Some(Message::Welcome(welcome)) => welcome,
            Some(Message::Error(error)) => return Err(ClientError::Server(error)),
            Some(other) => {
                return Err(ClientError::Unexpected {
                    got: other.kind().name(),
                    state: "instead of the welcome",
                });
            }
            None => return Err(ClientError::Closed),
        };
        if welcome.version != PROTOCOL_VERSION {
            return Err(ClientError::Version(welcome.version));
        }
        Ok(Client {
            reader,
            writer,
            welcome,
            broken: false,
        })
    }

    /// The server's welcome: its name and data limit.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Closes the connection cleanly.
    pub async fn close(mut self) {
        let _ = self.writer.shutdown().await;
    }
}
