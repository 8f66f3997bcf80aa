//! The change stream: what an agent key would fetch, as it changes, pushed to the
//! keys that hold a stream (`GET /v1/changes`, Server-Sent Events) instead of
//! waiting for their next poll.
//!
//! The events are the outbox's (`events::record`), so their ids are the outbox's
//! row ids and a client that reconnects with `Last-Event-ID` gets what it missed.
//! One [`Hub`] per process reads the outbox once per configuration generation it
//! hears of (its own commits, Postgres `NOTIFY` from other replicas, or the poll),
//! keeps the newest [`RING`] changes, encodes each as its SSE frame once, and
//! broadcasts it; each stream only filters what it is sent ([`Scope`]): no
//! database read per event per stream.
//!
//! Ordering: every event the stream carries is recorded after its transaction
//! bumped the generation (the generation row's lock is held from the bump to the
//! commit), so those rows commit in the order of their ids and reading `id > last`
//! never skips one. `releases::outcomes::submit` bumps before a guard's transition
//! for this reason.
//!
//! An event names what changed (the agent, the label, the revision or the
//! rollout's sides, the user whose instructions changed), never the content, with
//! `etag`: the configuration generation it committed at (`"g57"`). A fetch that
//! carries it (`Loadout-Generation`, or OFREP's `flagConfigEtag`) is served at
//! that generation or later, whichever replica takes it.

pub mod bounds;
pub mod event;
pub mod frame;
pub mod read;
pub mod token;

pub use event::{Change, TYPES};

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use tokio::sync::{broadcast, watch};

use crate::cache::Generation;

/// How many changes each process keeps for replay, unless configured (hidden
/// `serve --stream-history`); a client further behind gets them from the outbox,
/// and one `everything` event past this many.
pub const RING: usize = 4096;

/// How often a stream with nothing to say sends a comment, so that proxies and
/// the server's own idle timeout (60 s by default) keep it open.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// How many notices a stream may fall behind before it is told to refetch
/// everything instead of being sent each.
const LAG: usize = 1024;

/// What the hub broadcasts.
#[derive(Clone, Debug)]
pub enum Notice {
    Change(Arc<Change>),
    /// Keys revoked or deleted: their streams end.
    Revoked(Arc<[i32]>),
}

/// What a stream is sent: its key's tenant and, optionally, one agent and one label.
#[derive(Clone, Debug)]
pub struct Scope {
    pub tenant: Box<str>,
    /// `None`: every agent (a key that reaches every agent, asking for all).
    pub agent: Option<Box<str>>,
    /// `None`: every label.
    pub label: Option<Box<str>>,
    /// The key whose revocation ends the stream.
    pub key_id: i32,
}

impl Scope {
    /// Whether a stream of this scope is sent `change`.
    pub fn admits(&self, change: &Change) -> bool {
        change.tenant.as_ref().is_none_or(|t| *t == self.tenant)
            && self.agent.as_ref().is_none_or(|a| *a == change.agent)
            && match (&self.label, &change.label) {
                (Some(wanted), Some(label)) => wanted == label,
                _ => true,
            }
    }
}

/// The newest changes, and how far back they are complete.
#[derive(Default)]
struct Ring {
    changes: VecDeque<Arc<Change>>,
    /// Every change with an id above this is in `changes`.
    complete_after: i64,
    /// The newest change's id (0: none yet).
    cursor: i64,
    /// The generation of the last read.
    generation: i64,
    /// Keys whose revocation was announced.
    revoked: HashSet<i32>,
    /// The newest revocation seen.
    revoked_since: Option<DateTime<Utc>>,
}

/// The process's change stream: reads the outbox, keeps the ring, broadcasts.
pub struct Hub {
    sender: broadcast::Sender<Notice>,
    /// How many changes the ring keeps.
    history: usize,
    ring: Mutex<Ring>,
    closing: watch::Sender<bool>,
    pub bounds: Arc<bounds::Streams>,
}

