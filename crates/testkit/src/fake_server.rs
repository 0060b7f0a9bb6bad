//! A fake aesd on loopback for tests of the clients against servers that
//! break the protocol's promises: it reads the hello, sends a welcome
//! announcing any `max_data`, then runs a script of raw frames per
//! connection.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameReader, FrameWriter, Message, Started, Welcome};
use tokio::net::TcpListener;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The fake server's reading half of one connection.
pub type Reader = FrameReader<OwnedReadHalf>;
/// The fake server's writing half of one connection.
pub type Writer = FrameWriter<OwnedWriteHalf>;

/// A server on loopback that, for every connection, reads the hello,
/// sends a welcome announcing `max_data`, then runs `script`.
pub async fn fake_server<S, F>(max_data: u32, script: S) -> SocketAddr
where
    S: Fn(Reader, Writer) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    serve(max_data, false, script).await
}

/// [`fake_server`] whose welcome accepts keys derived by the client (key
/// source 2), so a client sends its salt, key and IV.
pub async fn fake_server_with_derived_keys<S, F>(max_data: u32, script: S) -> SocketAddr
where
    S: Fn(Reader, Writer) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    serve(max_data, true, script).await
}

async fn serve<S, F>(max_data: u32, derived_keys: bool, script: S) -> SocketAddr
where
    S: Fn(Reader, Writer) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (read, write) = stream.into_split();
            let mut reader = FrameReader::new(read, MAX_FRAME_PAYLOAD);
            let mut writer = FrameWriter::new(write);
            if reader.read_hello().await.is_err() {
                continue;
            }
            let welcome = Message::Welcome(Welcome {
                version: 1,
                max_data,
                server: "fake".into(),
                token_required: false,
                derived_keys,
            });
            if writer.send(&welcome).await.is_ok() {
                tokio::spawn(script(reader, writer));
            }
        }
    });
    addr
}

/// Reads a begin, says started, reads data until end; the input's length.
pub async fn take_job(reader: &mut Reader, writer: &mut Writer) -> u64 {
    assert!(matches!(
        reader.read_message().await,
        Ok(Some(Message::Begin(_)))
    ));
    writer
        .send(&Message::Started(Started { queue_us: 0 }))
        .await
        .expect("started");
    let mut input = 0;
    loop {
        match reader.read_message().await {
            Ok(Some(Message::Data(bytes))) => input += bytes.len() as u64,
            Ok(Some(Message::End)) => return input,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Takes the job, then says nothing while keeping the connection open.
pub async fn silent_after_started(mut reader: Reader, mut writer: Writer) {
    take_job(&mut reader, &mut writer).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
}
