"""The typed stack configuration: schema machinery, checks, sections and the loader."""
