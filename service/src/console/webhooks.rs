//! The webhook pages: a tenant's subscriptions (list, create, enable or disable,
//! delete softly) and one subscription's page (its delivery log, its URL, events
//! and description to edit, its secret to rotate). As in the API, an admin works
//! in its own tenant (another tenant's subscription is 404) and an operator in
//! every tenant: it sees them all and may name the tenant of a new subscription.
//! A secret is shown once, on the answer to the creating or rotating post
//! (`no-store`, like every page), and never again.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::page::{CsrfOnly, Path, Query, Signed, blank, error_page, refusal, render};
use super::session::{Admin, Checked, csrf_field};
use crate::app::AppState;
use crate::error::Error;
use crate::webhooks::subscriptions::{
    self, AttemptView, NewSubscription, Sealing, SubscriptionPatch, SubscriptionView,
};

/// Attempts shown in a delivery log.
const LOG_ROWS: u64 = 50;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/webhooks", get(list).post(create))
        .route("/console/webhooks/{id}", get(log).post(edit))
        .route("/console/webhooks/{id}/rotate", post(rotate))
        .route("/console/webhooks/{id}/state", post(switch))
        .route("/console/webhooks/{id}/delete", post(delete))
}

/// The new-subscription form. Events are comma- or space-separated; empty is every type.
#[derive(Serialize, Deserialize, Default)]
struct Fields {
    #[serde(default, skip_serializing)]
    csrf: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    events: String,
    #[serde(default)]
    description: String,
    /// Operators only: the new subscription's tenant (empty: the operator's own).
    #[serde(default)]
    tenant: String,
}

/// The form's events: comma-, space- or line-separated.
fn event_list(text: &str) -> Vec<String> {
    text.split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Enable (`on`) or disable (`off`) a subscription.
#[derive(Deserialize)]
struct Switch {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    state: String,
}

csrf_field!(Fields, Switch);

#[derive(Serialize)]
struct Created {
    id: i32,
    secret: String,
}

#[derive(Serialize, Default)]
struct Webhooks {
    title: &'static str,
    subscriptions: Vec<SubscriptionView>,
    types: &'static [&'static str],
    form: Fields,
    error: Option<String>,
    /// The subscription just made and its secret: shown on this response only.
    created: Option<Created>,
    saved: Option<i32>,
}

