//! Console single sign-on against a real, certified OpenID provider (node
//! `oidc-provider`, pinned in `tests/peers`, started on loopback by the test):
//! the authorization code flow with PKCE signs a member in, two people signed in
//! are two members, a member with no key has no role, and a callback replayed
//! signs no one in.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::support::{TestApp, TestDb, db_test};
use loadout::auth::keys::{self, Owner, Role};
use loadout::auth::members;

const CLIENT_ID: &str = "loadout-console";
const CLIENT_SECRET: &str = "a-client-secret-for-the-test";

fn peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/peers")
}

/// The provider, stopped when dropped.
struct Provider {
    child: Child,
    issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// Starts the provider for `redirect`, or `None` when the peers are not
/// installed (a failure under `LOADOUT_REQUIRE_PEERS=1`).
fn provider(redirect: &str) -> Option<Provider> {
    let node = peers().join(".peers/node_modules/.bin/node");
    let installed = peers().join(".peers/node_modules/oidc-provider").exists() && node.exists();
    if !installed {
        assert!(
            std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
            "LOADOUT_REQUIRE_PEERS=1 but oidc-provider is not installed: run tests/peers/install"
        );
        eprintln!("skipped: oidc-provider is not installed (tests/peers/install)");
        return None;
    }
    let mut child = Command::new(node)
        .arg(peers().join("oidc/provider.mjs"))
        .env("OIDC_PORT", "0")
        .env("OIDC_CLIENT_ID", CLIENT_ID)
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env("OIDC_REDIRECT_URI", redirect)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the provider");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the provider's first line");
    let issuer = line
        .trim()
        .strip_prefix("OIDC_READY ")
        .unwrap_or_else(|| panic!("the provider did not start: {line:?}"))
        .to_owned();
    Some(Provider { child, issuer })
}

/// A browser: cookies by name (the provider's and loadout's, as one jar on
/// 127.0.0.1 is), following each redirect by hand.
struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
}

struct Page {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Browser {
    fn new() -> Browser {
        let outbound = loadout::connectors::client::Outbound::new(
            vec!["127.0.0.1".parse().expect("ip")],
            None,
        )
        .expect("client");
        Browser {
            http: outbound.client().clone(),
            cookies: BTreeMap::new(),
        }
    }

    async fn send(
        &mut self,
        method: reqwest::Method,
        url: &str,
        form: Option<&[(&str, &str)]>,
    ) -> Page {
        assert!(url.starts_with("http://127.0.0.1:"), "loopback only: {url}");
        let mut request = self.http.request(method, url);
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            request = request.header("cookie", jar.join("; "));
        }
        if let Some(form) = form {
            let body: Vec<String> = form
                .iter()
                .map(|(k, v)| format!("{k}={}", v.replace(' ', "+")))
                .collect();
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body.join("&"));
        }
        let response = request.send().await.expect("a response");
        for cookie in response.headers().get_all("set-cookie") {
            let text = cookie.to_str().expect("ascii");
            let (pair, attributes) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').expect("name=value");
            if value.is_empty() || attributes.contains("1970") || attributes.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|l| l.to_str().expect("ascii").to_owned());
        Page {
            status,
            location,
            body: response.text().await.unwrap_or_default(),
        }
    }

    /// GETs `url` and follows redirects until a page answers.
    async fn get(&mut self, url: &str) -> (String, Page) {
        let mut url = url.to_owned();
        for _ in 0..10 {
            let page = self.send(reqwest::Method::GET, &url, None).await;
            match &page.location {
                Some(next) if (300..400).contains(&page.status) => url = absolute(&url, next),
                _ => return (url, page),
            }
        }
        panic!("too many redirects from {url}");
    }
}

/// `next` against the URL it came from.
fn absolute(from: &str, next: &str) -> String {
    if next.starts_with("http") {
        return next.to_owned();
    }
    let origin: String = from.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
    format!("{origin}{next}")
}

/// Signs `login` in through the provider's own login and consent pages; the
/// page loadout's callback answers, and the callback's URL.
async fn sign_in(browser: &mut Browser, loadout: &str, login: &str) -> (Page, String) {
    let (url, page) = browser.get(&format!("{loadout}/console/sso/start")).await;
    assert_eq!(
        page.status, 200,
        "the provider's login page at {url}: {}",
        page.body
    );
    assert!(page.body.contains("name=\"login\""), "{}", page.body);
    let form = [
        ("prompt", "login"),
        ("login", login),
        ("password", "anything"),
    ];
    let mut page = browser.send(reqwest::Method::POST, &url, Some(&form)).await;
    let mut at = url;
    loop {
        let next = absolute(&at, page.location.as_deref().expect("a redirect"));
        if next.starts_with(&format!("{loadout}/console/sso/callback")) {
            let answer = browser.send(reqwest::Method::GET, &next, None).await;
            return (answer, next);
        }
        let (url, shown) = browser.get_until(&next, loadout).await;
        match shown {
            Ok(consent) => {
                assert!(
                    consent.body.contains("name=\"prompt\" value=\"consent\""),
                    "{}",
                    consent.body
                );
                page = browser
                    .send(reqwest::Method::POST, &url, Some(&[("prompt", "consent")]))
                    .await;
                at = url;
            }
            Err(callback) => {
                let answer = browser.send(reqwest::Method::GET, &callback, None).await;
                return (answer, callback);
            }
        }
    }
}

