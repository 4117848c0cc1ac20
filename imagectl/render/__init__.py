"""Rendering: profile -> plain context dict -> Dockerfile and build context (see :mod:`.context`)."""
