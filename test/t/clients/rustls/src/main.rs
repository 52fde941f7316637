//! rustls_copy: a PostgreSQL client on tokio-postgres over rustls, for
//! test/t/025_gnutls_rustls.pl; the same modes and JSON line as
//! test/t/clients/gnutls_copy.c.
//!
//! Debian 12 packages no adapter between tokio-postgres and rustls
//! (tokio-postgres-rustls), so `MakeRustls` below is one: a
//! `MakeTlsConnect` over tokio-rustls.  rustls keeps KeyUpdates to itself
//! (no hook, no counter), so `key_updates_received` and `key_updates_sent`
//! are null: the server's row (rekeys_sent, rekeys_received) says how many
//! there were.  rustls does not renegotiate: to a TLS 1.2 HelloRequest it
//! answers with a no_renegotiation warning alert, so `renegotiations` is
//! always 0.
//!
//! Options: --host --port --user --dbname --appname --cafile (required:
//! the server's certificate is verified, for the name "localhost") --tls
//! 1.2|1.3 --copy-out ROWS --copy-in ROWS --table T --filler N --long
//! QUERIES --payload BYTES --pause-ms MS --hold.

use std::error::Error as StdError;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::{pin_mut, SinkExt, StreamExt};
use md5::{Digest, Md5};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_postgres::{Client, SimpleQueryMessage};

/// What the handshake negotiated, kept for the JSON line.
#[derive(Default)]
struct Negotiated {
    version: String,
    cipher: String,
}

#[derive(Clone)]
struct MakeRustls {
    connector: tokio_rustls::TlsConnector,
    negotiated: Arc<Mutex<Negotiated>>,
}

struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    negotiated: Arc<Mutex<Negotiated>>,
}

struct RustlsStream(tokio_rustls::client::TlsStream<Socket>);

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, _domain: &str) -> Result<RustlsConnect, io::Error> {
        Ok(RustlsConnect {
            connector: self.connector.clone(),
            negotiated: self.negotiated.clone(),
        })
    }
}

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            // the test's certificate names localhost and 127.0.0.1; webpki
            // 0.22 verifies DNS names only
            let name = rustls::ServerName::try_from("localhost")
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let tls = self.connector.connect(name, stream).await?;
            {
                let conn = tls.get_ref().1;
                let mut n = self.negotiated.lock().unwrap();
                n.version = conn
                    .protocol_version()
                    .map(|v| format!("{:?}", v))
                    .unwrap_or_default();
                n.cipher = conn
                    .negotiated_cipher_suite()
                    .map(|s| format!("{:?}", s.suite()))
                    .unwrap_or_default();
            }
            Ok(RustlsStream(tls))
        })
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        // trust or cleartext password only: no SCRAM channel binding
        ChannelBinding::none()
    }
}

struct Opts {
    host: String,
    port: u16,
    user: String,
    dbname: String,
    appname: String,
    password: Option<String>,
    cafile: Option<String>,
    tls: String,
    copy_out: u64,
    copy_in: u64,
    table: String,
    filler: usize,
    long: u64,
    payload: usize,
    pause_ms: u64,
    hold: bool,
}

#[derive(Default)]
struct Report {
    stage: &'static str,
    error: Option<String>,
    error_text: String,
    server_error: String,
    pid: i64,
    out_md5: String,
    out_bytes: u64,
    out_rows: u64,
    in_md5: String,
    in_bytes: u64,
    in_rows: u64,
    queries: u64,
    long_bytes_in: u64,
    alive: Option<bool>,
}

