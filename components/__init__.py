"""mlcluster: bare GPU servers to a machine-learning platform in one `pulumi up`."""
