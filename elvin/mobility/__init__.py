"""Mobility support: move out at one router, move in at another, lose nothing.

This follows Caporuscio, Carzaniga and Wolf, "Design and Evaluation of a
Support Service for Mobile, Wireless Publish/Subscribe Applications" (IEEE
TSE 2003): a *mobility proxy* at each router subscribes and buffers for a
client that moved out; on move-in the client's subscriptions and the buffered
notifications are brought to the client at its new router.

* ``MobilityProxy`` (``elvin.mobility.proxy``): the proxy. It is a plain
  Elvin client, so it works in front of any Elvin router: ``elvind
  --mobility`` (or ``mobility = true`` in its TOML) runs one inside the
  router, connected to it over an in-process channel; ``elvin-mobility-proxy -e URL`` runs
  one as a process of its own.
* ``MobileConnection`` (``elvin.mobility.client``): the client library. It
  wraps a connection, keeps its subscriptions (with their keys), and adds
  ``move_out()`` and ``move_in(url, previous_proxy=...)``.

The protocol
============

Every message is an ordinary notification whose attributes are named
``Mobility.*`` (constants in ``elvin.mobility.protocol``), so that the
service needs nothing from the router but subscribe and publish (the paper's
portability goal).

Naming. A proxy has an id, by default the canonical URL of the router it is
connected to (``elvin:4.0/tcp,none,xdr/HOST:PORT``), plus aliases (inside
``elvind``: every URL the router listens on). A client addresses the proxy
at its router by that router's URL unless told otherwise. Ids that are URLs
compare in canonical form.

Secrets travel privately, in both directions, with Elvin's own SHA-1
consumer key scheme (``docs/keys.md``): a notification sent with the public key
``SHA-1(k)`` and ``deliver_insecure`` false reaches only subscriptions made
with the raw key ``k``, however broadly anyone else subscribes.

Private replies. Every request carries ``Mobility.Request-Id`` (a string
chosen by the requester) and ``Mobility.Reply-Key`` (an opaque: the SHA-1 of
a fresh raw key the requester subscribed with in the SHA-1 consumer scheme).
Replies repeat ``Request-Id`` and are sent with that public key and
``deliver_insecure`` false, so only the requester receives them, although
anyone may subscribe to ``Mobility.*``. Replies carry ``Mobility.Status``
(``"ok"`` or ``"error"``); errors add ``Mobility.Error-Code`` (``malformed``,
``unknown-client``, ``bad-secret``, ``in-use``, ``limit``, ``subscription``,
``unreachable``, ``insecure``, ``storage``, ``internal``) and ``Mobility.Error``
(text); ``storage`` means the proxy cannot write its state file now (a
move-out is refused rather than promised; the text says why and names the
file, e.g. the disk is full; the client stays attached; try again later:
each move-out tries the disk anew).
A request too broken to carry a reply key gets its error reply unkeyed
(never a secret).

Private requests. Each proxy has a raw key of its own (random at each
start, or ``ProxyConfig.key``) and subscribes to its requests with it in the
consumer scheme, still accepting insecure matches (for ``hello``). Its
public key, ``Mobility.Proxy-Key`` (20 bytes), is in its ``hello`` and
``move-out`` replies. Every request that carries a secret (``move-out``: the
subscriptions with their raw keys; ``move-in`` and ``download``: the
download secret) is sent with the recipient proxy's public key and
``deliver_insecure`` false, and a proxy refuses such a request (code
``insecure``, acting on nothing in it) unless it arrived through its key.

Requests (``Mobility.Request``), all with ``Mobility.Proxy`` (the proxy's id)
and, except ``hello``, ``Mobility.Client`` (the client's unique id):

``hello`` (anyone to a proxy; public)
    Nothing else. The reply carries ``Mobility.Proxy-Key``.

``move-out`` (client to the proxy at its router; private)
    ``Mobility.Subscriptions``: an opaque holding one framed ``SubAddRqst``
    packet per subscription, encoded by the client protocol codec (xid = the
    client's id for the subscription, then the expression,
    ``accept_insecure`` and the keys of every scheme, raw key bytes
    included, exactly as the client's router matches it: the subscription's
    keys plus the connection-level subscription keys). (A JSON string
    ``[{"id", "expression", "accept_insecure"}]``, the first version's
    keyless form, is still accepted.) Optional ``Mobility.Quota`` (most
    notifications to buffer) and ``Mobility.Expiry`` (seconds), optional
    ``Mobility.Secret`` (the download secret, chosen by the client, at least
    16 characters: the client knows it even if the reply never arrives) and
    ``Mobility.Previous-Secret`` (the client's previous ticket, then older
    ones, space-separated: a buffer the proxy still holds for this client id
    under one of them, or under ``Secret``, is replaced instead of refused
    with ``in-use``), ``Mobility.Owner`` (the client's owner proof for this
    proxy, ``protocol.owner_proof``: a buffer made with the same proof is
    replaced even when the client no longer names its secret; the proof is
    kept with the buffer, and one made for another proxy id never matches)
    and ``Mobility.Resume`` (1: the client's connection to
    this router died under it, so what a buffer restored after a restart
    recorded since then never reached it: it is carried into the new
    buffer). The proxy
    creates a client handler, subscribes with every expression and its keys
    and waits for each subscription to be acknowledged by the router, writes
    the handler to its store (if any), then replies with ``Mobility.Secret``,
    the granted ``Mobility.Quota`` and ``Mobility.Expiry``, and
    ``Mobility.Proxy-Key``. Inside a federated ``elvind`` the reply first
    waits (``mobility-announce-wait`` seconds at most) until the router's
    peers know what its subscribers want (right after a restart they do not
    until the links are up and the pull filters acknowledged, nor for a round
    trip after a subscription that changes the pull filters, such as the
    proxy's own: what is published at them meanwhile is not forwarded); if
    some still may not,
    the reply names them in ``Mobility.Unannounced`` (``, ``-separated),
    as does a move-in reply. The reply is sent to the client's reply key *and*
    the proxy's own key: the buffer starts where the proxy's copy falls in
    its stream, and the client delivers nothing live after its copy, so a
    notification routed around the move-out is delivered live or buffered,
    never both. Only then does the client detach; its ticket keeps the
    secret and the proxy's public key. While away, each notification is
    buffered once with the ids of the client's subscriptions it matched.

``fence`` (client to the proxy at its router, and to itself; private)
    ``Mobility.Client``, ``Mobility.Secret``, ``Mobility.Fence`` (an id).
    No reply. Sent back at the move-out router, after the client's new
    subscriptions are acknowledged, with the proxy's key and a one-off key of
    the client's own (which it subscribed to): both see it at the same place
    in the router's order. The proxy notes where it fell in the buffer.

``move-in`` (client to the proxy at its new router; private)
    ``Mobility.Secret``, ``Mobility.From`` (the move-out proxy's id),
    optional ``Mobility.Fence`` (the fence just placed),
    optional ``Mobility.From-Key`` (the move-out proxy's public key, from
    the ticket) and ``Mobility.From-Key-Pinned`` (1: the client pinned that
    key), ``Mobility.From-URL`` (its router) and ``Mobility.Via``
    (``"direct"``, default, or ``"bus"``). The client sends it with the new
    proxy's key: the ticket's when it is back at the move-out proxy,
    otherwise one from a ``hello`` just before (or pinned). If ``From`` is
    this proxy, it is the paper's *abbreviated* move-in: the proxy replies
    with what it buffered before the fence (the reply repeats
    ``Mobility.Fence``; the client then delivers from its new subscriptions
    only what came after the fence: nothing lost, nothing twice). Otherwise
    (*full* move-in) the proxy downloads the buffer from the move-out proxy
    and forwards it.

``download`` (move-in proxy to move-out proxy; private)
    ``Mobility.Secret``, ``Mobility.Requester`` (informational); sent with
    ``From-Key`` (without one, the move-in proxy first sends a ``hello`` to
    the move-out proxy along the same path; with one not pinned, it sends
    the hello too and answers the move-in ``unknown-client`` if the key
    differs: that proxy's state was reset, nothing of the ticket's is left). The move-out proxy checks the
    secret, places a fence of its own (a ``fence`` to its own key; once it is
    back, everything the router routed before it is in the buffer) and
    replies with what came before it. Over the bus the requester's reply
    subscription may not have reached the old router when the reply leaves,
    so the requester repeats the request (same id) until the reply is
    complete, and a proxy answers a repeated request (right secret, same
    fence) with the same reply.

``release`` (client to the proxy at its new router, which forwards it to
the move-out proxy along the download's path; private)
    ``Mobility.Secret`` and, like ``move-in``, ``From``, ``From-Key``,
    ``From-URL``, ``Via``. No reply. Sent once the move-in reply is
    complete: only then does the move-out proxy forget the handler (and its
    subscriptions, and its state on disk), so that a move-in cut short (the
    router died) can be done again. Without a release (an older client) the
    handler goes ``download_timeout`` seconds after handing the buffer over.

Who sends what, in a full move-in at another router (``K_x`` = SHA-1 of
``x``'s raw key; "public" = anyone subscribed to ``Mobility.*`` sees it)::

    client -> A   hello                              public
    A -> client   Proxy-Key K_A                      to the client's reply key
    client -> A   move-out (subscriptions, keys)     with K_A only
    A -> client   Secret, Proxy-Key K_A              to the client's reply key
    ... away; at router B ...
    client -> B   hello                              public
    B -> client   Proxy-Key K_B                      to the client's reply key
    client -> *   ping requests (sync="ping")        public (no secret)
    A -> client   ping responses                     public (no secret)
    client -> B   move-in (Secret, From-Key K_A)     with K_B only
    B -> A        download (Secret)                  with K_A only (direct or bus)
    A -> B        buffer batches                     to B's reply key
    B -> client   buffer batches                     to the client's reply key

Buffer replies (to move-in and download) are one or more notifications with
``Mobility.Batch`` (0-based), ``Mobility.Batch-Count``,
``Mobility.Notifications`` (opaque: per notification, an XDR count of
subscription ids, the ids, then the attributes as the Elvin client protocol
encodes them, so every value type survives), ``Mobility.Count``,
``Mobility.Dropped`` (lost to the quota, or to expiry) and
``Mobility.Expired`` (1 when the buffer expired before the move-in).

Ping (the paper's synchronisation option): the client, after subscribing at
its new router, publishes ``{Mobility.Ping: "request", Mobility.Proxy: OLD,
Mobility.Client: ID, Mobility.Ping-Id: N}`` at intervals; the old proxy
answers each with ``Mobility.Ping: "response"`` (same client and ping id).
The client issues the move-in request only when a response arrives (or the
ping times out). The *delay* option waits a configured time instead.

How the move-out proxy is reached
=================================

The paper's move-in proxy "contacts the move-out proxy" directly: proxies
form no permanent connections, and the only ones between them are made for
a move-in. That is ``Via = "direct"``, the default: the move-in proxy opens
a client connection to the move-out proxy's router (``From-URL``, default
the ``From`` id, which is a URL by default), sends the ``download`` request
there, and closes it. It needs nothing from the routers (no federation),
only that the new proxy can reach the old router. With ``Via = "bus"`` the
download request and reply travel through the publish/subscribe system
itself, which requires the routers to be federated (and federation links
that carry the keys of the private reply). The ping option always uses the
bus: that is its point, it tests the routes the client's subscriptions will
use, so it only makes sense between federated routers; without a response
it proceeds after ``ping_timeout`` and reports ``ping_ok = False``.

Beyond the paper
================

* Durability: with a store (``elvind --mobility --state-dir DIR``,
  ``elvin.mobility.store``) the proxy's key, handlers and buffers are in
  SQLite and come back at start, subscribed again before the router accepts
  connections; inside ``elvind`` a buffer is on disk before the router tells
  anyone (a producer's round trip) that it read the notification. A
  ``MobileConnection`` whose router dies during a move-out is moved out with
  an unconfirmed ticket (its own secret); during a move-in it delivers none
  of it and is moved out again, ticket kept: the next move-in collects
  everything once.
* Quota: a client asks for a quota; the proxy grants at most its own. When
  full, the oldest buffered notification is dropped (the newest survive,
  per-producer order is kept) and counted in ``Mobility.Dropped``.
* Expiry: an unclaimed buffer is released after the granted expiry; a
  tombstone (kept ``tombstone_ttl``) lets the client learn on move-in that
  its buffer expired and how many notifications were lost.
* Duplicate suppression: ``MobileConnection(dedup=("Producer", "Seq"))``
  drops a notification whose (producer, sequence) pair was already
  delivered. Notifications without both attributes are always delivered
  (the paper's caveat: only producers can make copies identifiable).
* Authentication: the secret handed out at move-out is needed to collect
  the buffer (compared in constant time); a wrong secret gets
  ``bad-secret`` and leaves the buffer where it is. The secret only ever
  travels privately (above), and it is single-use: the buffer is destroyed
  when collected.
* Keyed subscriptions move: the proxy subscribes with the client's keys (so
  it buffers secure notifications for them, and only what the keys allow),
  and at the new router the client resubscribes with the keys it kept
  itself, never with keys taken from the wire. Connection-level keys
  (``MobileConnection.set_keys``, or those of the wrapped connection) move
  as well: the router matches a subscription with its own keys plus its
  connection's subscription keys, so the client merges its connection's
  subscription keys into every subscription it hands over (the proxy's
  connection has none of them), and at the new router it sets its
  connection-level keys again, from its own state, before resubscribing.
  The buffer does not record
  whether a notification matched securely; the client reports a buffered
  notification as secure when a subscription it matched refuses insecure
  ones (so it can only have matched securely).

Threat model
============

Protected against: a *passive* eavesdropper, i.e. any client of any of the
routers (or federated router) that subscribes to whatever it likes,
``Mobility.*`` included. It sees the public ``hello`` requests and ping
traffic (proxy ids, client ids, reply keys and proxy public keys, none of
them secret) and never a download secret, a subscription's raw key,
buffered notification content, or a reply.

Not protected against:

* An *active* attacker that publishes on the bus can answer a ``hello``
  before the real proxy (the reply key in the request is public, so it can
  reply privately to the requester) and hand out a key of its own. The
  client would then send the move-out request (subscriptions and raw keys)
  or the move-in request (the secret) to the attacker, which could collect
  the buffer first. Pinning proxy keys (``ProxyConfig.key`` /
  ``elvin-mobility-proxy --key-file`` / ``elvind --mobility-key-file``,
  and ``MobileConnection(proxy_keys=...)`` or ``proxy_key=`` on the
  request functions) removes the ``hello``
  and this attack; a ticket's key is pinned by the move-out exchange (which
  itself rests on the ``hello`` unless pinned). An active attacker can also
  flood the proxies with requests (a proxy bounds the work it takes on:
  ``MAX_PENDING``, limits on clients and subscriptions), or forge ping
  responses (which only affects when a move-in starts). Private requests
  cannot be replayed by someone who never received them.
* The proxies are trusted: a proxy holds the subscriptions' raw keys while
  the client is away and sees every buffered notification, and a move-in
  proxy sees the secret and the buffer it forwards. With a store, its file
  (mode 0600 in a 0700 directory) holds those raw keys, the secrets and the
  buffers: protect it as such.
* The routers are trusted, as for any Elvin key use: they see raw keys in
  subscriptions and every notification. Links between clients and routers
  (and between federated routers) are only as confidential as their
  transport (use TLS where that matters); the direct download is an
  ordinary client connection from the move-in proxy to the old router.
* Requests carry no proof of who sent them beyond the secret: the proxy
  cannot tell a client from another holder of its secret.

If the download fails (the old router is unreachable), ``move_in`` raises
but leaves the client attached at the new router with its subscriptions; the
buffer stays at the old proxy until it expires, and
``MobileConnection.collect()`` tries again.

Limits: publishing while moved out is the application's business, as in
the paper. ``MobileConnection.set_keys`` is refused while moved out (the
proxy subscribed with the keys the client had when it left).
"""

from elvin.mobility.client import (
    MobileConnection,
    MobileSubscription,
    MoveInReport,
    Ticket,
    hello,
    ping,
    request_move_in,
    request_move_out,
)
from elvin.mobility.protocol import MobilityError, SubscriptionSpec
from elvin.mobility.proxy import MobilityProxy, ProxyConfig

__all__ = [
    "MobileConnection",
    "MobileSubscription",
    "MobilityError",
    "MobilityProxy",
    "MoveInReport",
    "ProxyConfig",
    "SubscriptionSpec",
    "Ticket",
    "hello",
    "ping",
    "request_move_in",
    "request_move_out",
]