fn usage() -> ! {
    eprintln!(
        "usage: rustls_copy [--host H] [--port P] [--user U] [--dbname D] [--appname A]\n\
         \x20        [--password PW] --cafile CA [--tls 1.2|1.3]\n\
         \x20        [--copy-out ROWS] [--copy-in ROWS] [--table T] [--filler N]\n\
         \x20        [--long QUERIES] [--payload BYTES] [--pause-ms MS] [--hold]"
    );
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        host: "127.0.0.1".into(),
        port: 5432,
        user: "postgres".into(),
        dbname: "postgres".into(),
        appname: "rustls_copy".into(),
        password: std::env::var("PGPASSWORD").ok(),
        cafile: None,
        tls: "1.3".into(),
        copy_out: 0,
        copy_in: 0,
        table: "copy_in".into(),
        filler: 70,
        long: 0,
        payload: 20000,
        pause_ms: 0,
        hold: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--hold" {
            o.hold = true;
            continue;
        }
        let v = args.next().unwrap_or_else(|| usage());
        let num = |v: &str| v.parse::<u64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--host" => o.host = v,
            "--port" => o.port = num(&v) as u16,
            "--user" => o.user = v,
            "--dbname" => o.dbname = v,
            "--appname" => o.appname = v,
            "--password" => o.password = Some(v),
            "--cafile" => o.cafile = Some(v),
            "--tls" => o.tls = v,
            "--copy-out" => o.copy_out = num(&v),
            "--copy-in" => o.copy_in = num(&v),
            "--table" => o.table = v,
            "--filler" => o.filler = num(&v) as usize,
            "--long" => o.long = num(&v),
            "--payload" => o.payload = num(&v) as usize,
            "--pause-ms" => o.pause_ms = num(&v),
            _ => usage(),
        }
    }
    if o.cafile.is_none() || (o.tls != "1.2" && o.tls != "1.3") {
        usage();
    }
    o
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn print_json(phase: &str, ok: bool, o: &Opts, r: &Report, neg: &Negotiated, t0: Instant) {
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"client\":\"rustls\",\"library\":\"rustls 0.20 (tokio-rustls 0.23, tokio-postgres 0.7)\",\
         \"phase\":\"{}\",\"ok\":{},\"stage\":{},\"error\":{},\"error_text\":{},\"server_error\":{},\
         \"tls_version\":{},\"cipher\":{},\"pid\":{}",
        phase,
        ok,
        json_str(r.stage),
        r.error.as_deref().map(json_str).unwrap_or_else(|| "null".into()),
        json_str(&r.error_text),
        json_str(&r.server_error),
        json_str(&neg.version),
        json_str(&neg.cipher),
        r.pid
    );
    if o.copy_out > 0 {
        let _ = write!(
            s,
            ",\"out_md5\":{},\"out_bytes\":{},\"out_rows\":{}",
            json_str(&r.out_md5),
            r.out_bytes,
            r.out_rows
        );
    }
    if o.copy_in > 0 {
        let _ = write!(
            s,
            ",\"in_md5\":{},\"in_bytes\":{},\"in_rows\":{}",
            json_str(&r.in_md5),
            r.in_bytes,
            r.in_rows
        );
    }
    if o.long > 0 {
        let _ = write!(s, ",\"queries\":{},\"long_bytes_in\":{}", r.queries, r.long_bytes_in);
    }
    let _ = write!(
        s,
        ",\"key_updates_received\":null,\"key_updates_sent\":null,\"renegotiations\":0,\
         \"alive\":{},\"elapsed_ms\":{}}}",
        match r.alive {
            None => "null",
            Some(true) => "true",
            Some(false) => "false",
        },
        t0.elapsed().as_millis()
    );
    println!("{}", s);
}

