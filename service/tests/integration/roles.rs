//! Roles as documented (issue 51, item 3): every route's roles are read from
//! docs/http-api.md's table and tried with a key of every role, so the table and
//! the code cannot drift apart; then what the table cannot say — signer power is
//! per tenant, and reading never needs it.

use std::collections::BTreeSet;

use crate::support::{TestApp, db_test};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::auth::keys::{self, Role};
use loadout::auth::signers;
use serde_json::{Value, json};

/// The keys every route is tried with. Operators and approvers are signers, so a
/// refusal is the role's, never missing power.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    Operator,
    Admin,
    AdminTb,
    Approver,
    ApproverTb,
    Agent,
}

/// Who one role word admits: the role named and the roles above it (an
/// operator may do what an admin may; an admin what an agent or approver may),
/// as docs/http-api.md's "Routes" says; `only` admits the role alone.
fn admitted(word: &str, only: bool) -> Vec<Who> {
    let above_admin = [Who::Admin, Who::AdminTb, Who::Operator];
    let mut who = match word {
        "operator" => vec![Who::Operator],
        "admin" => above_admin.to_vec(),
        "approver" => vec![Who::Approver, Who::ApproverTb],
        "default-tenant approver" => vec![Who::Approver],
        "agent" => vec![Who::Agent],
        other => panic!("docs/http-api.md names an unknown role {other:?}"),
    };
    if !only && word != "operator" {
        who.extend(above_admin);
    }
    who
}

/// The roles a route's cell admits for `method path`: `None` for a route that
/// needs no key. Clauses are separated by commas; one that says `reads` holds
/// for GET, `validates` for a `…/validate`, `writes`/`creates`/`restores` for
/// the rest; one without such a verb for every method.
fn roles(cell: &str, method: &str, path: &str) -> Option<BTreeSet<Who>> {
    let cell = cell.trim();
    if cell == "none" {
        return None;
    }
    let mut out = BTreeSet::new();
    for clause in cell.split(", ") {
        let clause = clause.trim();
        if clause.starts_with("never ") {
            continue;
        }
        let words: Vec<&str> = clause.split(' ').collect();
        let verbs = ["reads", "writes", "creates", "restores", "validates", "and"];
        let reads = words.contains(&"reads");
        let validates = words.contains(&"validates");
        let writes = words
            .iter()
            .any(|w| ["writes", "creates", "restores"].contains(w));
        let applies = if !(reads || validates || writes) {
            true
        } else {
            (reads && method == "GET")
                || (validates && path.ends_with("/validate"))
                || (writes && method != "GET" && !path.ends_with("/validate"))
        };
        if !applies {
            continue;
        }
        let only = words.contains(&"only");
        let named: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| !verbs.contains(w) && *w != "only")
            .collect();
        for part in named.join(" ").split(" or ") {
            out.extend(admitted(part.trim(), only));
        }
    }
    assert!(!out.is_empty(), "{method} {path}: no role in {cell:?}");
    Some(out)
}

