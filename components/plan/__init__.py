"""The offline plan: the whole program on Pulumi's mock engine, recorded and written for review."""
