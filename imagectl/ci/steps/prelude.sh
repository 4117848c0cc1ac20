#!/bin/sh
# The start of every step that `imagectl matrix --format tekton|argo` generates (then build.sh, index.sh or
# promote.sh).  Every value comes from the environment, never from text substituted into the script:
#   GIT_URL, GIT_REVISION      the repository to build from (imagectl.toml, matrices/); no GIT_URL: imagectl's own
#   SOURCE_DIR                 the folder to check it out into and run in
#   REGISTRY_URL, REGISTRY_NAMESPACE  [registry] url and namespace (empty: imagectl.toml's)
#   DOCKER_CONFIG_DIR          a folder whose config.json holds the registry credentials (empty: the pod's own)
set -eu
export IMAGECTL_BUILD_ENGINE=buildah
if [ -n "${REGISTRY_URL:-}" ]; then export IMAGECTL_REGISTRY_URL="$REGISTRY_URL"; fi
if [ -n "${REGISTRY_NAMESPACE:-}" ]; then export IMAGECTL_REGISTRY_NAMESPACE="$REGISTRY_NAMESPACE"; fi
if [ -n "${DOCKER_CONFIG_DIR:-}" ]; then export DOCKER_CONFIG="$DOCKER_CONFIG_DIR"; fi
mkdir -p "$SOURCE_DIR"
cd "$SOURCE_DIR"
if [ -n "${GIT_URL:-}" ]; then
  git init -q .
  git fetch -q --depth 1 -- "$GIT_URL" "${GIT_REVISION:-HEAD}"
  git checkout -q FETCH_HEAD
fi
