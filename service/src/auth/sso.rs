//! Single sign-on for the console (issue 34, item 3): OpenID Connect, the
//! authorization code flow with PKCE (S256), against the issuer `serve`'s flags
//! name (`openidconnect`, over loadout's own reqwest).
//!
//! - **Start**: a random `state`, `nonce` and PKCE verifier, kept in
//!   `oidc_logins` (by the state's hash; any replica can finish the login), and
//!   the issuer's authorization URL to send the browser to.
//! - **Finish**: the login row is taken once (a replayed or expired state is
//!   refused), the code is exchanged with the verifier, and the ID token is
//!   verified (signature by the issuer's keys, issuer, audience, expiry, nonce).
//! - **Who**: the person is the member bound to the token's `(issuer, subject)`;
//!   the first sign-in of a subject makes a new member (a person of the default
//!   tenant, named from the token, never an existing member by name: a name an
//!   identity provider sends proves nothing in loadout). Two subjects are two
//!   members, whatever their names.
//! - **What it may do** stays granted in loadout: the session runs as the
//!   member's most powerful live key (operator, admin, approver), which an
//!   operator gives it on the database (`keys create --member NAME`). A member
//!   with no such key signs in to nothing; revoking the key ends its sessions,
//!   and sign-off is the member's `signer`, as for any key.

use chrono::{DateTime, Duration, Utc};
use entity::{api_keys, oidc_logins};
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, TokenResponse,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};

use super::keys::Role;
use super::members::{self, MemberKind};
use crate::error::{Error, Kind, Result};

/// How long a started login may take to come back.
pub const LOGIN_LIFETIME: Duration = Duration::minutes(10);

/// `serve`'s single sign-on flags; all four, or none.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SsoSettings {
    /// OpenID Connect issuer for console sign-in (e.g. https://id.example.com); SSO
    /// is off without it.
    #[arg(long, env = "LOADOUT_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The client id loadout is registered with at the issuer.
    #[arg(long, env = "LOADOUT_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// The client secret (sent as HTTP Basic to the token endpoint).
    #[arg(long, env = "LOADOUT_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
    /// Where the issuer sends the browser back: this server's
    /// `/console/sso/callback`, as the browser reaches it.
    #[arg(long, env = "LOADOUT_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
}

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a call to the issuer failed (no response body is ever shown).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct IssuerError(String);

/// The console's single sign-on: off, or the issuer's client, discovered on first use.
pub struct Sso {
    settings: Option<Complete>,
    http: Http,
    /// The discovered client, kept once discovery succeeded.
    client: std::sync::Mutex<Option<Client>>,
}

/// loadout's reqwest as the HTTP client `openidconnect` calls.
#[derive(Clone)]
struct Http(reqwest::Client);

impl<'c> openidconnect::AsyncHttpClient<'c> for Http {
    type Error = IssuerError;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = std::result::Result<HttpResponse, IssuerError>> + Send + 'c>,
    >;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move { call(&client, request).await })
    }
}

#[derive(Clone, Debug)]
struct Complete {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: ClientSecret,
    redirect: RedirectUrl,
}

/// Who signed in, as the verified ID token says.
#[derive(Debug, Clone)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    /// A name to start a new member with (`preferred_username`, `name`, the email's
    /// local part, or the subject).
    pub name: String,
}

fn issuer_error(what: &str, e: impl std::fmt::Display) -> Error {
    tracing::warn!(error = %e, "single sign-on: {what}");
    Error::new(
        Kind::Unavailable,
        "sso_unavailable",
        format!("single sign-on failed: {what}; try again, or sign in with a key"),
    )
}

fn refused(why: &str) -> Error {
    Error::new(Kind::Unauthenticated, "sso_refused", why.to_owned())
}

