"""Programs that run inside an image, by the image's own Python, shipped as package data (the wheel carries every
file under ``imagectl/``).  Each is a real module that ruff checks and the unit tests import, run and exercise.

They use the standard library alone and never import imagectl (an image has neither imagectl nor its
dependencies), and they keep to syntax every Python of the matrices runs (3.8 and later).  The host side of each
says how it is started (:mod:`imagectl.assemble.compile` for :mod:`.compile_probe`).
"""