impl Browser {
    /// Follows redirects from `url` until a page answers (`Ok`) or one points at
    /// loadout's callback (`Err` with its URL).
    async fn get_until(&mut self, url: &str, loadout: &str) -> (String, Result<Page, String>) {
        let mut url = url.to_owned();
        for _ in 0..10 {
            if url.starts_with(&format!("{loadout}/console/sso/callback")) {
                return (url.clone(), Err(url));
            }
            let page = self.send(reqwest::Method::GET, &url, None).await;
            match &page.location {
                Some(next) if (300..400).contains(&page.status) => url = absolute(&url, next),
                _ => return (url, Ok(page)),
            }
        }
        panic!("too many redirects from {url}");
    }
}

async fn served(db: TestDb) -> Option<(TestApp, Provider, String)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let loadout = format!("http://{}", listener.local_addr().expect("address"));
    let redirect = format!("{loadout}/console/sso/callback");
    let provider = provider(&redirect)?;
    let app = TestApp::builder(db)
        .flag(format!("--oidc-issuer={}", provider.issuer))
        .flag(format!("--oidc-client-id={CLIENT_ID}"))
        .flag(format!("--oidc-client-secret={CLIENT_SECRET}"))
        .flag(format!("--oidc-redirect-url={redirect}"))
        .build()
        .await;
    let limits = loadout::transport::server::Limits::from(&app.state.settings.connections);
    let router = loadout::http::router(app.state.clone());
    tokio::spawn(loadout::transport::server::serve(
        listener,
        router,
        limits,
        std::future::pending(),
    ));
    Some((app, provider, loadout))
}

db_test! {
    async fn single_sign_on_signs_a_member_in_and_two_people_are_two_members(db) {
        let Some((app, _provider, loadout)) = served(db).await else { return };

        // Alice's first sign-in makes her member; with no key she has no role.
        let mut alice = Browser::new();
        let (answer, _) = sign_in(&mut alice, &loadout, "alice").await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert!(answer.body.contains("no role here yet"), "{}", answer.body);
        let listed = members::list(&app.db.conn, None, Default::default()).await.expect("members").members;
        let bound = listed.iter().find(|m| m.name == "alice").expect("alice is a member");
        assert_eq!(bound.oidc_subject.as_deref(), Some("alice"));
        assert!(!bound.signer && bound.keys.is_empty(), "{bound:?}");

        // An operator gives her a role on the database; she signs in again.
        keys::create_owned(&app.db.conn, "alice-console", Role::Approver, None, None, Owner::Member("alice"), chrono::Utc::now())
            .await
            .expect("alice's key");
        let mut alice = Browser::new();
        let (answer, callback) = sign_in(&mut alice, &loadout, "alice").await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(alice.cookies.contains_key("loadout_session"), "{:?}", alice.cookies.keys());
        let (_, proposals) = alice.get(&format!("{loadout}/console/proposals")).await;
        assert_eq!(proposals.status, 200, "{}", proposals.body);
        assert!(proposals.body.contains("alice"), "the console names who is signed in");

        // The same callback again signs no one in (its state was used).
        let mut thief = Browser::new();
        let replayed = thief.send(reqwest::Method::GET, &callback, None).await;
        assert_eq!(replayed.status, 401, "{}", replayed.body);
        assert!(!thief.cookies.contains_key("loadout_session"));

        // Bob is another person: another member, however his name reads.
        let mut bob = Browser::new();
        let (answer, _) = sign_in(&mut bob, &loadout, "bob").await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        let listed = members::list(&app.db.conn, None, Default::default()).await.expect("members").members;
        let subjects: Vec<(&str, Option<&str>)> = listed.iter()
            .filter(|m| m.oidc_subject.is_some())
            .map(|m| (m.name.as_str(), m.oidc_subject.as_deref()))
            .collect();
        assert_eq!(subjects, [("alice", Some("alice")), ("bob", Some("bob"))]);
    }
}
