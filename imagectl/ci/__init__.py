"""What CI systems consume from the matrix, and how the matrix is kept current.

- :mod:`imagectl.ci.outputs`: the profile list as JSON, a GitHub Actions ``strategy.matrix``, a GitLab
  ``parallel:matrix`` child pipeline, a Markdown compatibility table (pure functions over profiles);
- :mod:`imagectl.ci.changes`: which profiles changed since a git ref (``--changed-since``);
- :mod:`imagectl.ci.builds`: the builds a package index publishes for a release (wheel choice, facts);
- :mod:`imagectl.ci.verify`: the matrix's pins compared with an index's PEP 658 metadata;
- :mod:`imagectl.ci.sync`: proposed matrix entries for upstream releases the matrix lacks.
"""
