//! The one outbound HTTP client every connector call goes through (reqwest over
//! rustls with the `ring` provider), and the address check that guards it.
//!
//! The check lives in the client's DNS resolver: a name is resolved once, with a
//! timeout, and every address it resolves to must be globally routable (see
//! [`super::address`]) or allow-listed; the connection then goes to those checked
//! addresses, while TLS still verifies the certificate for the name (SNI). An IP
//! literal never reaches a resolver, so [`Outbound::check_url`] checks it before
//! each call. Redirects are never followed. Errors name the host, never an address
//! it resolved to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::address::forbidden;

/// How long a name may take to resolve.
pub const DNS_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection (TCP and TLS) may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an outbound URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlRefused(pub String);

/// Why the client could not be built (a bad `--connector-ca` bundle).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ClientError(pub String);

/// The pooled client and the allow-list, shared by every call.
#[derive(Clone, Debug)]
pub struct Outbound {
    client: reqwest::Client,
    allow: Arc<[IpAddr]>,
}

impl Outbound {
    /// The client with the Mozilla roots (webpki-roots) plus `extra_ca` (PEM), if given.
    pub fn new(allow: Vec<IpAddr>, extra_ca: Option<&[u8]>) -> Result<Self, ClientError> {
        let allow: Arc<[IpAddr]> = allow.into();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls(extra_ca)?)
            .dns_resolver(Arc::new(Checked {
                allow: allow.clone(),
            }))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(60))
            .no_proxy()
            .build()
            .map_err(|e| ClientError(format!("the HTTP client could not be built: {e}")))?;
        Ok(Self { client, allow })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub fn allow(&self) -> &[IpAddr] {
        &self.allow
    }

    /// Checks `url`: `http` or `https`, a host, and every address it names or
    /// resolves to allowed. Used when a connector is saved and before each call.
    pub async fn check_url(&self, url: &str) -> Result<reqwest::Url, UrlRefused> {
        check_url(url, &self.allow).await
    }
}

/// [`Outbound::check_url`] with an explicit allow-list.
pub async fn check_url(url: &str, allow: &[IpAddr]) -> Result<reqwest::Url, UrlRefused> {
    let parsed = reqwest::Url::parse(url).map_err(|_| UrlRefused("the URL is not valid".into()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(UrlRefused(
            "the URL must start with https:// (or http://)".into(),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlRefused(
            "the URL may not carry a user or password; use a header".into(),
        ));
    }
    match parsed.host() {
        None => return Err(UrlRefused("the URL has no host".into())),
        Some(url::Host::Ipv4(ip)) => literal(IpAddr::V4(ip), allow)?,
        Some(url::Host::Ipv6(ip)) => literal(IpAddr::V6(ip), allow)?,
        Some(url::Host::Domain(name)) => {
            resolve(name, allow).await?;
        }
    }
    Ok(parsed)
}

fn literal(ip: IpAddr, allow: &[IpAddr]) -> Result<(), UrlRefused> {
    if forbidden(ip) && !allow.contains(&ip) {
        return Err(UrlRefused(
            "the URL's address is not publicly routable (loopback, private, link-local, metadata or reserved); allow-list it with --connector-allow to use it".into(),
        ));
    }
    Ok(())
}

/// Resolves `host` with a timeout; refused when it does not resolve or when any
/// address it resolves to is forbidden and not allow-listed.
async fn resolve(host: &str, allow: &[IpAddr]) -> Result<Vec<SocketAddr>, UrlRefused> {
    let found = tokio::time::timeout(DNS_TIMEOUT, tokio::net::lookup_host((host, 0)))
        .await
        .map_err(|_| {
            UrlRefused(format!(
                "looking up {host} took longer than {} s",
                DNS_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|_| UrlRefused(format!("the host {host} does not resolve")))?;
    let addresses: Vec<SocketAddr> = found.collect();
    if addresses.is_empty() {
        return Err(UrlRefused(format!("the host {host} does not resolve")));
    }
    if addresses
        .iter()
        .any(|a| forbidden(a.ip()) && !allow.contains(&a.ip()))
    {
        return Err(UrlRefused(format!(
            "{host} resolves to an address that is not publicly routable (loopback, private, link-local, metadata or reserved); allow-list it with --connector-allow to use it"
        )));
    }
    Ok(addresses)
}

/// The resolver the client connects through: only checked addresses come out.
struct Checked {
    allow: Arc<[IpAddr]>,
}

impl Resolve for Checked {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let addresses = resolve(name.as_str(), &allow).await?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

/// Whether `error` (from the client) is the address check refusing a name.
pub fn refused_by_check<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a UrlRefused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<UrlRefused>() {
            return Some(refused);
        }
        cause = e.source();
    }
    None
}

/// rustls with the `ring` provider, the Mozilla roots, and `extra_ca`'s certificates.
pub fn tls(extra_ca: Option<&[u8]>) -> Result<rustls::ClientConfig, ClientError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(pem) = extra_ca {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| ClientError(format!("the CA bundle is not PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| ClientError(format!("a CA certificate is not valid: {e}")))?;
            added += 1;
        }
        if added == 0 {
            return Err(ClientError("the CA bundle holds no certificate".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError(format!("TLS could not be set up: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}
