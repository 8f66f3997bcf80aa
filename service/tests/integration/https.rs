//! https connectors against a real local TLS server whose CA is made by the test:
//! trusted only through `--connector-ca`, by name
//! (`localhost`, resolved and checked by loadout's resolver, verified by SNI) and by
//! IP literal; refused without the CA, and refused addresses never echo what a name
//! resolved to.

use std::sync::{Arc, Mutex};

use crate::support::db_test;
use axum::http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};

use super::connectors::{Connecting, app_with};

/// A CA and a server certificate for `localhost` and 127.0.0.1, signed by it.
struct Pki {
    ca_pem: String,
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "loadout test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("params");
    let cert = params.signed_by(&key, &ca).expect("certificate");
    Pki {
        ca_pem: ca.pem(),
        chain: vec![cert.der().clone()],
        key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    }
}

/// Calls received: (idempotency key, authorization header, body).
type Received = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A TLS server on 127.0.0.1 answering `POST /hook` with `{"done": true}`.
async fn tls_server(pki: &Pki) -> (u16, Received) {
    let received: Received = Arc::default();
    let log = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let log = log.clone();
            async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned()
                };
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                log.lock().expect("log").push((
                    header("idempotency-key"),
                    header("authorization"),
                    body,
                ));
                axum::Json(json!({"done": true}))
            }
        }),
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), pki.key.clone_key())
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await
                    .ok();
            });
        }
    });
    (port, received)
}

db_test! {
    async fn an_https_connector_trusts_the_given_ca_by_name_and_by_address(db) {
        let pki = pki();
        let (port, received) = tls_server(&pki).await;
        let ca = std::env::temp_dir().join(format!("loadout-test-ca-{}-{port}.pem", std::process::id()));
        std::fs::write(&ca, &pki.ca_pem).expect("write the CA bundle");
        let api = app_with(db, false, &["--connector-allow=127.0.0.1,::1", &format!("--connector-ca={}", ca.display())]).await;
        std::fs::remove_file(&ca).ok();

        // By name: resolved by loadout's resolver, checked, and verified for `localhost`.
        api.connect("secure", &format!("https://localhost:{port}/hook"), 5_000).await;
        let id = api.propose().await;
        let done = api.approve(id).await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(done["result"], json!({"done": true}));

        // By IP literal: the certificate's IP address is verified. Another host, so
        // the headers must be given again (or they are dropped).
        let (status, body) = api.call(Method::PATCH, "/v1/connectors/secure", &api.operator,
            Some(json!({"url": format!("https://127.0.0.1:{port}/hook"), "headers": {"authorization": "Bearer backend-secret"}}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let second = api.propose().await;
        let done = api.approve(second).await;
        assert_eq!(done["state"], "succeeded", "{done}");

        let got = received.lock().expect("log").clone();
        let keys: Vec<&str> = got.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(keys, [format!("{id}:1"), format!("{second}:1")], "each call exactly once");
        assert!(got.iter().all(|(_, auth, _)| auth == "Bearer backend-secret"), "{got:?}");
    }
}

db_test! {
    async fn without_the_ca_an_https_connector_is_not_trusted(db) {
        let pki = pki();
        let (port, received) = tls_server(&pki).await;
        let api = app_with(db, true, &[]).await;
        api.connect("secure", &format!("https://127.0.0.1:{port}/hook"), 5_000).await;
        let id = api.propose().await;
        let failed = api.approve(id).await;
        assert_eq!(failed["state"], "failed", "{failed}");
        assert_eq!(failed["result"]["error"], "the connector could not be reached", "{failed}");
        assert!(received.lock().expect("log").is_empty(), "an untrusted server got the call");
    }
}

db_test! {
    async fn a_name_that_resolves_to_loopback_is_refused_without_saying_the_address(db) {
        let api = app_with(db, false, &[]).await;
        let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
            Some(json!({"name": "sneaky", "url": "https://localhost:9/hook"}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("localhost resolves to an address that is not publicly routable"), "{body}");
        assert!(!message.contains("127.0.0.1") && !message.contains("::1"), "the address leaked: {body}");
        for url in ["http://[64:ff9b::a00:1]/", "http://[2002:a9fe:a9fe::]/", "http://[::7f00:1]/",
            "http://[::ffff:0:7f00:1]/", "http://[fec0::1]/", "http://198.18.0.1/", "http://240.0.0.1/",
            "http://192.0.0.1/", "http://[::ffff:127.0.0.1]/"] {
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
                Some(json!({"name": "disguised", "url": url}))).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {body}");
        }
    }
}
