"""The matrix against what upstream publishes: ``matrix verify`` (every pin against the wheels' own metadata)
and ``matrix sync`` (releases the matrix lacks), over the package-index reader in :mod:`imagectl.pypi`."""
