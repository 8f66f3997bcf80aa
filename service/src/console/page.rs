//! What every console page shares: the embedded templates, the frame around a
//! page (who is signed in, the CSRF token), error pages, the form extractor, and
//! the signed-in person ([`Signed`]) that handlers receive.

use std::sync::LazyLock;

use axum::extract::rejection::FormRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::Environment;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::{Principal, Role};
use crate::error::{Error, Kind};

/// A form that carries nothing but its CSRF token (sign-out, decisions, restore, revoke).
#[derive(serde::Deserialize)]
pub struct CsrfOnly {
    #[serde(default)]
    pub csrf: String,
}

/// A signed-in person: the key's principal and the session's CSRF token.
#[derive(Clone, Debug)]
pub struct Signed {
    pub who: Principal,
    pub csrf: String,
    /// The `console_sessions` row.
    pub session_id: i32,
}

impl Signed {
    /// An admin or an operator: manages a tenant.
    pub fn is_admin(&self) -> bool {
        self.who.role.manages_tenant()
    }

    /// Changes the shared configuration.
    pub fn is_operator(&self) -> bool {
        self.who.role == Role::Operator
    }

    /// The refusal of a form whose CSRF token is missing or not this session's;
    /// `None` when the token is right (compared in constant time).
    pub fn refused(&self, presented: &str) -> Option<Response> {
        let (a, b) = (presented.as_bytes(), self.csrf.as_bytes());
        let same =
            a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        if same {
            return None;
        }
        let error = Error::new(
            Kind::Forbidden,
            "csrf",
            "this form is out of date or did not come from this console (its CSRF token is missing or wrong); reload the page and try again",
        );
        Some(error_page(Some(self), &error))
    }
}

/// The templates, embedded: the binary needs no files beside it.
static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    environment().unwrap_or_else(|e| {
        // A unit test parses every template, so this is never reached by a build
        // that passed its tests; pages then answer 500 naming the template.
        tracing::error!(error = %e, "a console template does not parse");
        Environment::new()
    })
});

fn environment() -> Result<Environment<'static>, minijinja::Error> {
    let mut env = Environment::new();
    for (name, source) in [
        (
            "base.html",
            include_str!("../../../templates/console/base.html"),
        ),
        (
            "sign_in.html",
            include_str!("../../../templates/console/sign_in.html"),
        ),
        (
            "message.html",
            include_str!("../../../templates/console/message.html"),
        ),
        (
            "overview.html",
            include_str!("../../../templates/console/overview.html"),
        ),
        (
            "agent.html",
            include_str!("../../../templates/console/agent.html"),
        ),
        (
            "problems.html",
            include_str!("../../../templates/console/problems.html"),
        ),
        (
            "policy.html",
            include_str!("../../../templates/console/policy.html"),
        ),
        (
            "policy_problems.html",
            include_str!("../../../templates/console/policy_problems.html"),
        ),
        (
            "decision.html",
            include_str!("../../../templates/console/decision.html"),
        ),
        (
            "groups.html",
            include_str!("../../../templates/console/groups.html"),
        ),
        (
            "preview.html",
            include_str!("../../../templates/console/preview.html"),
        ),
        (
            "versions.html",
            include_str!("../../../templates/console/versions.html"),
        ),
        (
            "releases.html",
            include_str!("../../../templates/console/releases.html"),
        ),
        (
            "proposals.html",
            include_str!("../../../templates/console/proposals.html"),
        ),
        (
            "proposal.html",
            include_str!("../../../templates/console/proposal.html"),
        ),
        (
            "keys.html",
            include_str!("../../../templates/console/keys.html"),
        ),
        (
            "tools.html",
            include_str!("../../../templates/console/tools.html"),
        ),
        (
            "tool.html",
            include_str!("../../../templates/console/tool.html"),
        ),
        (
            "links.html",
            include_str!("../../../templates/console/links.html"),
        ),
        (
            "link_row.html",
            include_str!("../../../templates/console/link_row.html"),
        ),
        (
            "channels.html",
            include_str!("../../../templates/console/channels.html"),
        ),
        (
            "tool_fields.html",
            include_str!("../../../templates/console/tool_fields.html"),
        ),
        (
            "refusal.html",
            include_str!("../../../templates/console/refusal.html"),
        ),
        (
            "connectors.html",
            include_str!("../../../templates/console/connectors.html"),
        ),
        (
            "webhooks.html",
            include_str!("../../../templates/console/webhooks.html"),
        ),
        (
            "webhook.html",
            include_str!("../../../templates/console/webhook.html"),
        ),
        (
            "webhook_fields.html",
            include_str!("../../../templates/console/webhook_fields.html"),
        ),
        (
            "eval_runs.html",
            include_str!("../../../templates/console/eval_runs.html"),
        ),
        (
            "eval_run.html",
            include_str!("../../../templates/console/eval_run.html"),
        ),
        (
            "eval_run_body.html",
            include_str!("../../../templates/console/eval_run_body.html"),
        ),
        (
            "eval_verdicts.html",
            include_str!("../../../templates/console/eval_verdicts.html"),
        ),
    ] {
        env.add_template(name, source)?;
    }
    Ok(env)
}

