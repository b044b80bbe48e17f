//! A bounded pool of keep-alive HTTP/1.1 connections. A request waits for
//! a permit (first come, first served), takes an idle connection or opens
//! one, and gives it back when its answer is read: at most `max` are open.
use std::cell::{Cell, RefCell};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

type Sender = SendRequest<Full<Bytes>>;

pub struct Answer {
    pub status: u16,
    pub cookie: Option<String>,
    pub body: Bytes,
}

pub struct Pool {
    addr: String,
    idle: RefCell<Vec<Sender>>,
    permits: Arc<Semaphore>,
    pub opened: Cell<u64>,
}

impl Pool {
    pub fn new(addr: &str, max: usize) -> Pool {
        Pool {
            addr: addr.to_string(),
            idle: RefCell::new(Vec::new()),
            permits: Arc::new(Semaphore::new(max)),
            opened: Cell::new(0),
        }
    }

    async fn open(&self) -> Result<Sender, &'static str> {
        let stream = TcpStream::connect(&self.addr).await.map_err(|_| "connect")?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| "connect")?;
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        self.opened.set(self.opened.get() + 1);
        Ok(sender)
    }

    /// A free connection: an idle one still open, else a new one.
    async fn take(&self) -> Result<Sender, &'static str> {
        loop {
            let idle = self.idle.borrow_mut().pop();
            match idle {
                Some(mut s) if !s.is_closed() => {
                    if s.ready().await.is_ok() {
                        return Ok(s);
                    }
                }
                Some(_) => {}
                None => {
                    let mut s = self.open().await?;
                    s.ready().await.map_err(|_| "connect")?;
                    return Ok(s);
                }
            }
        }
    }

    /// Send a request once a connection is free and read the whole answer;
    /// an error names its kind (connect, io).
    pub async fn send(&self, request: Request<Full<Bytes>>) -> Result<Answer, &'static str> {
        let _permit = self.permits.clone().acquire_owned().await.map_err(|_| "io")?;
        let mut sender = self.take().await?;
        let response = sender.send_request(request).await.map_err(|_| "io")?;
        let status = response.status().as_u16();
        let cookie = response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("sid="))
            .map(|v| v.split(';').next().unwrap_or("").to_string());
        let body = response.into_body().collect().await.map_err(|_| "io")?.to_bytes();
        if !sender.is_closed() {
            self.idle.borrow_mut().push(sender);
        }
        Ok(Answer { status, cookie, body })
    }
}
