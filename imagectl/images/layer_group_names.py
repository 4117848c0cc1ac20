"""The names of the layer groups that are not a lock's install layers (those are named by ``[framework] layers``):
one place for :mod:`.image_facts` (a built image's groups, read from its history) and :mod:`.size` (the groups an
image is expected to have), and nothing imported, so ``show`` loads them for free."""

SYSTEM_GROUP = "system"  # the base image and the layers the engine adds to it (Python, venv, JIT packages, CA)
EXTRAS_GROUP = "extras"  # a team's extras (extras-lock.txt)
IMAGECTL_GROUP = "imagectl"  # above the lock: /opt/imagectl's files, an assembled build's .pyc
