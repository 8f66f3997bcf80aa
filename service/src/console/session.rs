//! Console sign-in: an admin or approver key opens a server-side session.
//!
//! - The browser gets a random token in a cookie (`HttpOnly`, `SameSite=Strict`,
//!   `Path=/console`, `Secure` when the request came over https through a proxy
//!   that says so in `X-Forwarded-Proto`), never the key. The row keeps the token's
//!   SHA-256 and the key's row id, so revoking the key ends its sessions at once.
//! - Sessions expire after [`LIFETIME`]; sign-out ends one (`ended_at`), on every
//!   replica at once, since the row is the session.
//! - Each session has a CSRF token; every form that changes anything carries it and
//!   [`Checked`] compares it in constant time. `SameSite=Strict` is the second
//!   line: a cross-site post carries no cookie at all.

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Duration;
use entity::console_sessions;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::page::{CsrfOnly, Form, Signed, error_page, render};
use crate::app::AppState;
use crate::auth::Role;
use crate::auth::keys;
use crate::error::{Error, Result};

/// The cookie that carries the session token.
pub const COOKIE: &str = "loadout_session";
/// The sign-in form is read before any key is checked, so it is kept small.
pub const MAX_FORM_BYTES: usize = 4096;
/// The route of the sign-in form.
pub const SIGN_IN: &str = "/console/sign-in";
/// How long a session lasts from sign-in.
pub const LIFETIME: Duration = Duration::hours(8);

/// A signed-in admin or operator; anyone else gets 403 (or the sign-in page).
pub struct Admin(pub Signed);

/// A signed-in operator: the only one who changes the shared configuration.
pub struct Operator(pub Signed);

impl FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> std::result::Result<Self, Response> {
        match find(state, &parts.headers).await {
            Ok(Some(signed)) => {
                // For [`Checked`]: the form's token is compared with this session's.
                parts.extensions.insert(signed.clone());
                Ok(signed)
            }
            Ok(None) if parts.method == Method::GET => {
                Err(Redirect::to("/console/sign-in").into_response())
            }
            Ok(None) => Err(error_page(None, &Error::unauthorized())),
            Err(e) => Err(error_page(None, &e)),
        }
    }
}

/// The signed-in session if `allowed` says its role may; otherwise the 403 page
/// naming what is `needed` (or the sign-in page, as for any session).
async fn signed_if(
    parts: &mut Parts,
    state: &AppState,
    allowed: fn(&Signed) -> bool,
    needed: &str,
) -> std::result::Result<Signed, Response> {
    let signed = Signed::from_request_parts(parts, state).await?;
    if allowed(&signed) {
        Ok(signed)
    } else {
        Err(error_page(Some(&signed), &Error::forbidden(needed)))
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> std::result::Result<Self, Response> {
        signed_if(parts, state, Signed::is_admin, "an admin key")
            .await
            .map(Admin)
    }
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> std::result::Result<Self, Response> {
        let needed = "an operator key (the configuration is shared by every tenant)";
        signed_if(parts, state, Signed::is_operator, needed)
            .await
            .map(Operator)
    }
}

/// A form that carries the session's CSRF token.
pub trait CsrfForm {
    fn csrf(&self) -> &str;
}

/// Implements [`CsrfForm`] for forms whose token is their `csrf` field.
macro_rules! csrf_field {
    ($($form:ty),+ $(,)?) => {
        $(impl $crate::console::session::CsrfForm for $form {
            fn csrf(&self) -> &str {
                &self.csrf
            }
        })+
    };
}
pub(crate) use csrf_field;

csrf_field!(CsrfOnly);

/// A form of a signed-in person whose CSRF token is this session's: a missing or
/// wrong token is the CSRF error page (403) and the handler never runs; a malformed
/// form is [`Form`]'s error page. The session is the one the handler's `Signed`,
/// `Admin` or `Operator` extractor read (kept in the request's extensions), so
/// extractors still run in the handler's order: session, path, then the form.
pub struct Checked<T>(pub T);

impl<T: DeserializeOwned + CsrfForm> FromRequest<AppState> for Checked<T> {
    type Rejection = Response;

    async fn from_request(
        request: Request,
        state: &AppState,
    ) -> std::result::Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let signed = match parts.extensions.remove::<Signed>() {
            Some(signed) => signed,
            None => Signed::from_request_parts(&mut parts, state).await?,
        };
        let Form(form) = Form::<T>::from_request(Request::from_parts(parts, body), state).await?;
        match signed.refused(form.csrf()) {
            Some(refused) => Err(refused),
            None => Ok(Checked(form)),
        }
    }
}

