"""Test-wide settings. Qt must be told to render offscreen before it loads."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# apps with no URL configured look for routers by discovery first: in tests they must
# not find a router elsewhere on the host or network (discovery tests opt back in)
os.environ.setdefault("ELVIN_DISCOVERY", "off")
