"""Locks: the whole dependency set of an image, every package with its hashes, made by a real resolver.

- :mod:`.lockfile`: the file format (a pip requirements file in hash-checking mode with a header), pure.
- :mod:`.target`: what a lock is resolved for (index, Python, platform, as-of date) and its identity.
- :mod:`.resolve`: ``uv pip compile`` behind one function.
- :mod:`.asof`: the ``--as-of`` policies (a date, ``release``, ``latest``).
- :mod:`.layers`: the lock split into the install layers of the framework's ``layers`` (data, not code).
- :mod:`.store`: finding a profile's lock (the team's lock directories, then the shipped ones) and writing one.
- :mod:`.extras`: a team's extras resolved on top of a profile's lock.
- :mod:`.verify`: ``imagectl lock --check``: a shipped lock against the matrix and the index.
- :mod:`.make`: the orchestration: the lock a build installs, locked at build time when none is found.
"""