/// Fills the report's error fields from a tokio-postgres error: the server's
/// ErrorResponse if there was one, and the innermost cause (for a TLS
/// failure, the rustls::Error inside the io::Error) as the error's name.
fn note_error(r: &mut Report, e: &tokio_postgres::Error) {
    if let Some(db) = e.as_db_error() {
        r.server_error = format!(
            "{} {}: {}{}",
            db.severity(),
            db.code().code(),
            db.message(),
            db.hint().map(|h| format!(" (hint: {})", h)).unwrap_or_default()
        );
        r.error = Some("SERVER_ERROR".into());
    }
    let mut text = e.to_string();
    let mut name = String::from("tokio_postgres::Error");
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(c) = cur {
        let _ = write!(text, ": {}", c);
        if let Some(ioe) = c.downcast_ref::<io::Error>() {
            name = match ioe.get_ref() {
                Some(inner) => format!("{:?}", inner),
                None => format!("io::ErrorKind::{:?}", ioe.kind()),
            };
        } else if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            name = format!("{:?}", tls);
        }
        cur = c.source();
    }
    if r.error.is_none() {
        // no cause inside (the connection was closed, say): its own text
        r.error = Some(if e.source().is_none() { e.to_string() } else { name });
    }
    r.error_text = text;
}

fn row_bytes(i: u64, filler: usize, buf: &mut BytesMut) {
    let num = i.to_string();
    let d = Md5::digest(num.as_bytes());
    buf.put_slice(num.as_bytes());
    buf.put_u8(b'\t');
    for b in d.iter() {
        let _ = write!(HexTo(buf), "{:02x}", b);
    }
    buf.put_bytes(b'x', filler);
    buf.put_u8(b'\n');
}

struct HexTo<'a>(&'a mut BytesMut);

impl std::fmt::Write for HexTo<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.put_slice(s.as_bytes());
        Ok(())
    }
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{:02x}", b)).collect()
}

async fn work(o: &Opts, r: &mut Report, client: &Client) -> Result<(), tokio_postgres::Error> {
    r.stage = "pid";
    for m in client.simple_query("SELECT pg_backend_pid()").await? {
        if let SimpleQueryMessage::Row(row) = m {
            r.pid = row.get(0).unwrap_or("-1").parse().unwrap_or(-1);
        }
    }

    if o.copy_out > 0 {
        r.stage = "copy_out";
        let sql = format!(
            "COPY (SELECT i, md5(i::text) || repeat('x', {}) FROM generate_series(1, {}) i) TO STDOUT",
            o.filler, o.copy_out
        );
        let mut h = Md5::new();
        let stream = client.copy_out(sql.as_str()).await?;
        pin_mut!(stream);
        let res: Result<(), tokio_postgres::Error> = async {
            while let Some(b) = stream.next().await {
                let b = b?;
                h.update(&b);
                r.out_bytes += b.len() as u64;
                r.out_rows += b.iter().filter(|&&c| c == b'\n').count() as u64;
            }
            Ok(())
        }
        .await;
        r.out_md5 = hex(&h.finalize());
        res?;
    }

    if o.copy_in > 0 {
        r.stage = "copy_in";
        let sink = client
            .copy_in(format!("COPY {} (i, s) FROM STDIN", o.table).as_str())
            .await?;
        pin_mut!(sink);
        let mut h = Md5::new();
        let mut buf = BytesMut::with_capacity(80 * 1024);
        for i in 1..=o.copy_in {
            let start = buf.len();
            row_bytes(i, o.filler, &mut buf);
            h.update(&buf[start..]);
            r.in_rows += 1;
            if buf.len() >= 64 * 1024 {
                r.in_bytes += buf.len() as u64;
                let chunk: Bytes = buf.split().freeze();
                sink.send(chunk).await?;
            }
        }
        if !buf.is_empty() {
            r.in_bytes += buf.len() as u64;
            sink.send(buf.split().freeze()).await?;
        }
        r.in_md5 = hex(&h.finalize());
        sink.as_mut().finish().await?;
    }

    if o.long > 0 {
        r.stage = "long";
        let sql = format!(
            "SELECT length('{}'), repeat('r', {})",
            "q".repeat(o.payload),
            o.payload
        );
        for _ in 0..o.long {
            for m in client.simple_query(sql.as_str()).await? {
                if let SimpleQueryMessage::Row(row) = m {
                    r.long_bytes_in += row.get(1).map(|s| s.len()).unwrap_or(0) as u64;
                }
            }
            r.queries += 1;
            if o.pause_ms > 0 {
                tokio::time::sleep(Duration::from_millis(o.pause_ms)).await;
            }
        }
    }
    Ok(())
}