async fn show(state: &AppState, signed: &Signed, status: StatusCode, page: Webhooks) -> Response {
    // An admin's own tenant; an operator's: every tenant.
    match subscriptions::list(&state.db, &signed.who, None).await {
        Ok(subscriptions) => {
            let page = Webhooks {
                title: "Webhooks",
                subscriptions,
                types: crate::events::TYPES,
                ..page
            };
            render(Some(signed), status, "webhooks.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<i32>,
}

async fn list(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Query(query): Query<Saved>,
) -> Response {
    let page = Webhooks {
        saved: query.saved,
        ..Default::default()
    };
    show(&state, &signed, StatusCode::OK, page).await
}

/// Creates a subscription in the caller's tenant and answers its secret, once.
async fn create(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Checked(form): Checked<Fields>,
) -> Response {
    let events = event_list(&form.events);
    let new = NewSubscription {
        url: form.url.trim().to_owned(),
        events: (!events.is_empty()).then_some(events),
        secret: None,
        description: blank(&form.description),
        tenant: blank(&form.tenant),
    };
    let sealing = Sealing {
        outbound: &state.outbound,
        keyring: &state.secrets,
        most: state.settings.webhooks.webhook_max_subscriptions,
    };
    let now = state.clock.now();
    match subscriptions::create(&state.db, &sealing, &signed.who, new, now).await {
        Ok(made) => {
            tracing::info!(webhook = made.subscription.id, by = %signed.who.key_name, "webhook subscription created in the console");
            let page = Webhooks {
                created: Some(Created {
                    id: made.subscription.id,
                    secret: made.secret,
                }),
                ..Default::default()
            };
            show(&state, &signed, StatusCode::CREATED, page).await
        }
        Err(e) => {
            let again = |status, e: Error| {
                let page = Webhooks {
                    form,
                    error: Some(e.message),
                    ..Default::default()
                };
                show(&state, &signed, status, page)
            };
            refusal(&signed, e, again).await
        }
    }
}

async fn switch(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Checked(form): Checked<Switch>,
) -> Response {
    let patch = SubscriptionPatch {
        enabled: Some(form.state == "on"),
        ..Default::default()
    };
    let now = state.clock.now();
    match subscriptions::update(
        &state.db,
        &state.outbound,
        &signed.who,
        id,
        patch,
        now,
        None,
    )
    .await
    {
        Ok(_) => {
            Redirect::to(&format!("/console/webhooks?saved={id}#webhook-{id}")).into_response()
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

async fn delete(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    match subscriptions::delete(&state.db, &signed.who, id, state.clock.now(), None).await {
        Ok(_) => Redirect::to("/console/webhooks").into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Serialize)]
struct Log {
    title: &'static str,
    subscription: SubscriptionView,
    attempts: Vec<AttemptView>,
    types: &'static [&'static str],
    /// The settings form: the subscription's values, or what was posted.
    form: Fields,
    error: Option<String>,
    saved: bool,
    /// A secret just rotated: shown on this response only.
    secret: Option<String>,
}

/// What the subscription page shows besides the subscription and its log.
#[derive(Default)]
struct Extra {
    form: Option<Fields>,
    error: Option<String>,
    saved: bool,
    secret: Option<String>,
}

/// The form's fields as the subscription holds them (every type: empty).
fn fields_of(subscription: &SubscriptionView) -> Fields {
    let every = subscription.events.iter().any(|e| e == crate::events::ALL);
    Fields {
        csrf: String::new(),
        url: subscription.url.clone(),
        events: if every {
            String::new()
        } else {
            subscription.events.join(", ")
        },
        description: subscription.description.clone().unwrap_or_default(),
        tenant: subscription.tenant.clone(),
    }
}

/// One subscription's page: its settings, its secret and its delivery log, newest first.
async fn page(
    state: &AppState,
    signed: &Signed,
    id: i32,
    status: StatusCode,
    extra: Extra,
) -> Response {
    let read = async {
        let subscription: SubscriptionView = subscriptions::find(&state.db, &signed.who, id)
            .await?
            .into();
        let attempts = subscriptions::attempts(&state.db, &signed.who, id, LOG_ROWS).await?;
        Ok::<_, Error>((subscription, attempts))
    };
    match read.await {
        Ok((subscription, attempts)) => {
            let page = Log {
                title: "Webhook subscription",
                form: extra.form.unwrap_or_else(|| fields_of(&subscription)),
                subscription,
                attempts,
                types: crate::events::TYPES,
                error: extra.error,
                saved: extra.saved,
                secret: extra.secret,
            };
            render(Some(signed), status, "webhook.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

async fn log(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Query(query): Query<Saved>,
) -> Response {
    let extra = Extra {
        saved: query.saved.is_some(),
        ..Extra::default()
    };
    page(&state, &signed, id, StatusCode::OK, extra).await
}

/// Changes the URL (checked as on create), the events (empty: every type) and the description.
async fn edit(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Checked(form): Checked<Fields>,
) -> Response {
    let events = event_list(&form.events);
    let patch = SubscriptionPatch {
        url: Some(form.url.trim().to_owned()),
        events: Some(if events.is_empty() {
            vec![crate::events::ALL.to_owned()]
        } else {
            events
        }),
        description: Some(form.description.trim().to_owned()),
        enabled: None,
    };
    let now = state.clock.now();
    match subscriptions::update(
        &state.db,
        &state.outbound,
        &signed.who,
        id,
        patch,
        now,
        None,
    )
    .await
    {
        Ok(_) => {
            tracing::info!(webhook = id, by = %signed.who.key_name, "webhook subscription changed in the console");
            Redirect::to(&format!("/console/webhooks/{id}?saved={id}")).into_response()
        }
        Err(e) => {
            let again = |status, e: Error| {
                let extra = Extra {
                    form: Some(form),
                    error: Some(e.message),
                    ..Extra::default()
                };
                page(&state, &signed, id, status, extra)
            };
            refusal(&signed, e, again).await
        }
    }
}

/// Replaces the signing secret and shows the new one, once.
async fn rotate(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    let now = state.clock.now();
    match subscriptions::rotate(&state.db, &state.secrets, &signed.who, id, None, now).await {
        Ok(made) => {
            tracing::info!(webhook = id, by = %signed.who.key_name, "webhook secret rotated in the console");
            let extra = Extra {
                secret: Some(made.secret),
                ..Extra::default()
            };
            page(&state, &signed, id, StatusCode::OK, extra).await
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}