/// Where a new stream starts: what it missed, then the live notices.
pub struct Subscription {
    /// Frames to send first: the missed changes (or one `everything`), then `ready`.
    pub first: Vec<Bytes>,
    /// Live notices; only those with an id above `after` are sent.
    pub notices: broadcast::Receiver<Notice>,
    pub after: i64,
    pub closing: watch::Receiver<bool>,
}

impl Hub {
    pub fn new(bounds: Arc<bounds::Streams>, history: usize) -> Self {
        Self {
            sender: broadcast::Sender::new(LAG),
            history: history.max(1),
            ring: Mutex::new(Ring::default()),
            closing: watch::Sender::new(false),
            bounds,
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        // A panic while holding it leaves the ring as it was between two pushes.
        self.ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The newest change id and generation this process has read.
    pub fn position(&self) -> (i64, i64) {
        let ring = self.ring();
        (ring.cursor, ring.generation)
    }

    /// Reads the newest changes the ring keeps, before any stream starts; keys revoked
    /// from `now` on end their streams.
    pub async fn prime(
        &self,
        db: &DatabaseConnection,
        now: DateTime<Utc>,
    ) -> Result<(), sea_orm::DbErr> {
        let read = read::newest(db, self.history).await?;
        let mut ring = self.ring();
        ring.complete_after = match read.changes.len() < self.history {
            true => 0,
            false => read.changes.first().map_or(0, |c| c.id - 1),
        };
        ring.generation = read.generation;
        ring.cursor = read.changes.last().map_or(0, |c| c.id);
        ring.changes = read.changes.into_iter().map(Arc::new).collect();
        ring.revoked_since = Some(now);
        Ok(())
    }

    /// Reads and broadcasts what was recorded since the last read, and the keys
    /// revoked since: one read of each, whatever the number of streams.
    pub async fn catch_up(&self, db: &DatabaseConnection) -> Result<(), sea_orm::DbErr> {
        loop {
            let cursor = self.ring().cursor;
            let read = read::after(db, cursor, read::BATCH).await?;
            let full = read.changes.len() >= read::BATCH;
            let mut ring = self.ring();
            ring.generation = ring.generation.max(read.generation);
            for change in read.changes {
                if change.id <= ring.cursor {
                    continue;
                }
                ring.cursor = change.id;
                let change = Arc::new(change);
                if ring.changes.len() >= self.history
                    && let Some(oldest) = ring.changes.pop_front()
                {
                    ring.complete_after = oldest.id;
                }
                ring.changes.push_back(change.clone());
                // No receiver is not an error: nobody is listening.
                let _ = self.sender.send(Notice::Change(change));
            }
            drop(ring);
            if !full {
                break;
            }
        }
        let since = self.ring().revoked_since;
        let revoked = read::revoked_keys(db, since).await?;
        let mut ring = self.ring();
        let fresh: Vec<i32> = revoked
            .keys
            .into_iter()
            .filter(|id| ring.revoked.insert(*id))
            .collect();
        ring.revoked_since = revoked.newest.or(ring.revoked_since);
        drop(ring);
        if !fresh.is_empty() {
            let _ = self.sender.send(Notice::Revoked(fresh.into()));
        }
        Ok(())
    }

    /// A new stream for `scope`: `last_event_id` is what the client last saw
    /// (`Last-Event-ID`), `None` on a first connect. The missed changes come from
    /// the ring, else from the outbox (one read per reconnect), else one
    /// `everything` event; then `ready`, naming where the client now is.
    pub async fn subscribe(
        &self,
        db: &DatabaseConnection,
        scope: &Scope,
        last_event_id: Option<i64>,
    ) -> Result<Subscription, sea_orm::DbErr> {
        let (mut first, notices, cursor, generation) = {
            let ring = self.ring();
            // Subscribed under the lock: nothing is broadcast between the
            // snapshot and the receiver's start.
            let notices = self.sender.subscribe();
            let first = match last_event_id {
                Some(seen) if seen < ring.complete_after => None,
                Some(seen) => Some(
                    ring.changes
                        .iter()
                        .filter(|c| c.id > seen && scope.admits(c))
                        .map(|c| c.frame.clone())
                        .collect::<Vec<_>>(),
                ),
                None => Some(Vec::new()),
            };
            (first, notices, ring.cursor, ring.generation)
        };
        if first.is_none()
            && let Some(seen) = last_event_id
        {
            // Older than the ring: the outbox has it, unless too much was missed.
            let read = read::between(db, seen, cursor, self.history).await?;
            if read.changes.len() < self.history {
                first = Some(
                    read.changes
                        .iter()
                        .filter(|c| scope.admits(c))
                        .map(|c| c.frame.clone())
                        .collect(),
                );
            }
        }
        let after = cursor.max(last_event_id.unwrap_or(0));
        let mut first = match first {
            Some(missed) => missed,
            None => vec![frame::everything(cursor, generation, "history")],
        };
        first.insert(0, frame::retry());
        first.push(frame::ready(after, generation));
        Ok(Subscription {
            first,
            notices,
            after,
            closing: self.closing.subscribe(),
        })
    }

    /// Ends every stream (shutdown): clients reconnect to another replica.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Reads on every generation rise until the hub is closed; a failed read is
    /// logged and retried at the next rise (or the poll's), losing nothing.
    pub async fn serve(self: Arc<Self>, db: DatabaseConnection, generation: Arc<Generation>) {
        let mut rises = generation.changes();
        let mut closing = self.closing.subscribe();
        loop {
            if let Err(e) = self.catch_up(&db).await {
                tracing::warn!(error = %e, "cannot read the outbox for the change stream; retrying at the next change");
            }
            tokio::select! {
                rose = rises.changed() => if rose.is_err() { return },
                _ = closing.wait_for(|closed| *closed) => return,
            }
        }
    }
}

/// A heartbeat frame: an SSE comment.
pub fn heartbeat() -> Bytes {
    Bytes::from_static(b": ping\n\n")
}

/// The frames a stream sends: `first`, then each admitted change, a heartbeat
/// every [`HEARTBEAT`], one `everything` if it falls [`LAG`] notices behind; it
/// ends when its key is revoked, the hub closes, or the client goes. `hold` is
/// kept for as long as the stream lives (its slot in the bounds).
pub fn frames<H: Send + 'static>(
    hub: Arc<Hub>,
    subscription: Subscription,
    scope: Scope,
    hold: H,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    struct State<H> {
        hub: Arc<Hub>,
        first: std::vec::IntoIter<Bytes>,
        notices: broadcast::Receiver<Notice>,
        after: i64,
        closing: watch::Receiver<bool>,
        scope: Scope,
        beat: tokio::time::Interval,
        _hold: H,
    }
    let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = State {
        hub,
        first: subscription.first.into_iter(),
        notices: subscription.notices,
        after: subscription.after,
        closing: subscription.closing,
        scope,
        beat,
        _hold: hold,
    };
    enum Next {
        Close,
        Beat,
        Notice(Result<Notice, broadcast::error::RecvError>),
    }
    futures_util::stream::unfold(state, |mut s| async move {
        if let Some(frame) = s.first.next() {
            return Some((Ok(frame), s));
        }
        loop {
            let next = tokio::select! {
                _ = s.closing.wait_for(|closed| *closed) => Next::Close,
                _ = s.beat.tick() => Next::Beat,
                notice = s.notices.recv() => Next::Notice(notice),
            };
            match next {
                Next::Close | Next::Notice(Err(broadcast::error::RecvError::Closed)) => {
                    return None;
                }
                Next::Beat => return Some((Ok(heartbeat()), s)),
                Next::Notice(Ok(Notice::Change(change))) => {
                    if change.id > s.after && s.scope.admits(&change) {
                        s.after = change.id;
                        s.beat.reset();
                        return Some((Ok(change.frame.clone()), s));
                    }
                }
                Next::Notice(Ok(Notice::Revoked(keys))) => {
                    if keys.contains(&s.scope.key_id) {
                        return None;
                    }
                }
                Next::Notice(Err(broadcast::error::RecvError::Lagged(_))) => {
                    let (cursor, generation) = s.hub.position();
                    s.after = s.after.max(cursor);
                    return Some((Ok(frame::everything(cursor, generation, "lagged")), s));
                }
            }
        }
    })
}
