//! The webhook pages: a tenant's subscriptions (list, create, enable or disable,
//! delete softly) and one subscription's delivery log. Admins work in their own
//! tenant, operators too (another tenant's subscription is 404, as in the API).
//! The secret is shown once, on the answer to the creating post (`no-store`, like
//! every page), and never again.

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
        .route("/console/webhooks/{id}", get(log))
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
    let tenant = signed.who.tenant();
    match subscriptions::list(&state.db, &signed.who, Some(tenant)).await {
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
    let events: Vec<String> = form
        .events
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    let new = NewSubscription {
        url: form.url.trim().to_owned(),
        events: (!events.is_empty()).then_some(events),
        secret: None,
        description: blank(&form.description),
        tenant: None,
    };
    let sealing = Sealing {
        outbound: &state.outbound,
        keyring: &state.secrets,
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
    match subscriptions::update(&state.db, &state.outbound, &signed.who, id, patch, now).await {
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
    match subscriptions::delete(&state.db, &signed.who, id, state.clock.now()).await {
        Ok(_) => Redirect::to("/console/webhooks").into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Serialize)]
struct Log {
    title: &'static str,
    subscription: SubscriptionView,
    attempts: Vec<AttemptView>,
}

/// One subscription's delivery log, newest first.
async fn log(State(state): State<AppState>, Admin(signed): Admin, Path(id): Path<i32>) -> Response {
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
                title: "Delivery log",
                subscription,
                attempts,
            };
            render(Some(&signed), StatusCode::OK, "webhook.html", page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}
