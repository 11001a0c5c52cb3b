"""The cluster half: what runs on the nodes over SSH (pulumi-command), from each node's script copy and
preparation through kubeadm init, joins, certificates and day-2 care, or a managed cluster's provider."""