/// The session a request's cookie names, if it is open and its key still valid.
async fn find(state: &AppState, headers: &HeaderMap) -> Result<Option<Signed>> {
    let Some(token) = cookie(headers) else {
        return Ok(None);
    };
    let row = console_sessions::Entity::find()
        .filter(console_sessions::Column::TokenHash.eq(crate::digest::sha256_hex(token)))
        .filter(console_sessions::Column::EndedAt.is_null())
        .filter(console_sessions::Column::ExpiresAt.gt(state.clock.now()))
        .one(&state.db)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let Some(who) = keys::principal_by_id(&state.db, row.api_key_id).await? else {
        return Ok(None);
    };
    Ok(Some(Signed {
        who,
        csrf: row.csrf_token,
        session_id: row.id,
    }))
}

/// The session token from the `Cookie` header(s).
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether the browser reached us over https (a TLS-terminating proxy says so).
fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"))
}

fn set_cookie(headers: &HeaderMap, token: &str, max_age: i64) -> HeaderValue {
    let secure = if over_https(headers) { "; Secure" } else { "" };
    let value = format!(
        "{COOKIE}={token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    );
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[derive(Serialize)]
struct SignInPage<'a> {
    title: &'static str,
    error: Option<&'a str>,
    /// Whether single sign-on is offered.
    sso: bool,
}

pub async fn sign_in_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Ok(Some(_)) = find(&state, &headers).await {
        return Redirect::to("/console/").into_response();
    }
    let page = SignInPage {
        title: "Sign in",
        error: None,
        sso: state.sso.enabled(),
    };
    render(None, StatusCode::OK, "sign_in.html", page)
}

#[derive(Deserialize)]
pub struct SignIn {
    #[serde(default)]
    key: String,
}

/// Opens a session for an admin or approver key; agent keys cannot sign in.
pub async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let refused = |status, error| {
        let page = SignInPage {
            title: "Sign in",
            error: Some(error),
            sso: state.sso.enabled(),
        };
        render(None, status, "sign_in.html", page)
    };
    let lookup = keys::authenticate_row(&state.db, form.key.trim());
    let found = match state
        .auth_failures
        .guard(crate::web::client(&headers), lookup)
        .await
    {
        Ok(found) => found,
        Err(e) => return too_many_or_error(&e),
    };
    let Some((key_id, who)) = found else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "That key is not valid, or it was revoked.",
        );
    };
    if who.role == Role::Agent {
        return refused(
            StatusCode::FORBIDDEN,
            "Agent keys cannot sign in; use an admin or approver key.",
        );
    }
    let token = match open(&state, key_id).await {
        Ok(token) => token,
        Err(e) => return error_page(None, &e),
    };
    tracing::info!(key = %who.key_name, "console sign-in");
    let home = if who.role.manages_tenant() {
        "/console/"
    } else {
        "/console/proposals"
    };
    let mut response = Redirect::to(home).into_response();
    let max_age = LIFETIME.num_seconds();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&headers, &token, max_age));
    response
}

/// The page for a refused sign-in: a 429 says when to retry.
fn too_many_or_error(error: &Error) -> Response {
    let mut page = error_page(None, error);
    if let Some(seconds) = crate::web::retry_after(error) {
        page.headers_mut().insert(header::RETRY_AFTER, seconds);
    }
    page
}

