#!/usr/bin/env bash
# Step: check the OS is one mlcluster supports and report its family.
set -euo pipefail
detect_os
ok "os $OS_ID $OS_VERSION_ID ($OS_FAMILY family)"