/// The OpenAPI document's operations, as `(METHOD, path template)`.
fn documented_operations() -> Vec<(String, String, Value)> {
    let doc = serde_json::to_value(loadout::http::openapi()).expect("serialises");
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete"] {
            if let Some(op) = item.get(method) {
                out.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    out
}

/// `/v1/agents/{agent}` and `/v1/agents/{name}` are the same route.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|s| if s.starts_with('{') { "{}" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

/// Each `(METHOD, path, role cell)` the routes table documents. `…/x` continues
/// the previous path (and method): the longest prefix of it that makes a real
/// route.
fn documented_routes(operations: &[(String, String, Value)]) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/http-api.md"))
        .expect("docs/http-api.md");
    let table = text
        .split("| method and path | role | what |")
        .nth(1)
        .expect("the routes table");
    let known: BTreeSet<String> = operations.iter().map(|(_, p, _)| shape(p)).collect();
    let mut previous = String::new();
    let mut previous_methods = String::new();
    let mut out = Vec::new();
    for row in table.lines().skip(2) {
        let Some(row) = row.strip_prefix('|') else {
            break;
        };
        let cells: Vec<&str> = row.split(" | ").collect();
        let (routes, cell) = (cells[0], cells[1].trim_end_matches('|').trim());
        for (i, fragment) in routes.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            // `.../decline` after `POST .../approve` takes its method too.
            let (methods, path) = match fragment.split_once(' ') {
                Some((methods, path)) => (methods.to_owned(), path),
                None => (previous_methods.clone(), fragment),
            };
            previous_methods.clone_from(&methods);
            let path = path.split('?').next().unwrap_or(path);
            let mut paths = vec![path.to_owned()];
            if let Some((base, rest)) = path.split_once('[') {
                let optional = rest.trim_end_matches(']');
                paths = vec![base.to_owned(), format!("{base}{optional}")];
            }
            for path in paths {
                let path = match path.strip_prefix("...") {
                    Some(tail) => {
                        let mut prefix = previous.as_str();
                        loop {
                            let candidate = format!("{prefix}{tail}");
                            if known.contains(&shape(&candidate)) {
                                break candidate;
                            }
                            let Some((shorter, _)) = prefix.rsplit_once('/') else {
                                panic!("{fragment:?} continues no documented path");
                            };
                            prefix = shorter;
                        }
                    }
                    None => path,
                };
                previous.clone_from(&path);
                for method in methods.split('/') {
                    out.push((method.to_owned(), path.clone(), cell.to_owned()));
                }
            }
        }
    }
    out
}

/// A concrete path for `template`: integers where the operation takes one,
/// names of nothing elsewhere, so every admitted call ends in a 4xx of its own
/// (or a read's 200) and changes nothing.
fn concrete(template: &str, op: &Value) -> String {
    let integer = |name: &str| {
        op["parameters"].as_array().is_some_and(|ps| {
            ps.iter()
                .any(|p| p["name"] == name && p["schema"]["type"] == "integer")
        })
    };
    template
        .split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) if integer(name) => "999999".to_owned(),
                Some(_) => "nobody".to_owned(),
                None => s.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

struct Keys {
    keys: Vec<(Who, String)>,
}

async fn keys(app: &TestApp) -> Keys {
    let conn = &app.db.conn;
    let now = chrono::Utc::now();
    let make = |name: &'static str, role: Role, tenant: Option<&'static str>| async move {
        let key = keys::create_for_tenant(conn, name, role, tenant, now)
            .await
            .expect("key");
        if role == Role::Approver {
            let tenant = tenant.unwrap_or("default");
            signers::set_signer_on_database(conn, tenant, name, true, None, now)
                .await
                .expect("signer");
        }
        key
    };
    Keys {
        keys: vec![
            (Who::Operator, app.operator.clone()),
            (Who::Admin, make("an-admin", Role::Admin, None).await),
            (
                Who::AdminTb,
                make("tb-admin", Role::Admin, Some("tb")).await,
            ),
            (
                Who::Approver,
                make("an-approver", Role::Approver, None).await,
            ),
            (
                Who::ApproverTb,
                make("tb-approver", Role::Approver, Some("tb")).await,
            ),
            (Who::Agent, app.agent.clone()),
        ],
    }
}