impl Sso {
    /// From `serve`'s flags: off when none is given; an error when some are missing.
    pub fn new(settings: &SsoSettings) -> anyhow::Result<Self> {
        let given = [
            &settings.oidc_issuer,
            &settings.oidc_client_id,
            &settings.oidc_client_secret,
            &settings.oidc_redirect_url,
        ];
        let complete = match given.iter().filter(|v| v.is_some()).count() {
            0 => None,
            4 => Some(Complete {
                issuer: IssuerUrl::new(settings.oidc_issuer.clone().unwrap_or_default())?,
                client_id: ClientId::new(settings.oidc_client_id.clone().unwrap_or_default()),
                client_secret: ClientSecret::new(
                    settings.oidc_client_secret.clone().unwrap_or_default(),
                ),
                redirect: RedirectUrl::new(settings.oidc_redirect_url.clone().unwrap_or_default())?,
            }),
            _ => anyhow::bail!(
                "single sign-on needs all of --oidc-issuer, --oidc-client-id, --oidc-client-secret and --oidc-redirect-url"
            ),
        };
        // The issuer is the operator's choice, not a request's: no allow-list, but
        // no redirects (the OpenID spec forbids following them here) and bounded waits.
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(crate::connectors::client::outbound::tls(None)?)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(10))
            .no_proxy()
            .build()?;
        Ok(Self {
            settings: complete,
            http: Http(http),
            client: std::sync::Mutex::new(None),
        })
    }

    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    fn settings(&self) -> Result<&Complete> {
        self.settings
            .as_ref()
            .ok_or_else(|| Error::not_found("single sign-on is not configured"))
    }

    /// The issuer's client, discovered once (a failed discovery is tried again
    /// on the next sign-in).
    async fn client(&self) -> Result<Client> {
        let settings = self.settings()?;
        let cached = self.client.lock().map(|c| c.clone()).unwrap_or(None);
        if let Some(client) = cached {
            return Ok(client);
        }
        let metadata = CoreProviderMetadata::discover_async(settings.issuer.clone(), &self.http)
            .await
            .map_err(|e| issuer_error("the issuer's discovery document", e))?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            settings.client_id.clone(),
            Some(settings.client_secret.clone()),
        )
        .set_redirect_uri(settings.redirect.clone());
        if let Ok(mut cached) = self.client.lock() {
            *cached = Some(client.clone());
        }
        Ok(client)
    }

    /// Starts a login: where to send the browser.
    pub async fn start(&self, db: &DatabaseConnection, now: DateTime<Utc>) -> Result<String> {
        let client = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scope(Scope::new("email".to_owned()))
            .add_scope(Scope::new("profile".to_owned()))
            .set_pkce_challenge(challenge)
            .url();
        oidc_logins::ActiveModel {
            state_hash: Set(crate::digest::sha256_hex(state.secret())),
            nonce: Set(nonce.secret().clone()),
            pkce_verifier: Set(verifier.secret().clone()),
            created_at: Set(now),
            used_at: Set(None),
            ..Default::default()
        }
        .insert(db)
        .await?;
        Ok(url.to_string())
    }

    /// Finishes a login: the verified identity behind `code`, for the login `state` started.
    pub async fn finish(
        &self,
        db: &DatabaseConnection,
        code: &str,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<Identity> {
        let client = self.client().await?;
        let login = take_login(db, state, now).await?;
        let tokens = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| issuer_error("the token endpoint", e))?
            .set_pkce_verifier(PkceCodeVerifier::new(login.pkce_verifier))
            .request_async(&self.http)
            .await
            .map_err(|e| {
                tracing::info!(error = %e, "single sign-on: the code was refused");
                refused("the identity provider refused the sign-in; start again")
            })?;
        let token = tokens
            .id_token()
            .ok_or_else(|| refused("the identity provider sent no ID token"))?;
        let claims = token
            .claims(&client.id_token_verifier(), &Nonce::new(login.nonce))
            .map_err(|e| {
                tracing::info!(error = %e, "single sign-on: the ID token was refused");
                refused("the identity provider's ID token did not verify")
            })?;
        let subject = claims.subject().as_str().to_owned();
        let name = claims
            .preferred_username()
            .map(|n| n.as_str().to_owned())
            .or_else(|| {
                claims
                    .name()
                    .and_then(|n| n.get(None))
                    .map(|n| n.as_str().to_owned())
            })
            .or_else(|| {
                claims
                    .email()
                    .and_then(|e| e.as_str().split('@').next().map(str::to_owned))
            })
            .unwrap_or_else(|| subject.clone());
        Ok(Identity {
            issuer: claims.issuer().as_str().to_owned(),
            subject,
            name,
        })
    }
}

