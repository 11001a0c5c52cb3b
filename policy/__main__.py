"""The mlcluster policy pack: `pulumi preview --policy-pack policy` (the CLI runs this file)."""

from mlcluster_policies import ENFORCEMENT, POLICIES
from pulumi_policy import PolicyPack

PolicyPack(name="mlcluster", enforcement_level=ENFORCEMENT, policies=POLICIES)