db_test! {
    /// Every route in the table, with every role: a role the table admits is never
    /// 401 or 403; one it does not admit is 403 (for a route that needs no key, no
    /// key is enough). Every `/v1` operation of `/openapi.json` is in the table.
    async fn every_route_admits_exactly_the_roles_docs_http_api_md_names(db) {
        let app = TestApp::new(db).await;
        let keys = keys(&app).await;
        let operations = documented_operations();
        let routes = documented_routes(&operations);
        let mut covered = BTreeSet::new();
        let mut wrong = Vec::new();
        for (method, path, cell) in &routes {
            let (_, template, op) = operations
                .iter()
                .find(|(m, p, _)| m == method && shape(p) == shape(path))
                .unwrap_or_else(|| panic!("docs/http-api.md documents {method} {path}, which /openapi.json lacks"));
            covered.insert((method.clone(), template.clone()));
            let uri = concrete(template, op);
            let method: Method = method.parse().expect("method");
            let body = (method != Method::GET && method != Method::DELETE).then(|| json!({}));
            let Some(admits) = roles(cell, method.as_str(), path) else {
                let reply = app.send(method.clone(), &uri, None, body.map(|b| b.to_string().into_bytes()), None).await;
                if matches!(reply.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                    wrong.push(format!("{method} {uri} with no key: {}", reply.status));
                }
                continue;
            };
            for (who, key) in &keys.keys {
                let (status, answer) = app.call(method.clone(), &uri, key, body.clone()).await;
                let refused = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
                if admits.contains(who) == refused {
                    wrong.push(format!("{method} {uri} as {who:?} ({cell}): {status} {answer}"));
                }
            }
        }
        for (method, path, _) in &operations {
            if path.starts_with("/v1/") && !covered.contains(&(method.clone(), path.clone())) {
                wrong.push(format!("{method} {path} is not in docs/http-api.md's table"));
            }
        }
        assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
        assert!(routes.len() > 90, "the table was read: {} routes", routes.len());
    }
}

const AGENT: &str = "/v1/agents/assistant";

/// The assistant gated, with revision 2 saved; the operator asks to move
/// `production` to it: the pending request's id.
async fn pending_request(app: &TestApp) -> i64 {
    for body in [
        json!({"release_mode": "gated"}),
        json!({"soul": "The next soul."}),
    ] {
        let (status, answer) = app
            .call(Method::PATCH, AGENT, &app.operator, Some(body))
            .await;
        assert!(status.is_success(), "{answer}");
    }
    let path = format!("{AGENT}/labels/production");
    let body = json!({"revision": 2, "reason": "ready"});
    let (status, asked) = app
        .call(Method::PUT, &path, &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
    asked["id"].as_i64().expect("id")
}

async fn console_page(app: &TestApp, key: &str, path: &str) -> (StatusCode, String) {
    let sign_in = Request::post("/console/sign-in")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("key={key}")))
        .expect("request");
    let signed = app.request(sign_in).await;
    let cookie = signed
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("loadout_session="))
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let page = Request::get(path)
        .header(header::COOKIE, format!("loadout_session={cookie}"))
        .body(Body::empty())
        .expect("request");
    let reply = app.request(page).await;
    let text = reply
        .body
        .as_str()
        .map_or_else(|| reply.body.to_string(), str::to_owned);
    (reply.status, text)
}

db_test! {
    /// An operator and a default-tenant approver who are not signers read change
    /// requests (the author its own too), run their checks, and decide tool-call
    /// proposals in the console, which shows them no sign-off button.
    async fn reading_change_requests_and_deciding_proposals_need_no_signer_power(db) {
        let app = TestApp::new(db).await;
        let id = pending_request(&app).await;
        let now = chrono::Utc::now();
        let operator = keys::create(&app.db.conn, "plain-operator", Role::Operator, now).await.expect("key");
        let approver = keys::create(&app.db.conn, "plain-approver", Role::Approver, now).await.expect("key");
        for (key, who) in [(&operator, "operator"), (&approver, "approver")] {
            let (status, list) = app.call(Method::GET, "/v1/change-requests", key, None).await;
            assert_eq!(status, StatusCode::OK, "{who}: {list}");
            assert!(list["change_requests"].as_array().is_some_and(|l| l.iter().any(|r| r["id"] == id)), "{who}: {list}");
            let (status, one) = app.call(Method::GET, &format!("/v1/change-requests/{id}"), key, None).await;
            assert_eq!((status, one["id"].as_i64()), (StatusCode::OK, Some(id)), "{who}: {one}");
            let (status, checked) = app.call(Method::POST, &format!("/v1/change-requests/{id}/checks"), key, Some(json!({}))).await;
            assert_eq!(status, StatusCode::OK, "{who}: {checked}");
            let (status, refused) = app.call(Method::POST, &format!("/v1/change-requests/{id}/approve"), key, Some(json!({}))).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{who} is no signer: {refused}");

            let (status, page) = console_page(&app, key, "/console/proposals").await;
            assert_eq!(status, StatusCode::OK, "{who}: {page}");
            assert!(page.contains(&format!("Change request {id}")), "{who} reads it: {page}");
            assert!(!page.contains(&format!("Approve change request {id}")), "{who} gets no sign-off button");
        }
        // The author reads its own request, and sees it may withdraw it.
        let (status, page) = console_page(&app, &app.operator, "/console/proposals").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(page.contains(&format!("Decline change request {id}")), "{page}");
        assert!(!page.contains(&format!("Approve change request {id}")), "the author never approves its own");
    }
}

