"""``python -m elvin.pipeline`` = ``elvin-pipeline``."""

from elvin.pipeline.launch import main

main()
