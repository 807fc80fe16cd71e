"""Router federation: links between routers (Elvin Federation Protocol) and
the event-domain topology manager (``elvin.federation.domain``, the MEDIator
paper's event domains; ``elvin.federation.topology_file`` for topology files;
the ``elvin-domain`` command in ``elvin.federation.domain_cli``)."""