fn tls_config(o: &Opts) -> Result<rustls::ClientConfig, String> {
    let path = o.cafile.as_deref().unwrap();
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {}", path, e))?;
    let certs = rustls_pemfile::certs(&mut io::BufReader::new(f))
        .map_err(|e| format!("{}: {}", path, e))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(&certs);
    if added == 0 {
        return Err(format!("{}: no certificate", path));
    }
    static TLS13_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
    static TLS12_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
    let versions: &[&rustls::SupportedProtocolVersion] = if o.tls == "1.3" {
        &TLS13_ONLY
    } else {
        &TLS12_ONLY
    };
    Ok(rustls::ClientConfig::builder()
        .with_safe_default_cipher_suites()
        .with_safe_default_kx_groups()
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

async fn run(o: Opts) -> i32 {
    let t0 = Instant::now();
    let negotiated = Arc::new(Mutex::new(Negotiated::default()));
    let mut r = Report {
        stage: "connect",
        pid: -1,
        ..Default::default()
    };
    let fail = |r: &Report, neg: &Arc<Mutex<Negotiated>>| {
        print_json("final", false, &o, r, &neg.lock().unwrap(), t0);
        1
    };

    let config = match tls_config(&o) {
        Ok(c) => c,
        Err(e) => {
            r.error = Some("CONFIG".into());
            r.error_text = e;
            return fail(&r, &negotiated);
        }
    };
    let tls = MakeRustls {
        connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        negotiated: negotiated.clone(),
    };
    let mut pg = tokio_postgres::Config::new();
    pg.host(&o.host)
        .port(o.port)
        .user(&o.user)
        .dbname(&o.dbname)
        .application_name(&o.appname)
        .ssl_mode(tokio_postgres::config::SslMode::Require);
    if let Some(pw) = &o.password {
        pg.password(pw);
    }
    let (client, connection) = match pg.connect(tls).await {
        Ok(x) => x,
        Err(e) => {
            note_error(&mut r, &e);
            return fail(&r, &negotiated);
        }
    };
    // the connection's own end (a FATAL, a TLS error) is reported by the
    // next call on the client too; keep it for the line
    let conn_end: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let conn_end2 = conn_end.clone();
    let conn_task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            *conn_end2.lock().unwrap() = Some(e.to_string());
        }
    });

    if let Err(e) = work(&o, &mut r, &client).await {
        note_error(&mut r, &e);
        // give the connection task the moment it needs to see its end
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(end) = conn_end.lock().unwrap().as_ref() {
            let _ = write!(r.error_text, " [connection: {}]", end);
        }
        return fail(&r, &negotiated);
    }

    r.stage = "done";
    if o.hold {
        print_json("hold", true, &o, &r, &negotiated.lock().unwrap(), t0);
        let mut line = String::new();
        let _ = tokio::io::BufReader::new(tokio::io::stdin())
            .read_line(&mut line)
            .await;
    }

    r.stage = "alive";
    r.alive = Some(false);
    match client.simple_query("SELECT 1").await {
        Ok(msgs) => {
            let rows = msgs
                .iter()
                .filter(|m| matches!(m, SimpleQueryMessage::Row(_)))
                .count();
            r.alive = Some(rows == 1);
        }
        Err(e) => {
            note_error(&mut r, &e);
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Some(end) = conn_end.lock().unwrap().as_ref() {
                let _ = write!(r.error_text, " [connection: {}]", end);
            }
            return fail(&r, &negotiated);
        }
    }
    r.stage = "done";
    drop(client);
    let _ = conn_task.await;
    print_json("final", true, &o, &r, &negotiated.lock().unwrap(), t0);
    0
}

fn main() {
    let o = parse_opts();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = rt.block_on(run(o));
    std::process::exit(code);
}