/// Where the single sign-on flow leaves off: `GET /console/sso/start` sends the
/// browser to the identity provider.
pub async fn sso_start(State(state): State<AppState>) -> Response {
    match state.sso.start(&state.db, state.clock.now()).await {
        Ok(url) => Redirect::to(&url).into_response(),
        Err(e) => error_page(None, &e),
    }
}

/// What the identity provider sends back.
#[derive(Deserialize)]
pub struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /console/sso/callback`: verifies the sign-in (`auth::sso`), finds or
/// makes the member, and opens a session as its most powerful key. The answer is
/// a page that continues to the console rather than a redirect: the session
/// cookie is `SameSite=Strict`, which a browser would not send on a redirect
/// that started at the identity provider.
pub async fn sso_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::extract::Query(back): axum::extract::Query<Callback>,
) -> Response {
    let refused = |status, error: &str| {
        let page = SignInPage {
            title: "Sign in",
            error: Some(error),
            sso: state.sso.enabled(),
        };
        render(None, status, "sign_in.html", page)
    };
    let (Some(code), Some(login)) = (back.code, back.state) else {
        let why = back.error_description.or(back.error);
        let why = why.unwrap_or_else(|| "no code".to_owned());
        let shown = format!("The identity provider did not sign you in ({why}).");
        return refused(StatusCode::UNAUTHORIZED, &shown);
    };
    let now = state.clock.now();
    let who = match state.sso.finish(&state.db, &code, &login, now).await {
        Ok(who) => who,
        Err(e) => return refused(StatusCode::UNAUTHORIZED, &e.message),
    };
    let member = match crate::auth::sso::member_for(&state.db, &who, now).await {
        Ok(member) => member,
        Err(e) => return error_page(None, &e),
    };
    let key = match crate::auth::sso::session_key(&state.db, member.id).await {
        Ok(Some(key)) => key,
        Ok(None) => {
            let shown = format!(
                "Signed in as {:?}, who has no role here yet: an operator gives you one with `loadout keys create --member {} --role admin --name NAME`.",
                member.name, member.name
            );
            return refused(StatusCode::FORBIDDEN, &shown);
        }
        Err(e) => return error_page(None, &e),
    };
    let token = match open(&state, key.id).await {
        Ok(token) => token,
        Err(e) => return error_page(None, &e),
    };
    tracing::info!(member = %member.name, key = %key.name, "console sign-in by single sign-on");
    let page = axum::response::Html(
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; url=/console/\"><title>Signed in</title><p>Signed in. <a href=\"/console/\">Continue to the console</a>.</p>",
    );
    let mut response = page.into_response();
    let max_age = LIFETIME.num_seconds();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&headers, &token, max_age));
    response
}

/// Stores a new session for key row `key_id`; returns the cookie's token.
async fn open(state: &AppState, key_id: i32) -> Result<String> {
    let random = |_| Error::internal("the system random number generator failed");
    let (token, csrf) = (
        keys::random_token().map_err(random)?,
        keys::random_token().map_err(random)?,
    );
    let now = state.clock.now();
    console_sessions::ActiveModel {
        token_hash: Set(crate::digest::sha256_hex(&token)),
        api_key_id: Set(key_id),
        csrf_token: Set(csrf),
        created_at: Set(now),
        expires_at: Set(now + LIFETIME),
        ended_at: Set(None),
        ..Default::default()
    }
    .insert(&state.db)
    .await?;
    Ok(token)
}

/// Ends the session (it stays as a row) and clears the cookie.
pub async fn sign_out(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    let ended = console_sessions::ActiveModel {
        id: Set(signed.session_id),
        ended_at: Set(Some(state.clock.now())),
        ..Default::default()
    }
    .update(&state.db)
    .await;
    if let Err(e) = ended {
        return error_page(Some(&signed), &e.into());
    }
    let mut response = Redirect::to("/console/sign-in").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&headers, "", 0));
    response
}
