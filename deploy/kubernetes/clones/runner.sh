#!/bin/sh
# One runner pod: an empty directory, its own clone of the server's landed line, and
# the lock over the wire (no shared volume). The runner Deployment of
# deploy/kubernetes/clones runs this script from the ConfigMap its kustomization generates
# (codefleet-scripts, mounted at /etc/codefleet), and the tier that runs pods in network
# namespaces (tests/hosts) runs this same file: one command for both.
#
#   CODEFLEET_SERVER_URL  the server, e.g. http://codefleet:8099 (required)
#   CODEFLEET_TOKEN       the server's token (codefleet reads it from the environment)
#   POD_NAME              this runner's name: the pod's (required)
#   CODEFLEET_CLONE_DIR   where the clone lives (default /work/clone, in the pod's emptyDir)
#
# Extra arguments go to `codefleet runner` (the tests add --dry-run --script FILE).
# --replace: a container restarted in the same pod takes its own name back at once.
set -eu
exec codefleet runner \
  --name "${POD_NAME:?set POD_NAME to this runner's name}" \
  --server "${CODEFLEET_SERVER_URL:?set CODEFLEET_SERVER_URL to the server's URL}" \
  --clone "${CODEFLEET_CLONE_DIR:-/work/clone}" \
  --replace \
  "$@"
