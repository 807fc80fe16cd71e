"""File modes of the traffic archive, in a module of their own so that the
router (which never imports pyarrow) and the writer share them.

The archive may hold what producers sent only to key holders
(``elvind --archive-private``), and always holds who talked how much: it is
its writer's alone by default. Files are created 0600 and the directories
the archive creates 0700; a directory that already exists keeps its mode.
"""

PRIVATE_FILE = 0o600
PRIVATE_DIRECTORY = 0o700

__all__ = ["PRIVATE_DIRECTORY", "PRIVATE_FILE"]
