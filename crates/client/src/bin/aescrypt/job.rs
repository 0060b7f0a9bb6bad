//! The job itself: connect, run it in its format, write the output (a file
//! replaced only once the job succeeded).

use aesd_cli::output::OutputPath;
use aesd_client::{AgeSpec, Client, ConnectOptions, JobSpec};
use anyhow::{Context, Result, bail};
use tokio::io::{AsyncRead, AsyncWriteExt};

use crate::args::{Args, operation};
use crate::key::JobKey;
use crate::paths::is_stdio;

pub(crate) async fn run(args: &Args, output: OutputPath, key: JobKey) -> Result<()> {
    let spec = match key {
        JobKey::Password(password) => Spec::Openssl(JobSpec {
            operation: operation(args.mode),
            password,
            iterations: args.iterations,
            key_derivation: args.key_derivation,
        }),
        JobKey::Age(spec) => Spec::Age(spec),
        JobKey::ByName { name, token } => Spec::ByName {
            operation: operation(args.mode),
            name,
            token,
            local: args.local,
        },
    };
    let mut input: Box<dyn AsyncRead + Unpin> = if is_stdio(&args.input) {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(
            tokio::fs::File::open(&args.input)
                .await
                .with_context(|| format!("cannot open input {}", args.input.display()))?,
        )
    };
    if !output.is_stdout() && args.output == args.input {
        bail!(
            "input and output are the same file: {}",
            args.output.display()
        );
    }
    // With --key, the file holds the keyring token (sent below).
    let token = args.keys.access_token("aescrypt")?;
    let options = ConnectOptions {
        token,
        tls: args.tls.settings()?,
        bind: None,
    };
    let mut client = Client::connect_within(&args.server, &options, args.timeout).await?;
    if let Some(warning) = client.cleartext_warning() {
        eprintln!("aescrypt: {warning}");
    }
    client.set_idle_timeout(args.timeout);
    if let Spec::ByName { token, .. } = &spec {
        client.send_key_token(token.as_bytes()).await?;
    }
    let ran = if output.is_stdout() {
        let mut stdout = tokio::io::stdout();
        spec.run(&mut client, &mut input, &mut stdout).await?
    } else {
        write_via(&output, &mut client, &spec, &mut input).await?
    };
    client.close().await;
    let report = match ran {
        Ran::Server(report) => report,
        Ran::Local(local) => {
            if args.verbose {
                eprintln!(
                    "aescrypt: --local: {} bytes in, {} bytes out on this machine; the key job:",
                    local.bytes_in, local.bytes_out
                );
            }
            local.key_job
        }
    };
    if args.verbose {
        eprintln!(
            "aescrypt: {} bytes in, {} bytes out; total {:.6} s = queue {:.6} s + processing {:.6} s + network {:.6} s",
            report.bytes_sent,
            report.bytes_received,
            report.total.as_secs_f64(),
            report.queue.as_secs_f64(),
            report.processing.as_secs_f64(),
            report.network.as_secs_f64()
        );
    }
    Ok(())
}

/// Runs the job into `output` (a file through a temporary file renamed
/// over it once the job succeeded, a device or FIFO straight through); on
/// any failure a temporary file is removed and a file output untouched.
async fn write_via(
    output: &OutputPath,
    client: &mut Client,
    spec: &Spec,
    input: &mut (dyn AsyncRead + Unpin),
) -> Result<Ran> {
    let (pending, file) = output.open()?.into_file();
    let file = file.context("the output has no file")?;
    let mut writer = tokio::io::BufWriter::new(tokio::fs::File::from_std(file));
    let ran = spec.run(client, &mut &mut *input, &mut writer).await?;
    writer
        .flush()
        .await
        .with_context(|| format!("cannot write {}", output.path().display()))?;
    let file = writer.into_inner().into_std().await;
    pending.commit(Some(file))?;
    Ok(ran)
}

/// What ran: a job on the server, or a file processed here (--local).
enum Ran {
    /// The job's figures.
    Server(aesd_client::JobReport),
    /// The local figures and the key job's.
    Local(aesd_client::LocalReport),
}

/// The job to run, in its format.
enum Spec {
    Openssl(JobSpec),
    Age(AgeSpec),
    ByName {
        operation: aesd_proto::Operation,
        name: String,
        token: aesd_proto::Secret,
        /// --local: the payload is encrypted or decrypted here.
        local: bool,
    },
}

impl Spec {
    async fn run<R, W>(
        &self,
        client: &mut Client,
        input: &mut R,
        output: &mut W,
    ) -> Result<Ran, aesd_client::ClientError>
    where
        R: AsyncRead + Unpin,
        W: tokio::io::AsyncWrite + Unpin,
    {
        use aesd_proto::Operation;
        let report = match self {
            Spec::Openssl(spec) => client.run_job(spec, input, output).await?,
            Spec::Age(spec) => {
                client
                    .run_age_job_observed(spec, input, output, |_| {})
                    .await?
            }
            Spec::ByName {
                operation: Operation::Encrypt,
                name,
                local: true,
                ..
            } => {
                let local = client.encrypt_locally(name, input, output).await?;
                return Ok(Ran::Local(local));
            }
            Spec::ByName {
                operation: Operation::Decrypt,
                name,
                local: true,
                ..
            } => {
                let local = client.decrypt_locally(name, input, output).await?;
                return Ok(Ran::Local(local));
            }
            Spec::ByName {
                operation: Operation::Rewrap,
                name,
                ..
            } => {
                // The header goes to the server; the payload is copied
                // here, byte for byte.
                let rewrapped = client.rewrap_header(name, input).await?;
                // The server's part is done: it does not wait for the copy.
                client.shutdown_writes().await;
                output
                    .write_all(&rewrapped.header)
                    .await
                    .map_err(aesd_client::ClientError::Output)?;
                output
                    .write_all(&rewrapped.payload_start)
                    .await
                    .map_err(aesd_client::ClientError::Output)?;
                tokio::io::copy(input, output)
                    .await
                    .map_err(aesd_client::ClientError::Output)?;
                rewrapped.report
            }
            Spec::ByName {
                operation, name, ..
            } => {
                client
                    .run_by_name_job_observed(*operation, name, input, output, |_| {})
                    .await?
            }
        };
        Ok(Ran::Server(report))
    }
}
