#!/usr/bin/env bash
# A marker on the control plane: creating it does nothing; deleting it (node removed) drains the node.
set -euo pipefail
: "${NODE_NAME:?}"
ok "$NODE_NAME will be drained and deleted from this control plane when it leaves the stack"
