//! The MCP sessions this process holds, bounded per key, per tenant and in all.
//!
//! rmcp keeps each session (its worker, its channels and the client's
//! `initialize` parameters) until the client DELETEs it or it sits idle for five
//! minutes; nothing in rmcp bounds how many there are. [`Bounded`] wraps rmcp's
//! `LocalSessionManager` and keeps a book of who opened each one:
//!
//! - the gate [`Sessions::reserve`]s a slot for an `initialize` before rmcp sees
//!   it (refused over either cap) and runs the request with the [`Ticket`] in a
//!   task-local; rmcp creates the session inside that request's task, so
//!   [`Bounded::create_session`] binds the ticket to the new session id before any
//!   close of it can happen. A request that opens no session drops its ticket,
//!   which gives the slot back.
//! - rmcp calls `close_session` for a DELETE and again when a session's worker
//!   ends (idle, failed handshake, shutdown): the entry, with the peer the
//!   `list_changed` notifier writes to, goes at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::Peer;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

/// Who opened a session: the key's tenant and name.
pub type Owner = Arc<str>;

/// The opener's tenant.
pub type Tenant = Arc<str>;

/// Where the `initialize` handler leaves its session's peer for the notifier.
pub type PeerSlot = Arc<OnceLock<Peer<RoleServer>>>;

/// The book of open sessions and reserved slots.
pub struct Sessions {
    per_key: usize,
    per_tenant: usize,
    total: usize,
    book: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    /// Open sessions and reserved slots, per owner (no entry at zero).
    held: HashMap<Owner, usize>,
    /// The same per tenant.
    tenants: HashMap<Tenant, usize>,
    /// Open sessions and reserved slots in all.
    total: usize,
    open: HashMap<SessionId, Open>,
}

struct Open {
    owner: Owner,
    tenant: Tenant,
    peer: PeerSlot,
}

/// Why a new session was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// This key holds its maximum.
    Key(usize),
    /// This key's tenant holds its maximum.
    Tenant(usize),
    /// The process holds its maximum.
    Process(usize),
}

/// A reserved slot for one `initialize`; given back on drop unless a session
/// was created for it.
pub struct Ticket {
    sessions: Arc<Sessions>,
    owner: Owner,
    tenant: Tenant,
    peer: PeerSlot,
    bound: bool,
}

impl Ticket {
    /// Where the session's `initialize` handler puts its peer.
    pub fn peer_slot(&self) -> PeerSlot {
        self.peer.clone()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.bound {
            self.sessions.give_back(&self.owner, &self.tenant);
        }
    }
}

tokio::task_local! {
    /// The ticket of the `initialize` this task is serving.
    static OPENING: Mutex<Option<Ticket>>;
}

/// Runs `request` (an `initialize`) with `ticket`, for [`Bounded::create_session`].
pub async fn opening<F: Future>(ticket: Ticket, request: F) -> F::Output {
    OPENING.scope(Mutex::new(Some(ticket)), request).await
}

impl Sessions {
    pub fn new(per_key: usize, per_tenant: usize, total: usize) -> Arc<Sessions> {
        Arc::new(Sessions {
            per_key: per_key.max(1),
            per_tenant: per_tenant.max(1),
            total: total.max(1),
            book: Mutex::new(Book::default()),
        })
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // A panic while holding the lock cannot leave the counts half-written
        // (each update is a few integer moves), so a poisoned book is still sound.
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a new session of `owner` in `tenant`, unless it, its tenant or
    /// the process is full.
    pub fn reserve(self: &Arc<Self>, owner: Owner, tenant: Tenant) -> Result<Ticket, Full> {
        let mut book = self.book();
        let held = book.held.get(&owner).copied().unwrap_or(0);
        if held >= self.per_key {
            return Err(Full::Key(self.per_key));
        }
        let by_tenant = book.tenants.get(&tenant).copied().unwrap_or(0);
        if by_tenant >= self.per_tenant {
            return Err(Full::Tenant(self.per_tenant));
        }
        if book.total >= self.total {
            return Err(Full::Process(self.total));
        }
        book.held.insert(owner.clone(), held + 1);
        book.tenants.insert(tenant.clone(), by_tenant + 1);
        book.total += 1;
        Ok(Ticket {
            sessions: self.clone(),
            owner,
            tenant,
            peer: PeerSlot::default(),
            bound: false,
        })
    }

    /// Whether session `id` is open and was opened by another owner. A session is
    /// its opener's: another key that learned its id must neither use nor close it.
    pub fn foreign(&self, id: &str, owner: &Owner) -> bool {
        self.book()
            .open
            .get(id)
            .is_some_and(|open| open.owner != *owner)
    }

    fn give_back(&self, owner: &Owner, tenant: &Tenant) {
        let mut book = self.book();
        book.total = book.total.saturating_sub(1);
        if let Some(held) = book.held.get_mut(owner) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                book.held.remove(owner);
            }
        }
        if let Some(held) = book.tenants.get_mut(tenant) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                book.tenants.remove(tenant);
            }
        }
    }

    /// A session was created for `ticket`'s request.
    fn bind(&self, id: &SessionId, mut ticket: Ticket) {
        ticket.bound = true;
        let open = Open {
            owner: ticket.owner.clone(),
            tenant: ticket.tenant.clone(),
            peer: ticket.peer.clone(),
        };
        self.book().open.insert(id.clone(), open);
    }

    /// A session rmcp created outside an admitted `initialize` (the gate reserves
    /// for every one, so this is only a guard): counted, under no key.
    fn bind_unreserved(&self, id: &SessionId) {
        let mut book = self.book();
        book.total += 1;
        let open = Open {
            owner: Owner::from(""),
            tenant: Tenant::from(""),
            peer: PeerSlot::default(),
        };
        book.open.insert(id.clone(), open);
    }

    /// A session ended: its slot is free and its peer dropped, now.
    fn close(&self, id: &SessionId) {
        let gone = self.book().open.remove(id);
        if let Some(gone) = gone {
            self.give_back(&gone.owner, &gone.tenant);
        }
    }

    /// The peers of the open sessions that finished their `initialize`.
    pub fn peers(&self) -> Vec<Peer<RoleServer>> {
        self.book()
            .open
            .values()
            .filter_map(|open| open.peer.get().cloned())
            .collect()
    }
}

/// rmcp's in-memory session manager, with [`Sessions`] kept in step.
pub struct Bounded {
    inner: LocalSessionManager,
    sessions: Arc<Sessions>,
}

impl Bounded {
    pub fn new(sessions: Arc<Sessions>) -> Bounded {
        Bounded {
            inner: LocalSessionManager::default(),
            sessions,
        }
    }
}

type Error = LocalSessionManagerError;

impl SessionManager for Bounded {
    type Error = Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Error> {
        let (id, transport) = self.inner.create_session().await?;
        let ticket = OPENING
            .try_with(|t| t.lock().ok().and_then(|mut t| t.take()))
            .ok()
            .flatten();
        match ticket {
            Some(ticket) => self.sessions.bind(&id, ticket),
            None => self.sessions.bind_unreserved(&id),
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Error> {
        let closed = self.inner.close_session(id).await;
        self.sessions.close(id);
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.inner.resume(id, last_event_id).await
    }
}
