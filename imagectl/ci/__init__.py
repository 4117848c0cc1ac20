"""What CI systems consume from the matrix.

- :mod:`imagectl.ci.outputs`: the profile list as JSON, a GitHub Actions ``strategy.matrix``, a GitLab
  ``parallel:matrix`` child pipeline, a Markdown compatibility table (pure functions over profiles);
- :mod:`imagectl.ci.changes`: which profiles changed since a git ref (``--changed-since``).

Checking the matrix against upstream (``matrix verify``, ``matrix sync``) is :mod:`imagectl.upstream`.
"""
