//! The client checks that an encryption's output starts with the header it
//! asked for: `Salted__` and, when it derived the key (key source 2), the
//! salt it sent. A server answering under another salt would otherwise
//! leave a file no password decrypts, reported as a success.

use aesd_client::{Client, ClientError, JobSpec};
use aesd_proto::{Done, KeySource, Message, Operation, Started};
use aesd_testkit::fake_server::{Reader, Writer, fake_server_with_derived_keys};

/// Takes one encryption and answers `Salted__`, the begin's salt with its
/// bytes xor-ed with `flip`, 16 more bytes and honest counts.
async fn answer_with_salt(mut reader: Reader, mut writer: Writer, flip: u8) {
    let Ok(Some(Message::Begin(begin))) = reader.read_message().await else {
        panic!("expected a begin");
    };
    let KeySource::Derived(params) = begin.key else {
        panic!("the client derives the key when the server allows it");
    };
    writer
        .send(&Message::Started(Started { queue_us: 0 }))
        .await
        .expect("started");
    let mut input = 0;
    loop {
        match reader.read_message().await {
            Ok(Some(Message::Data(bytes))) => input += bytes.len() as u64,
            Ok(Some(Message::End)) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    let mut output = b"Salted__".to_vec();
    output.extend(params.salt.iter().map(|byte| byte ^ flip));
    output.extend_from_slice(&[9; 16]);
    let _ = writer.send_data(&output).await;
    let _ = writer
        .send(&Message::Done(Done {
            bytes_in: input,
            bytes_out: output.len() as u64,
            queue_us: 0,
            processing_us: 0,
        }))
        .await;
    let _ = reader.read_message().await;
}

async fn encrypt_with(flip: u8) -> Result<Vec<u8>, ClientError> {
    let addr = fake_server_with_derived_keys(65_536, move |reader, writer| {
        answer_with_salt(reader, writer, flip)
    })
    .await;
    let mut client = Client::connect(&addr.to_string()).await?;
    let mut output = Vec::new();
    client
        .run_job(
            &JobSpec::with_password(Operation::Encrypt, "pw", 1000),
            &mut &[1u8; 10][..],
            &mut output,
        )
        .await?;
    Ok(output)
}

#[tokio::test]
async fn an_encryption_under_another_salt_fails() {
    let err = encrypt_with(0x01).await.expect_err("another salt");
    assert!(matches!(err, ClientError::WrongHeader { .. }), "{err}");
    assert!(err.to_string().contains("would not decrypt"), "{err}");
    assert_eq!(err.kind(), "protocol");
    // The negative control: the salt sent comes back, the job succeeds.
    let output = encrypt_with(0).await.expect("the salt this client sent");
    assert_eq!(output.len(), 32);
    assert!(output.starts_with(b"Salted__"));
}
