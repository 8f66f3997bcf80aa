//! HTTP/1.1 over a plain TCP stream, for tests that talk to real `serve` processes
//! (and balancers) the way any client would.

use std::io::{Read, Write};
use std::time::Duration;

/// One request on a fresh connection (`Connection: close`): the status line and
/// the body. Panics when the connection fails; see [`try_http`].
pub fn http(addr: &str, method: &str, path: &str, key: &str, body: &str) -> (String, String) {
    let authorization = format!("Bearer {key}");
    let (head, body) = try_http(
        addr,
        method,
        path,
        &[("Authorization", &authorization)],
        body,
    )
    .unwrap_or_else(|e| panic!("{method} {path} on {addr}: {e}"));
    (status_line(&head).to_owned(), body)
}

/// One request with the given headers: the whole head and the body; `Err` when
/// the connection fails or no whole answer arrives within 10 s.
pub fn try_http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<(String, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(
        stream,
        "{head}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no whole answer: {response:?}")))?;
    Ok((head.to_owned(), body.to_owned()))
}

/// The status line of a head returned by [`try_http`].
pub fn status_line(head: &str) -> &str {
    head.lines().next().unwrap_or_default()
}

/// A keep-alive connection: requests one after another on the same stream, as
/// browsers, SDKs and load generators send them.
pub struct KeepAlive {
    addr: String,
    stream: Option<std::io::BufReader<std::net::TcpStream>>,
}

impl KeepAlive {
    pub fn new(addr: &str) -> KeepAlive {
        KeepAlive {
            addr: addr.to_owned(),
            stream: None,
        }
    }

    /// A GET on the open connection (opening one first if there is none): the
    /// status line and the body. On `Err` the connection is dropped, so the next
    /// request opens a new one.
    pub fn get(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<(String, String)> {
        let answer = self.exchange(path, headers);
        if answer.is_err() {
            self.stream = None;
        }
        answer
    }

    fn exchange(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<(String, String)> {
        use std::io::BufRead;
        if self.stream.is_none() {
            let stream = std::net::TcpStream::connect(&self.addr)?;
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            self.stream = Some(std::io::BufReader::new(stream));
        }
        let Some(reader) = self.stream.as_mut() else {
            return Err(std::io::Error::other("no connection"));
        };
        let mut head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        reader.get_mut().write_all(head.as_bytes())?;
        let mut status = String::new();
        if reader.read_line(&mut status)? == 0 {
            return Err(std::io::Error::other("closed before an answer"));
        }
        let (mut length, mut close) = (0usize, false);
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().map_err(std::io::Error::other)?;
                } else if name.eq_ignore_ascii_case("connection")
                    && value.eq_ignore_ascii_case("close")
                {
                    close = true;
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        if close {
            self.stream = None;
        }
        Ok((
            status.trim_end().to_owned(),
            String::from_utf8_lossy(&body).into_owned(),
        ))
    }
}
