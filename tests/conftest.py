"""Test-wide settings. Qt must be told to render offscreen before it loads."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
