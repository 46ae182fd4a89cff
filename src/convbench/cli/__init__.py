"""The `convbench` command line."""
