"""What CI systems consume from the matrix.

- :mod:`imagectl.ci.outputs`: the profile list as JSON, a GitHub Actions ``strategy.matrix``, a GitLab
  ``parallel:matrix`` child pipeline, Tekton Tasks and a Pipeline (:mod:`~imagectl.ci.tekton`), an Argo Workflow
  (:mod:`~imagectl.ci.argo`), a Markdown compatibility table (pure functions over profiles); the rows they fan out
  over (:mod:`~imagectl.ci.rows`), the YAML they write (:mod:`~imagectl.ci.yaml_text`), the steps the Kubernetes
  ones share (:mod:`~imagectl.ci.kube_steps`, the shell in ``steps/``);
- :mod:`imagectl.ci.image_results`: run in those steps, the pushed image as IMAGE_URL and IMAGE_DIGEST;
- :mod:`imagectl.ci.changes`: which profiles changed since a git ref (``--changed-since``).

Checking the matrix against upstream (``matrix verify``, ``matrix sync``) is :mod:`imagectl.upstream`.
"""
