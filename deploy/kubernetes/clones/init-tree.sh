#!/bin/sh
# The server pod's init container: the repository cloned into the server's tree when the
# tree is empty (the volume's first start). A tree that is there is kept as it is: it
# holds the landed work and the landed line (.codefleet/landed.git).
#
#   CODEFLEET_REPOSITORY      the repository to clone (required)
#   CODEFLEET_REPOSITORY_REF  a branch or tag to check out (empty: the default branch)
#   CODEFLEET_TREE            the tree (default /srv/tree)
#
# git's credentials, if the repository needs any, come from the environment
# (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n), never from the URL.
set -eu
tree="${CODEFLEET_TREE:-/srv/tree}"
if [ -n "$(ls -A "$tree" 2>/dev/null)" ]; then
  echo "the tree $tree is not empty: kept"
  exit 0
fi
url="${CODEFLEET_REPOSITORY:?set CODEFLEET_REPOSITORY to the repository to clone}"
if [ -n "${CODEFLEET_REPOSITORY_REF:-}" ]; then
  git clone --branch "$CODEFLEET_REPOSITORY_REF" -- "$url" "$tree"
else
  git clone -- "$url" "$tree"
fi
