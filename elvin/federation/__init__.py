"""Router federation: links between routers (Elvin Federation Protocol) and
the event-domain topology manager.

* ``packets``     federation packets and their XDR codec (sans-IO)
* ``subast``      the SubAST wire form of pull filters (as Avis writes it)
* ``pullfilter``  what a router asks each peer for (sans-IO)
* ``config``      ``RouterConfig.federation``: the ``[federation]`` TOML table
* ``service``     ``FederationService``: listeners, accepted domains, pull
  filters, forwarding
* ``host``        ``FederationHost``: all the service needs from its router
* ``link``        one link's protocol state machine; ``connector`` redials
* ``admission``   who may link: accept rules, peers' addresses and
  certificates, warnings about open doors; ``hosts`` parses and matches host
  patterns (sans-IO); ``tlsaccept`` runs a TLS listener's handshakes
* ``domain``      the MEDIator paper's event domains; ``topology_file`` for
  topology files; the ``elvin-domain`` command in ``domain_cli``
"""