db_test! {
    /// Tenant tb's signer is a signer in tb only: it neither reads nor signs off the
    /// shared configuration's change requests, runs no checks on them, and grants no
    /// power to the default tenant's people; a default-tenant signer still does all
    /// of it, and tb's signer still decides tb's grants.
    async fn a_tenants_signer_signs_off_nothing_outside_its_tenant(db) {
        let app = TestApp::new(db).await;
        let id = pending_request(&app).await;
        let now = chrono::Utc::now();
        let conn = &app.db.conn;
        let tb = keys::create_for_tenant(conn, "tb-signer", Role::Approver, Some("tb"), now).await.expect("key");
        signers::set_signer_on_database(conn, "tb", "tb-signer", true, None, now).await.expect("signer");
        for (method, path) in [
            (Method::GET, format!("/v1/change-requests/{id}")),
            (Method::GET, "/v1/change-requests".to_owned()),
            (Method::POST, format!("/v1/change-requests/{id}/checks")),
            (Method::POST, format!("/v1/change-requests/{id}/approve")),
            (Method::POST, format!("/v1/change-requests/{id}/decline")),
        ] {
            let body = (method == Method::POST).then(|| json!({}));
            let (status, answer) = app.call(method.clone(), &path, &tb, body).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
        }

        // Grants: the operator asks that a default-tenant person and a tb person sign off.
        keys::create(conn, "dora", Role::Approver, now).await.expect("key");
        keys::create_for_tenant(conn, "tess", Role::Approver, Some("tb"), now).await.expect("key");
        let ask = |member: &'static str, tenant: Option<&'static str>| {
            let body = match tenant {
                Some(t) => json!({"reason": "on call", "tenant": t}),
                None => json!({"reason": "on call"}),
            };
            let path = format!("/v1/members/{member}/signer-grants");
            let app = &app;
            async move {
                let (status, grant) = app.call(Method::POST, &path, &app.operator, Some(body)).await;
                assert_eq!(status, StatusCode::ACCEPTED, "{grant}");
                grant["id"].as_i64().expect("id")
            }
        };
        let dora = ask("dora", None).await;
        let tess = ask("tess", Some("tb")).await;
        let (status, answer) = app.call(Method::POST, &format!("/v1/signer-grants/{dora}/approve"), &tb, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "a grant outside tb is not there for tb: {answer}");
        let (status, answer) = app.call(Method::POST, &format!("/v1/signer-grants/{tess}/approve"), &tb, None).await;
        assert_eq!((status, answer["state"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");

        // The other half: the default tenant's signer still signs off and grants.
        let signer = app.key("default-signer", Role::Approver).await;
        let (status, answer) = app.call(Method::POST, &format!("/v1/signer-grants/{dora}/approve"), &signer, None).await;
        assert_eq!((status, answer["state"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
        let (status, answer) = app.call(Method::POST, &format!("/v1/change-requests/{id}/approve"), &signer, Some(json!({}))).await;
        assert_eq!((status, answer["state"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
    }
}