/// What every page knows: who is signed in and the session's CSRF token.
#[derive(Serialize)]
struct Frame<'a, T: Serialize> {
    who: Option<Who<'a>>,
    csrf: &'a str,
    #[serde(flatten)]
    page: T,
}

#[derive(Serialize)]
struct Who<'a> {
    name: &'a str,
    role: &'a str,
    tenant: &'a str,
    admin: bool,
    operator: bool,
}

/// Renders `template` with `page`'s fields and the frame, as `status`.
pub fn render(
    signed: Option<&Signed>,
    status: StatusCode,
    template: &str,
    page: impl Serialize,
) -> Response {
    let frame = Frame {
        who: signed.map(|s| Who {
            name: &s.who.member,
            role: s.who.role.as_str(),
            tenant: s.who.tenant(),
            admin: s.is_admin(),
            operator: s.is_operator(),
        }),
        csrf: signed.map_or("", |s| s.csrf.as_str()),
        page,
    };
    let rendered = TEMPLATES
        .get_template(template)
        .and_then(|t| t.render(&frame));
    match rendered {
        Ok(html) => {
            let mut response = (status, Html(html)).into_response();
            // Pages carry a CSRF token and private data: never stored by a cache.
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => {
            tracing::error!(template, error = %e, "a console page did not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page did not render").into_response()
        }
    }
}

/// A page that says one thing: an error, or a refusal.
#[derive(Serialize)]
struct Message<'a> {
    title: &'a str,
    message: &'a str,
}

/// The console's answer to a domain error: a page with the message, as the
/// error's status (internal causes are logged, never shown).
pub fn error_page(signed: Option<&Signed>, error: &Error) -> Response {
    let status = crate::web::status(error.kind);
    let message = if error.kind == Kind::Internal {
        tracing::error!(error = %error.chain(), "console request failed");
        "Something went wrong on the server; the log has the cause."
    } else {
        error.message.as_str()
    };
    let title = status.canonical_reason().unwrap_or("Error");
    render(signed, status, "message.html", Message { title, message })
}

/// The answer to a form the domain refused: a refusal the person can act on
/// (invalid, refused, a conflict, the database busy, ...) is `again`, the form
/// rendered again with the message, as the error's status; an internal error, or
/// the form's subject gone (not found), is the error page.
pub async fn refusal<F: Future<Output = Response>>(
    signed: &Signed,
    error: Error,
    again: impl FnOnce(StatusCode, Error) -> F,
) -> Response {
    if matches!(error.kind, Kind::Internal | Kind::NotFound) {
        return error_page(Some(signed), &error);
    }
    again(crate::web::status(error.kind), error).await
}

