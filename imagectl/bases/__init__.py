"""Bases in custody: every base image the matrix uses, copied by digest (every platform of an index, and the
artifacts that refer to it) into the team registry at ``REGISTRY/NAMESPACE/bases/<upstream path>:<upstream tag>``,
so a team can rebuild and roll back after NVIDIA deletes or moves a tag.

- :mod:`.naming`: which bases the matrix uses and where the team keeps each one (pure).
- :mod:`.eol`: whether a base's CUDA release is past end of life per NVIDIA's support policy (pure, from the matrix).
- :mod:`.sync`: ``bases sync``, registry to registry with imagectl's own client (no engine pull), referrers copied
  with :func:`imagectl.registry.referrers.copy_referrers`.
- :mod:`.status`: ``bases status``: held, moved, gone, end of life.
- :mod:`.custody`: what a build asks: the team copy's pinned digest beside the upstream tag's.
- :mod:`.clients`: one registry client per host for a whole run; a host that is down is asked once.

The pinned digest of a base is what its team copy's tag names: ``bases sync`` writes it (and a second tag,
``<tag>--<12 hex of the digest>``, so an earlier pin stays reachable after a later sync moves the tag), and a
build takes that digest from the team copy, warning when the upstream tag has moved or is gone
(:mod:`imagectl.images.base_digest`).
"""