/// The login row of `state`, marked used; refused when unknown, used or expired.
async fn take_login(
    db: &DatabaseConnection,
    state: &str,
    now: DateTime<Utc>,
) -> Result<oidc_logins::Model> {
    let claimed = oidc_logins::Entity::update_many()
        .col_expr(
            oidc_logins::Column::UsedAt,
            sea_orm::sea_query::Expr::value(now),
        )
        .filter(oidc_logins::Column::StateHash.eq(crate::digest::sha256_hex(state)))
        .filter(oidc_logins::Column::UsedAt.is_null())
        .filter(oidc_logins::Column::CreatedAt.gt(now - LOGIN_LIFETIME))
        .exec(db)
        .await?
        .rows_affected;
    if claimed != 1 {
        return Err(refused(
            "this sign-in was already used, took too long or was never started; start again",
        ));
    }
    oidc_logins::Entity::find()
        .filter(oidc_logins::Column::StateHash.eq(crate::digest::sha256_hex(state)))
        .one(db)
        .await?
        .ok_or_else(|| Error::internal("a login row vanished"))
}

/// One request to the issuer through loadout's reqwest.
async fn call(
    http: &reqwest::Client,
    request: HttpRequest,
) -> std::result::Result<HttpResponse, IssuerError> {
    let request =
        reqwest::Request::try_from(request).map_err(|e| IssuerError(format!("request: {e}")))?;
    let response = http
        .execute(request)
        .await
        .map_err(|e| IssuerError(format!("transport: {e}")))?;
    let mut answer = openidconnect::http::Response::builder()
        .status(response.status().as_u16())
        .version(response.version());
    for (name, value) in response.headers() {
        answer = answer.header(name.as_str(), value.as_bytes());
    }
    // A discovery document or token answer is small; a larger one is refused.
    let body = response
        .bytes()
        .await
        .map_err(|e| IssuerError(format!("body: {e}")))?;
    if body.len() > 1 << 20 {
        return Err(IssuerError("an answer over 1 MiB".to_owned()));
    }
    answer
        .body(body.to_vec())
        .map_err(|e| IssuerError(format!("response: {e}")))
}

/// The member bound to `who`, made on its first sign-in (see the module).
pub async fn member_for(
    db: &DatabaseConnection,
    who: &Identity,
    now: DateTime<Utc>,
) -> Result<entity::members::Model> {
    let bound = members::bound(db, &who.issuer, &who.subject).await?;
    if let Some(member) = bound {
        return Ok(member);
    }
    let base = usable_name(&who.name);
    for n in 1..=100 {
        let name = match n {
            1 => base.clone(),
            n => format!("{base}-{n}"),
        };
        match members::insert(db, &name, MemberKind::Person, None, now).await {
            Ok(member) => {
                let mut bound: entity::members::ActiveModel = member.into();
                bound.oidc_issuer = Set(Some(who.issuer.clone()));
                bound.oidc_subject = Set(Some(who.subject.clone()));
                return bound.update(db).await.map_err(|e| {
                    // Two first sign-ins of one subject at once: the index decides.
                    Error::from_db(e, || {
                        "this identity signed in twice at once; sign in again".to_owned()
                    })
                });
            }
            Err(members::MemberError::Taken(_)) => continue,
            Err(members::MemberError::Db(e)) => return Err(e.into()),
        }
    }
    Err(Error::conflict("no free member name for this identity"))
}

/// A member name from what the identity provider calls the person.
fn usable_name(name: &str) -> String {
    let mut out: String = name
        .to_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '-',
        })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(56)
        .collect();
    if out.is_empty() {
        out = "sso-user".to_owned();
    }
    out
}

/// The key a member's console session runs as: its most powerful live operator,
/// admin or approver key (the newest of that role), if it has one.
pub async fn session_key(
    db: &impl ConnectionTrait,
    member_id: i32,
) -> Result<Option<api_keys::Model>> {
    let live = api_keys::Entity::find()
        .filter(api_keys::Column::MemberId.eq(member_id))
        .filter(api_keys::Column::RevokedAt.is_null())
        .filter(api_keys::Column::DeletedAt.is_null())
        .order_by_desc(api_keys::Column::Id)
        .all(db)
        .await?;
    let rank = |role: &str| match role.parse::<Role>() {
        Ok(Role::Operator) => 3,
        Ok(Role::Admin) => 2,
        Ok(Role::Approver) => 1,
        _ => 0,
    };
    let best = live
        .into_iter()
        .filter(|k| rank(&k.role) > 0)
        .max_by_key(|k| rank(&k.role));
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_provider_become_valid_member_names() {
        assert_eq!(usable_name("Alice Smith"), "alice-smith");
        assert_eq!(usable_name("--!x"), "x");
        assert_eq!(usable_name("漢字"), "sso-user");
        assert!(crate::auth::keys::valid_name(&usable_name(
            &"a".repeat(300)
        )));
    }
}
