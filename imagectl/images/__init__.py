"""The image pipeline, the orchestration layer: plan (a build request planned once), build (reuse or build, check,
tag, push) and import.

It sits above the tag manager, the engine seam, the renderer and the in-image check, and is the only layer
that uses them together; the CLI calls into it and formats what it returns.
"""
