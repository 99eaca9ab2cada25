"""Policies (Mozilla profiles, policy files) and findings: model values in, findings out.
Loading raises PolicyError; commands turn it into a usage error."""