/// A text field's value, trimmed; `None` when it is empty or blank.
pub fn blank(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Whether htmx made the request (it then wants the partial, not the page).
pub fn wants_partial(headers: &HeaderMap) -> bool {
    headers.get("hx-request").is_some_and(|v| v == "true")
}

/// A form body; a malformed one is an error page, never axum's plain text.
pub struct Form<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Form<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        match axum::Form::<T>::from_request(request, state).await {
            Ok(axum::Form(value)) => Ok(Form(value)),
            Err(rejection) => Err(form_error(&rejection)),
        }
    }
}

/// A path's parameters; a malformed one (`/console/proposals/abc`) is an error
/// page, never axum's plain text.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(rejection) => Err(error_page(
                None,
                &Error::invalid(format!(
                    "the address is not valid: {}",
                    rejection.body_text()
                )),
            )),
        }
    }
}

/// A query string; a malformed one is an error page, never axum's plain text.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(error_page(
                None,
                &Error::invalid(format!("the query is not valid: {}", rejection.body_text())),
            )),
        }
    }
}

fn form_error(rejection: &FormRejection) -> Response {
    let message = format!("the form could not be read: {}", rejection.body_text());
    let error = match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Error::too_large("payload_too_large", message),
        _ => Error::invalid(message),
    };
    error_page(None, &error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses_and_escapes_html() {
        let env = environment().expect("every console template parses");
        let page = Message {
            title: "t",
            message: "<script>x</script>",
        };
        let frame = Frame {
            who: None,
            csrf: "",
            page,
        };
        let html = env
            .get_template("message.html")
            .unwrap()
            .render(&frame)
            .unwrap();
        assert!(html.contains("&lt;script&gt;x"), "{html}");
        assert!(!html.contains("<script>x"), "{html}");
    }

    #[test]
    fn a_runs_page_shows_a_models_output_as_text_and_polls_only_while_it_runs() {
        let env = environment().expect("every console template parses");
        let run = |state: &str| {
            serde_json::json!({"id": 7, "tenant": "default", "agent": "assistant", "revision": 2,
                "dataset": "smoke", "dataset_version": 1, "connection": "scripted", "model": "good",
                "state": state, "total": 3, "done": 1, "passed": 1, "errors": 0, "pass_rate": 0.3333,
                "prompt_tokens": 100, "completion_tokens": 10, "token_budget": 1000, "cost": 0.00012,
                "cancel_requested": false, "requested_by": "admin", "created_at": "2026-01-01T00:00:00Z",
                "deadline_at": "2026-01-01T01:00:00Z"})
        };
        let case = serde_json::json!({"index": 0, "description": "echo", "channel": "web", "passed": true,
            "errored": false, "output": "<b>x</b>", "tool_calls": [], "latency_ms": 5, "prompt_tokens": 100,
            "completion_tokens": 10, "verdicts": [{"type": "llm-rubric", "pass": false, "score": 0.0, "reason": "<i>no</i>"}]});
        let render = |state: &str| {
            let mut run = run(state);
            if state == "running" {
                // Without prices a run has no cost.
                run.as_object_mut().expect("an object").remove("cost");
            }
            let page = serde_json::json!({"who": null, "csrf": "t", "title": "Run 7", "run": run,
                "live": state == "running", "here": "/console/eval-runs/7", "cases": [case], "compared": null});
            env.get_template("eval_run.html")
                .and_then(|t| t.render(&page))
                .expect("renders")
        };
        let running = render("running");
        assert!(
            running.contains("<pre>&lt;b&gt;x&lt;&#x2f;b&gt;</pre>"),
            "{running}"
        );
        assert!(
            !running.contains("<b>x") && !running.contains("<i>no"),
            "{running}"
        );
        assert!(
            running.contains("hx-trigger=\"every 2s\"") && running.contains("<progress"),
            "{running}"
        );
        let ended = render("succeeded");
        assert!(ended.contains("0.00012"), "{ended}");
        assert!(
            !ended.contains("hx-trigger") && !ended.contains("<progress"),
            "{ended}"
        );
        assert!(
            ended.contains("&lt;i&gt;no&lt;&#x2f;i&gt;"),
            "the judge's reason, as text: {ended}"
        );
    }
}
